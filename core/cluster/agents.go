package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/topology"
)

// agentService answers the agents of this cluster.
type agentService struct{ c *Cluster }

func (s *agentService) Register(ctx context.Context, req *connect.Request[unyov1.RegisterRequest]) (*connect.Response[unyov1.RegisterResponse], error) {
	n := req.Msg.GetNode()
	if err := validNode(n); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	p := server.PrincipalFrom(ctx)
	old, err := s.c.store.GetNode(ctx, n.GetName())
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, internal(fmt.Errorf("look up node %q: %w", n.GetName(), err))
	case p.Kind == server.KindJoin && err == nil:
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %q is enrolled already, and a join token cannot take it over: its agent presents the node's own credential (kept in its data directory); to enrol this machine again, an admin runs `unyo nodes delete %s` first", n.GetName(), n.GetName()))
	case p.Kind != server.KindJoin:
		if err := server.RequireNode(ctx, n.GetName()); err != nil {
			return nil, err
		}
	}
	addr, err := probeAddress(n.GetAddress(), p.From)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("node.address: %w", err))
	}
	n.Address = addr
	// Whether the node is a compute's agent is the cluster's to say, from
	// the proxy that forwarded the call, never the agent's: its record goes
	// with its compute (computeagents.go).
	delete(n.Labels, LabelViaNode)
	if p.Via != "" {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[LabelViaNode] = p.Via
	}
	token, cert, err := s.c.enrol(ctx, p, n.GetName(), req.Msg.GetCsr())
	if err != nil {
		return nil, err
	}
	n.Cluster = s.c.opts.Name
	n.LastHeartbeat = timestamppb.Now()
	// Where the node sits is root's to say (SetNodeTopology), not the
	// agent's: it is kept from the node's record.
	n.Resource, n.TopologyLabels, n.TopologyReason = old.GetResource(), old.GetTopologyLabels(), old.GetTopologyReason()
	// A node registering again keeps its liveness state: only heartbeats
	// make a Down node Ready, and that is an event.
	n.State = unyov1.NodeState_NODE_STATE_UNSPECIFIED
	if old != nil {
		n.State = old.GetState()
	}
	if err := s.c.store.UpsertNode(ctx, n); err != nil {
		if token != "" || (cert != nil && p.Kind == server.KindJoin) { // let the agent enrol again with its join token
			kind := store.CredNode
			if cert != nil {
				kind = store.CredNodeCert
			}
			if derr := s.c.store.DeleteCredential(context.WithoutCancel(ctx), kind, n.GetName()); derr != nil {
				s.c.log.Warn("withdrawing the credential of a node whose registration failed failed too; an admin may need to run unyo nodes delete", "node", n.GetName(), "err", derr)
			}
		}
		return nil, internal(fmt.Errorf("register node %q: %w", n.GetName(), err))
	}
	if p.Via != "" {
		// An agent inside a compute (through its node's proxy) is no
		// place for replicas.
		if _, err := s.c.store.SetNodeCordoned(ctx, n.GetName(), true); err != nil {
			return nil, internal(fmt.Errorf("cordon compute agent %q: %w", n.GetName(), err))
		}
	}
	s.c.remember(n)
	s.c.knownMu.Lock()
	s.c.nodePlugins[n.GetName()] = n.GetPlugins()
	s.c.nodeProviders[n.GetName()] = n.GetProviders()
	s.c.knownMu.Unlock()
	if placement.ProvidersKey(old.GetProviders()) != placement.ProvidersKey(n.GetProviders()) {
		s.c.kickPlacement()
	}
	s.c.beats.add(n.GetName(), time.Now())
	if old == nil || topology.NodeIdentity(old) != topology.NodeIdentity(n) {
		s.c.nodeIdentityChanged()
	}
	s.c.log.Info("node registered", "node", n.GetName(), "labels", n.GetLabels(), "by", p.String(), "enrolled", token != "", "certificate_issued", cert != nil)
	return connect.NewResponse(&unyov1.RegisterResponse{
		Cluster:           s.c.opts.Name,
		HeartbeatInterval: durationpb.New(s.c.opts.HeartbeatInterval),
		NodeToken:         token,
		NodeCertificate:   cert,
	}), nil
}

// RenewCertificate signs a new certificate for the calling node, which
// presents its current one (or its token); the new serial replaces the old,
// so the old certificate stops working.
func (s *agentService) RenewCertificate(ctx context.Context, req *connect.Request[unyov1.RenewCertificateRequest]) (*connect.Response[unyov1.RenewCertificateResponse], error) {
	node := req.Msg.GetNode()
	if err := server.RequireNode(ctx, node); err != nil {
		return nil, err
	}
	if s.c.opts.NodeCA == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cluster %q has no node CA (cluster.node_ca), so its nodes authenticate with their tokens, not certificates", s.c.opts.Name))
	}
	if _, err := s.c.store.GetNode(ctx, node); errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q is not registered in cluster %q", node, s.c.opts.Name))
	} else if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("look up node %q: %w", node, err))
	}
	cert, err := s.c.signNode(ctx, server.PrincipalFrom(ctx), node, req.Msg.GetCsr())
	s.c.audit.Record(ctx, "AgentService/RenewCertificate", rbac.Target{Kind: "NodeCertificate", Name: node, Cluster: s.c.opts.Name}, nil, nil, err)
	if err != nil {
		return nil, err
	}
	s.c.log.Info("renewed the certificate of a node; its previous certificate no longer works", "node", node, "by", server.PrincipalFrom(ctx).String())
	return connect.NewResponse(&unyov1.RenewCertificateResponse{Certificate: cert}), nil
}

// notePlugins keeps the plugin statuses a node's heartbeat carried: they are
// written to the node's record when they differ from the ones last written
// (by this replica, or as read with the node). A failed write is logged and
// tried again with the next heartbeat; the heartbeat itself goes on.
func (c *Cluster) notePlugins(ctx context.Context, n *unyov1.Node, plugins []*unyov1.PluginStatus) {
	noteList(c, ctx, n, "plugin statuses", c.nodePlugins, n.GetPlugins(), plugins, c.store.SetNodePlugins)
}

// noteProviders keeps the provider statuses (fingerprints) a node's
// heartbeat carried, as notePlugins does the plugins'; when what the
// scheduler reads of them changed (a provider turned healthy, a capacity
// moved), Blocked computes are placed again at once.
func (c *Cluster) noteProviders(ctx context.Context, n *unyov1.Node, providers []*unyov1.ProviderStatus) {
	c.knownMu.Lock()
	before, ok := c.nodeProviders[n.GetName()]
	c.knownMu.Unlock()
	if !ok {
		before = n.GetProviders()
	}
	if noteList(c, ctx, n, "provider statuses", c.nodeProviders, n.GetProviders(), providers, c.store.SetNodeProviders) &&
		placement.ProvidersKey(before) != placement.ProvidersKey(providers) {
		c.log.Info("the providers of a node changed", "node", n.GetName(), "providers", placement.ProvidersKey(providers))
		c.kickPlacement()
	}
}

// noteList writes a list a heartbeat carried to the node's record (with
// set) when it differs from the one last written, kept in last (guarded
// by knownMu; stored is the node's as read). It says whether it wrote.
func noteList[T proto.Message](c *Cluster, ctx context.Context, n *unyov1.Node, what string, last map[string][]T, stored, now []T,
	set func(ctx context.Context, name string, list []T) error) bool {
	name := n.GetName()
	c.knownMu.Lock()
	prev, ok := last[name]
	if !ok {
		prev = stored
	}
	same := slices.EqualFunc(prev, now, func(a, b T) bool { return proto.Equal(a, b) })
	if same && !ok {
		last[name] = prev
	}
	c.knownMu.Unlock()
	if same {
		return false
	}
	if err := set(ctx, name, now); err != nil {
		c.log.Warn("recording the "+what+" of a node failed; will retry with its next heartbeat", "node", name, "err", err)
		return false
	}
	c.knownMu.Lock()
	last[name] = now
	c.knownMu.Unlock()
	return true
}

func (c *Cluster) remember(n *unyov1.Node) {
	c.knownMu.Lock()
	c.known[n.GetName()] = n
	c.knownMu.Unlock()
}

// agentNode returns the registered node a request acts as, from memory when
// possible, after checking that the caller may act as it (the node itself,
// or an admin). An unknown node gets NotFound, which tells its agent to
// register again (after the cluster's database was replaced, for example).
func (c *Cluster) agentNode(ctx context.Context, name string) (*unyov1.Node, error) {
	if err := server.RequireNode(ctx, name); err != nil {
		return nil, err
	}
	c.knownMu.Lock()
	n, ok := c.known[name]
	c.knownMu.Unlock()
	if ok {
		return n, nil
	}
	n, err := c.store.GetNode(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q is not registered with cluster %q; register it first", name, c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("look up node %q: %w", name, err))
	}
	c.remember(n)
	return n, nil
}

func (s *agentService) Heartbeat(ctx context.Context, req *connect.Request[unyov1.HeartbeatRequest]) (*connect.Response[unyov1.HeartbeatResponse], error) {
	if err := validPlugins("plugins", req.Msg.GetPlugins()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := validProviders("providers", req.Msg.GetProviders()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	n, err := s.c.agentNode(ctx, req.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	s.c.beats.add(req.Msg.GetNode(), time.Now())
	if !req.Msg.GetPluginsUnchanged() {
		s.c.notePlugins(ctx, n, req.Msg.GetPlugins())
	}
	if !req.Msg.GetProvidersUnchanged() {
		s.c.noteProviders(ctx, n, req.Msg.GetProviders())
	}
	rev, err := s.c.revisions.get(ctx)
	if err != nil {
		return nil, internal(fmt.Errorf("read checks revision: %w", err))
	}
	return connect.NewResponse(&unyov1.HeartbeatResponse{ChecksRevision: checksRevisionFor(rev, n)}), nil
}

// maxResultsPerReport bounds one request so a confused agent cannot make the
// cluster hold an unbounded batch in memory.
const maxResultsPerReport = 10000

func (s *agentService) ReportResults(ctx context.Context, req *connect.Request[unyov1.ReportResultsRequest]) (*connect.Response[unyov1.ReportResultsResponse], error) {
	node := req.Msg.GetNode()
	n, err := s.c.agentNode(ctx, node)
	if err != nil {
		return nil, err
	}
	if n := len(req.Msg.GetResults()); n > maxResultsPerReport {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("results: %d in one report, at most %d", n, maxResultsPerReport))
	}
	res, err := s.c.ingest.Ingest(ctx, ingest.Batch{Source: ingest.Agent, Node: node, Labels: topology.NodeLabels(n), Events: req.Msg.GetResults()})
	if err != nil {
		// Nothing is acknowledged: the agent keeps the batch and resends it.
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("results from node %q: %w", node, err))
	}
	if res.Stored+res.Duplicates+res.Filtered > 0 {
		s.c.noteAccepted() // the cluster's ingest age, for its watchers
	}
	s.c.count(`unyo_ingest_results_total{outcome="stored"}`, res.Stored)
	s.c.count(`unyo_ingest_results_total{outcome="duplicate"}`, res.Duplicates)
	s.c.count(`unyo_ingest_results_total{outcome="filtered"}`, res.Filtered)
	s.c.count(`unyo_ingest_results_total{outcome="deleted_check"}`, res.DeletedCheck)
	s.c.count(`unyo_ingest_results_total{outcome="rejected"}`, len(res.Rejected))
	resp := &unyov1.ReportResultsResponse{
		// Results of a deleted check were dropped on purpose, as filtered
		// ones are: the agent must not resend them.
		Accepted: int32(res.Stored), Duplicates: int32(res.Duplicates), Filtered: int32(res.Filtered + res.DeletedCheck), Rejected: res.Rejected,
	}
	if len(resp.Rejected) > 0 {
		s.c.log.Warn("rejected malformed results", "node", node, "count", len(resp.Rejected), "first", resp.Rejected[0])
	}
	return connect.NewResponse(resp), nil
}

func (s *agentService) GetChecks(ctx context.Context, req *connect.Request[unyov1.GetChecksRequest]) (*connect.Response[unyov1.GetChecksResponse], error) {
	n, err := s.c.agentNode(ctx, req.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	// Read the revision first: if a check changes in between, the agent sees
	// a newer revision on its next heartbeat and fetches again.
	rev, err := s.c.store.ChecksRevision(ctx)
	if err != nil {
		return nil, internal(fmt.Errorf("read checks revision: %w", err))
	}
	all, err := s.c.store.ListChecks(ctx)
	if err != nil {
		return nil, internal(fmt.Errorf("list checks: %w", err))
	}
	resp := &unyov1.GetChecksResponse{Revision: checksRevisionFor(rev, n)}
	labels := topology.NodeLabels(n)
	for _, ch := range all {
		d, err := checks.Compile(ch)
		if err != nil {
			s.c.log.Warn("stored check no longer valid; not sent to agents", "check", ch.GetName(), "err", err)
			continue
		}
		// Metric checks run in the cluster (metricchecks.go), not on agents.
		if d.Metric == nil && d.Selects(labels) {
			resp.Checks = append(resp.Checks, ch)
		}
	}
	return connect.NewResponse(resp), nil
}

func internal(err error) error { return connect.NewError(connect.CodeInternal, err) }
