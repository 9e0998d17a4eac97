package cluster

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/replace"
)

// autoNodes is the automatic cordon and drain (the seeds' EnableAutoCordon,
// AutoCordonInterval, EnableAutoDrain, AutoDrainInterval) on the lease
// holder: a node not Ready for its cordon interval is cordoned, and
// uncordoned once Ready again as long (only when unyo cordoned it); not
// Ready for its drain interval, it is drained (with the default deadline,
// without force). Each action is an event (ingest.AutoCheck). The
// intervals are the cluster's (Options.AutoCordonAfter, AutoDrainAfter)
// unless the node has its own (SetNodeAuto).
type autoNodes struct {
	c    *Cluster
	poll time.Duration
	// readySince is when each node was first seen Ready again; after a
	// restart, the first look (a conservative start).
	readySince map[string]time.Time
}

func newAutoNodes(c *Cluster) *autoNodes {
	return &autoNodes{c: c, poll: time.Second, readySince: map[string]time.Time{}}
}

func (a *autoNodes) Run(ctx context.Context) {
	every(ctx, a.poll, func(ctx context.Context) {
		if err := a.pass(ctx); err != nil && ctx.Err() == nil {
			a.c.log.Warn("the automatic cordon and drain failed; will retry", "err", err)
		}
	})
}

// effectiveAuto is n's automatic settings in force.
func (c *Cluster) effectiveAuto(n *unyov1.Node) (cordon, drain time.Duration) {
	cordon, err := replace.ParseAfter(n.GetAuto().GetCordonAfter(), c.opts.AutoCordonAfter)
	if err != nil {
		cordon = c.opts.AutoCordonAfter
	}
	drain, err = replace.ParseAfter(n.GetAuto().GetDrainAfter(), c.opts.AutoDrainAfter)
	if err != nil {
		drain = c.opts.AutoDrainAfter
	}
	return cordon, drain
}

// withEffectiveAuto fills n's settings in force, for operators' reads.
func (c *Cluster) withEffectiveAuto(n *unyov1.Node) {
	cordon, drain := c.effectiveAuto(n)
	if n.Auto == nil {
		n.Auto = &unyov1.NodeAuto{}
	}
	n.Auto.EffectiveCordonAfter, n.Auto.EffectiveDrainAfter = afterString(cordon), afterString(drain)
}

func afterString(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

// pass acts on the nodes that need it. Only a node not Ready may be
// cordoned or drained, and only one unyo cordoned may be uncordoned (its
// auto state says so), so those are all it reads: every second, the rest
// of a large fleet, Ready, would cost decoding every node for nothing.
// readySince is kept for these nodes only; a node unyo has not cordoned
// needs none, and a node turns not Ready before unyo cordons it, which
// resets it.
func (a *autoNodes) pass(ctx context.Context) error {
	nodes, err := a.c.store.ListNodesMatching(ctx, store.NodeFilter{NotReady: true, Auto: true})
	if err != nil {
		return err
	}
	now := a.c.now()
	seen := map[string]bool{}
	for _, n := range nodes {
		name := n.GetName()
		seen[name] = true
		ready := n.GetState() == unyov1.NodeState_NODE_STATE_READY
		if !ready {
			delete(a.readySince, name)
		} else if _, ok := a.readySince[name]; !ok {
			a.readySince[name] = now
		}
		cordon, drain := a.c.effectiveAuto(n)
		if cordon <= 0 && drain <= 0 && !n.GetAuto().GetCordoned() {
			continue
		}
		since := n.GetLastHeartbeat().AsTime()
		if n.GetLastHeartbeat() == nil {
			since = n.GetRegisteredAt().AsTime()
		}
		act := replace.Auto(now, replace.AutoNode{
			Ready: ready, NotReadySince: since, ReadySince: a.readySince[name],
			Cordoned: n.GetCordoned(), AutoCordoned: n.GetAuto().GetCordoned(), Drained: n.GetDrain() != nil,
			CordonAfter: cordon, DrainAfter: drain,
		})
		if act == replace.AutoNone {
			continue
		}
		if err := a.apply(ctx, n, act, now.Sub(since)); err != nil {
			return err
		}
	}
	for name := range a.readySince {
		if !seen[name] {
			delete(a.readySince, name)
		}
	}
	return nil
}

func (a *autoNodes) apply(ctx context.Context, n *unyov1.Node, act replace.AutoAction, down time.Duration) error {
	name := n.GetName()
	auto := proto.CloneOf(n.GetAuto())
	if auto == nil {
		auto = &unyov1.NodeAuto{}
	}
	auto.EffectiveCordonAfter, auto.EffectiveDrainAfter = "", ""
	var out string
	status := unyov1.CheckStatus_CHECK_STATUS_WARNING
	switch act {
	case replace.AutoCordon:
		if _, err := a.c.store.SetNodeCordoned(ctx, name, true); err != nil {
			return err
		}
		auto.Cordoned = true
		out = fmt.Sprintf("WARNING - node %s cordoned automatically: not Ready (%s) for %s", name, n.GetState(), down.Round(time.Second))
	case replace.AutoUncordon:
		if _, err := a.c.store.SetNodeCordoned(ctx, name, false); err != nil {
			return err
		}
		auto.Cordoned = false
		status = unyov1.CheckStatus_CHECK_STATUS_OK
		out = fmt.Sprintf("OK - node %s uncordoned automatically: Ready again", name)
	case replace.AutoDrain:
		if _, err := a.c.startDrain(ctx, n, defaultDrainDeadline, false, "auto-drain"); err != nil {
			return err
		}
		auto.Cordoned = true
		status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
		out = fmt.Sprintf("CRITICAL - node %s drained automatically: not Ready (%s) for %s", name, n.GetState(), down.Round(time.Second))
	}
	if err := a.c.store.SetNodeAuto(ctx, name, auto); err != nil {
		return err
	}
	a.c.log.Info("automatic node operation", "node", name, "action", act.String(), "not_ready_for", down.Round(time.Second))
	a.c.raiseNodeOp(ctx, ingest.AutoCheck, name, status, out)
	a.c.kickPlacement()
	return nil
}

// SetNodeAuto sets a node's own automatic cordon and drain intervals.
func (s *nodeService) SetNodeAuto(ctx context.Context, req *connect.Request[unyov1.SetNodeAutoRequest]) (*connect.Response[unyov1.SetNodeAutoResponse], error) {
	m := req.Msg
	if mine, err := s.operates(ctx, m.GetCluster(), "change"); !mine {
		return connect.NewResponse(&unyov1.SetNodeAutoResponse{}), err
	}
	n, err := s.getNode(ctx, m.GetName())
	if err != nil {
		return nil, err
	}
	auto := proto.CloneOf(n.GetAuto())
	if auto == nil {
		auto = &unyov1.NodeAuto{}
	}
	set := func(field, v string, to *string) error {
		switch v {
		case "":
			return nil
		case "default":
			*to = ""
			return nil
		}
		if _, err := replace.ParseAfter(v, 0); err != nil {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", field, err))
		}
		*to = v
		return nil
	}
	if err := set("cordon_after", m.GetCordonAfter(), &auto.CordonAfter); err != nil {
		return nil, err
	}
	if err := set("drain_after", m.GetDrainAfter(), &auto.DrainAfter); err != nil {
		return nil, err
	}
	auto.EffectiveCordonAfter, auto.EffectiveDrainAfter = "", ""
	if err := s.c.store.SetNodeAuto(ctx, n.GetName(), auto); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	s.c.audit.Record(ctx, "NodeService/SetNodeAuto", rbac.Target{Kind: "Node", Name: n.GetName(), Cluster: s.c.opts.Name}, nil, m, nil)
	return connect.NewResponse(&unyov1.SetNodeAutoResponse{Found: 1}), nil
}
