package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/heal"
	"github.com/unyo-ops/unyo/provision/replace"
)

// The contract's phase words and reason codes (provisioning, part 2).
const (
	PhaseInitializing = "Initializing"
	PhaseScheduled    = "Creating:Scheduled"
	PhaseActive       = "Active"
	PhaseDeleting     = "Deleting"
	PhaseFailed       = "Failed"
	PhaseBlocked      = "Blocked"

	ReasonNoCapacity    = "NoCapacity"
	ReasonUnsatisfiable = "Unsatisfiable"
	ReasonProviderError = "ProviderError"
)

// Assignment states an agent reports, and what an assignment wants.
const (
	StateCreating = "creating"
	StateRunning  = "running"
	StateFailed   = "failed"
	StateDeleted  = "deleted"
)

// provisionService is the cluster's ProvisionService: root syncs the
// computes it placed here; agents fetch their assignments and report.
type provisionService struct{ c *Cluster }

// maxComputesPerSync bounds one SyncComputes request.
const maxComputesPerSync = 100000

// SyncComputes takes the full set of computes root wants on this cluster.
// Only root (or an admin) may call it: the procedure needs the admin
// level, which root's credential has and a node's has not.
func (s *provisionService) SyncComputes(ctx context.Context, req *connect.Request[unyov1.SyncComputesRequest]) (*connect.Response[unyov1.SyncComputesResponse], error) {
	p := server.PrincipalFrom(ctx)
	if p.Kind == server.KindNode || !p.InCluster(s.c.opts.Name) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not sync the computes of cluster %q", p, s.c.opts.Name))
	}
	cs := req.Msg.GetComputes()
	if len(cs) > maxComputesPerSync {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("computes: %d in one sync, at most %d", len(cs), maxComputesPerSync))
	}
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		if err := s.validCompute(fmt.Sprintf("computes[%d]", i), c); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if seen[c.GetName()] {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("computes[%d]: %s is listed twice", i, c.GetName()))
		}
		seen[c.GetName()] = true
	}
	held, err := s.c.store.SyncComputes(ctx, cs, time.Now())
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	lbs, err := s.syncLoadbalancers(ctx, req.Msg.GetLoadbalancers())
	if err != nil {
		return nil, err
	}
	s.c.kickPlacement()
	s.c.assignments.notify()
	return connect.NewResponse(&unyov1.SyncComputesResponse{Computes: held, Loadbalancers: lbs}), nil
}

func (s *provisionService) validCompute(field string, c *unyov1.Compute) error {
	if err := validate.Name(c.GetName()); err != nil {
		return fmt.Errorf("%s.name: %w", field, err)
	}
	if err := validate.Name(c.GetService()); err != nil {
		return fmt.Errorf("%s.service: %w", field, err)
	}
	if c.GetCluster() != "" && c.GetCluster() != s.c.opts.Name {
		return fmt.Errorf("%s: compute %s is for cluster %q, this is %q", field, c.GetName(), c.GetCluster(), s.c.opts.Name)
	}
	if c.GetSpec().GetProvider() == "" {
		return fmt.Errorf("%s.spec.provider: compute %s names no provider", field, c.GetName())
	}
	r := c.GetResources()
	if r.GetVcpus() < 0 || r.GetMemoryBytes() < 0 || r.GetDiskBytes() < 0 {
		return fmt.Errorf("%s.resources: negative", field)
	}
	return nil
}

// assignmentsWait is how long GetAssignments waits for a change past the
// agent's generation before answering with what there is; storePoll is how
// often it rereads the store meanwhile, for changes another replica made.
const (
	assignmentsWait = 20 * time.Second
	storePoll       = 500 * time.Millisecond
)

// agentNodeName is the node an agent acts for: its credential's, never the
// request's; an admin (or anybody without authentication) names the node.
func agentNodeName(ctx context.Context, asked string) (string, error) {
	p := server.PrincipalFrom(ctx)
	if p.Kind == server.KindNode {
		if asked != "" && asked != p.Name {
			return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %q may not act for node %q", p.Name, asked))
		}
		return p.Name, nil
	}
	if err := server.RequireNode(ctx, asked); err != nil {
		return "", err
	}
	if asked == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("node: required"))
	}
	return asked, nil
}

func (s *provisionService) GetAssignments(ctx context.Context, req *connect.Request[unyov1.GetAssignmentsRequest]) (*connect.Response[unyov1.GetAssignmentsResponse], error) {
	node, err := agentNodeName(ctx, req.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	since := req.Msg.GetSinceGeneration()
	deadline := time.NewTimer(assignmentsWait)
	defer deadline.Stop()
	poll := time.NewTicker(storePoll)
	defer poll.Stop()
	for {
		woken := s.c.assignments.wait()
		gen, err := s.c.store.AssignmentsGeneration(ctx)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		if since == 0 || gen != since {
			break
		}
		select {
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-deadline.C:
		case <-woken:
			continue
		case <-poll.C:
			continue
		}
		break
	}
	as, gen, err := s.c.store.ListAssignments(ctx, node)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(&unyov1.GetAssignmentsResponse{Assignments: as, Generation: gen}), nil
}

// maxStatesPerReport bounds one ReportAssignments request.
const maxStatesPerReport = 10000

// ReportAssignments takes what an agent did with its assignments: running
// makes the compute Active, failed makes it Failed (ProviderError with the
// provider's words), deleted ends a compute being deleted and releases its
// reservation. States of computes not assigned to the node are ignored.
func (s *provisionService) ReportAssignments(ctx context.Context, req *connect.Request[unyov1.ReportAssignmentsRequest]) (*connect.Response[unyov1.ReportAssignmentsResponse], error) {
	node, err := agentNodeName(ctx, req.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	if n := len(req.Msg.GetStates()); n > maxStatesPerReport {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("states: %d in one report, at most %d", n, maxStatesPerReport))
	}
	changed := false
	for _, st := range req.Msg.GetStates() {
		c, err := s.c.store.GetCompute(ctx, st.GetCompute())
		if errors.Is(err, store.ErrNotFound) {
			// A load balancer's, or gone.
			did, err := s.reportLoadbalancerNamed(ctx, node, st)
			if err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, err)
			}
			changed = changed || did
			continue
		}
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		did, err := s.report(ctx, node, c, st)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		changed = changed || did
	}
	if changed {
		s.c.kickPlacement()
		s.c.assignments.notify()
	}
	return connect.NewResponse(&unyov1.ReportAssignmentsResponse{}), nil
}

// report applies node's report st of compute c: the state of its current
// instance, or of its next one (a replacement, see replace.go).
func (s *provisionService) report(ctx context.Context, node string, c *unyov1.Compute, st *unyov1.AssignmentState) (bool, error) {
	name := c.GetName()
	now := s.c.now()
	switch replace.OnReport(replaceView(c), node, st.GetState()) {
	case replace.Ignore:
		if node != c.GetStatus().GetNode() && node != c.GetStatus().GetReplacingNode() {
			s.c.log.Warn("an agent reported a compute not assigned to it; ignored", "node", node, "compute", name, "assigned_to", c.GetStatus().GetNode())
		}
		return false, nil
	case replace.Drop:
		if err := s.c.store.DropCompute(ctx, name); err != nil {
			return false, err
		}
		s.c.log.Info("compute deleted; reservation released", "compute", name, "node", node)
		s.c.computeDropped()
	case replace.CurrentGone:
		if err := s.c.store.CurrentGone(ctx, name, node, now); err != nil {
			return false, err
		}
		s.c.log.Info("the replaced instance is deleted; its reservation released", "compute", name, "node", node, "now_on", c.GetStatus().GetReplacingNode())
	case replace.NextGone:
		if err := s.c.store.NextGone(ctx, name); err != nil {
			return false, err
		}
		s.c.log.Info("a called-off replacement is deleted; its reservation released", "compute", name, "node", node)
	case replace.NextActive:
		if err := s.c.store.SetReplacement(ctx, name, store.ReplacementUpdate{Phase: replace.Active, RetireCurrent: true, Next: node, At: now}); err != nil {
			return false, err
		}
		s.c.log.Info("replacement Active; removing the instance it replaces", "compute", name, "node", c.GetStatus().GetNode(), "next_node", node)
	case replace.NextFailed:
		if err := s.c.store.SetReplacement(ctx, name, store.ReplacementUpdate{Phase: replace.Failed, Message: st.GetMessage(), Next: node, At: now}); err != nil {
			return false, err
		}
	case replace.Status:
		deleting := c.GetStatus().GetPhase() == PhaseDeleting
		replacing := c.GetStatus().GetPhase() == PhaseUpdating
		if st.GetState() == StateDeleted && replacing {
			// The old instance of a replica being replaced in place (or
			// re-created after a failure) is gone: back to the node stage.
			released, err := s.c.store.ReleaseCompute(ctx, name, node, true, releasedStatus(c.GetStatus(), s.c.now()))
			if err != nil {
				return false, err
			}
			if released {
				s.c.log.Info("a replaced compute's old instance is gone; placing it anew", "compute", name, "node", node)
			}
			return released, nil
		}
		next := applyState(c, st, deleting || replacing, now)
		if next == nil {
			return false, nil
		}
		if err := s.c.store.SetComputeStatus(ctx, name, next); err != nil {
			return false, err
		}
		s.raiseFailure(ctx, c, node, next)
	}
	return true, nil
}

// raiseFailure records an event when a compute's provider failed it (an
// image missing, a container that exits at once, dockerd refusing), and
// the recovery when a failed compute runs again: what rules alert on, as
// on a compute that cannot be placed.
func (s *provisionService) raiseFailure(ctx context.Context, c *unyov1.Compute, node string, next *unyov1.ComputeStatus) {
	was := c.GetStatus().GetPhase()
	switch {
	case next.GetPhase() == PhaseFailed && was != PhaseFailed:
		s.c.raiseCompute(ctx, c, unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
			fmt.Sprintf("%s %s - compute %s on node %s: %s", PhaseFailed, next.GetReason(), c.GetName(), node, next.GetMessage()))
	case next.GetPhase() == PhaseActive && was == PhaseFailed:
		s.c.raiseCompute(ctx, c, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("OK - compute %s runs on node %s", c.GetName(), node))
	}
}

// applyState is a compute's status after its agent reported st, or nil
// when nothing changes. A compute being deleted stays Deleting whatever
// the agent says until it says deleted.
func applyState(c *unyov1.Compute, st *unyov1.AssignmentState, deleting bool, now time.Time) *unyov1.ComputeStatus {
	cur := c.GetStatus()
	next := proto.CloneOf(cur)
	if next == nil {
		next = &unyov1.ComputeStatus{}
	}
	if st.GetHandle() != "" {
		next.Handle = st.GetHandle()
	}
	if st.GetAddress() != "" {
		next.Address = st.GetAddress()
	}
	if !deleting {
		switch st.GetState() {
		case StateRunning:
			if next.Phase != PhaseActive {
				// A new instance: its update checks are judged afresh.
				next.ActiveAt, next.Checks = timestamppb.New(now), nil
			}
			next.Phase, next.Reason, next.Message, next.Reasons = PhaseActive, "", "", nil
			// The instance runs the revision it was placed with; a
			// running replica's failures are forgiven.
			next.SpecRevision, next.Retry = c.GetSpecRevision(), nil
		case StateFailed:
			if cur.GetPhase() != PhaseFailed {
				// Counted once per failure; the healer retries after
				// the backoff.
				next.Retry = retryProto(heal.Failed(retryOf(cur.GetRetry()), cur.GetNode(), now))
			}
			next.Phase, next.Reason, next.Message, next.Reasons = PhaseFailed, ReasonProviderError, st.GetMessage(), nil
		}
	}
	if proto.Equal(next, cur) {
		return nil
	}
	next.UpdatedAt = timestamppb.New(now)
	return next
}

// kickPlacement wakes the node stage, if it runs on this replica.
func (c *Cluster) kickPlacement() {
	select {
	case c.placeKick <- struct{}{}:
	default:
	}
}

// broadcast wakes every waiter at once: wait returns a channel that
// notify closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// CordonNode cordons or uncordons a node. Uncordoning moves the node's
// generation, which makes the node stage try Blocked computes again.
func (s *nodeService) CordonNode(ctx context.Context, req *connect.Request[unyov1.CordonNodeRequest]) (*connect.Response[unyov1.CordonNodeResponse], error) {
	name := req.Msg.GetName()
	if mine, err := s.operates(ctx, req.Msg.GetCluster(), "cordon"); !mine {
		return connect.NewResponse(&unyov1.CordonNodeResponse{}), err
	}
	n, err := s.getNode(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.c.operatorCordon(ctx, n, req.Msg.GetCordoned()); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	changed, err := s.c.store.SetNodeCordoned(ctx, name, req.Msg.GetCordoned())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in cluster %q", name, s.c.opts.Name))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	changed = changed || (!req.Msg.GetCordoned() && n.GetDrain() != nil)
	resp := &unyov1.CordonNodeResponse{Found: 1}
	if changed {
		resp.Changed = 1
		what := "uncordoned"
		if req.Msg.GetCordoned() {
			what = "cordoned"
		}
		s.c.log.Info("node "+what, "node", name, "by", server.PrincipalFrom(ctx).String())
		s.c.audit.Record(ctx, "NodeService/CordonNode", rbac.Target{Kind: "Node", Name: name, Cluster: s.c.opts.Name}, nil, req.Msg, nil)
		s.c.kickPlacement()
	}
	return connect.NewResponse(resp), nil
}
