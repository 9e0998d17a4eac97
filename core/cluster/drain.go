package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/replace"
)

// Drains are server-side: the node's NodeDrain (phase, deadline, force,
// maintenance) is in the store, and the node stage on the lease holder
// drives every Draining one on each pass (drain), so a drain survives
// restarts and moves of the lease.

// Drain phases besides store.DrainPhaseDraining.
const (
	drainDrained   = "Drained"
	drainStopped   = "Stopped"
	drainCancelled = "Cancelled"
)

// defaultDrainDeadline is how long a drain may take unless told.
const defaultDrainDeadline = time.Hour

// drainMaintenance is the name of the Maintenance a drain of node opens.
func drainMaintenance(node string) string { return "drain-" + node }

// DrainNode starts, changes (deadline, force) or cancels the drain of a
// node.
func (s *nodeService) DrainNode(ctx context.Context, req *connect.Request[unyov1.DrainNodeRequest]) (*connect.Response[unyov1.DrainNodeResponse], error) {
	m := req.Msg
	if mine, err := s.operates(ctx, m.GetCluster(), "drain"); !mine {
		return connect.NewResponse(&unyov1.DrainNodeResponse{}), err
	}
	deadline := defaultDrainDeadline
	if d := m.GetDeadline(); d != "" && !m.GetCancel() {
		v, err := time.ParseDuration(d)
		if err != nil || v <= 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("deadline: %q is not a positive duration (30m, 2h)", d))
		}
		deadline = v
	}
	n, err := s.getNode(ctx, m.GetName())
	if err != nil {
		return nil, err
	}
	by := server.PrincipalFrom(ctx).String()
	resp := &unyov1.DrainNodeResponse{Found: 1}
	if m.GetCancel() {
		if n.GetDrain().GetPhase() == store.DrainPhaseDraining {
			if err := s.c.endDrain(ctx, n, drainCancelled, "cancelled by "+by); err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, err)
			}
			resp.Changed = 1
		}
	} else {
		changed, err := s.c.startDrain(ctx, n, deadline, m.GetForce(), by)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		if changed {
			resp.Changed = 1
		}
	}
	if resp.Changed > 0 {
		s.c.audit.Record(ctx, "NodeService/DrainNode", rbac.Target{Kind: "Node", Name: n.GetName(), Cluster: s.c.opts.Name}, nil, m, nil)
		s.c.kickPlacement()
	}
	return connect.NewResponse(resp), nil
}

// operates says whether an operator's node operation (verb) for cluster
// ("" is every cluster) is this cluster's to do, refusing a principal of
// another cluster.
func (s *nodeService) operates(ctx context.Context, cluster, verb string) (bool, error) {
	if cluster != "" && cluster != s.c.opts.Name {
		return false, nil
	}
	if p := server.PrincipalFrom(ctx); !p.InCluster(s.c.opts.Name) {
		return false, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not %s nodes of cluster %q", p, verb, s.c.opts.Name))
	}
	return true, nil
}

// getNode reads a node for an operator: NotFound names the cluster.
func (s *nodeService) getNode(ctx context.Context, name string) (*unyov1.Node, error) {
	n, err := s.c.store.GetNode(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in cluster %q", name, s.c.opts.Name))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return n, nil
}

// startDrain starts the drain of n (or changes the deadline and force of
// the one that runs): it opens the Maintenance and marks the node
// draining, which cordons it.
func (c *Cluster) startDrain(ctx context.Context, n *unyov1.Node, deadline time.Duration, force bool, by string) (bool, error) {
	now := c.now()
	if d := n.GetDrain(); d.GetPhase() == store.DrainPhaseDraining {
		next := proto.CloneOf(d)
		next.Deadline, next.Force = timestamppb.New(now.Add(deadline)), force
		if err := c.store.SetNodeDrain(ctx, n.GetName(), next); err != nil {
			return false, err
		}
		return true, nil
	}
	maint := drainMaintenance(n.GetName())
	if _, err := c.store.PutMaintenance(ctx, &unyov1.Maintenance{
		Name: maint, Cluster: c.opts.Name, Labels: map[string]string{"unyo.dev/drain": n.GetName()},
		Spec: &unyov1.MaintenanceSpec{
			Nodes:  []string{regexp.QuoteMeta(n.GetName())},
			Reason: fmt.Sprintf("drain of node %s", n.GetName()), Owner: by,
			Start: now.UTC().Format(time.RFC3339),
		},
	}); err != nil {
		return false, fmt.Errorf("open the maintenance of the drain: %w", err)
	}
	d := &unyov1.NodeDrain{
		Phase: store.DrainPhaseDraining, StartedAt: timestamppb.New(now), Deadline: timestamppb.New(now.Add(deadline)),
		Force: force, Maintenance: maint, By: by, Message: "starting",
	}
	if err := c.store.SetNodeDrain(ctx, n.GetName(), d); err != nil {
		return false, err
	}
	c.log.Info("drain started", "node", n.GetName(), "deadline", deadline, "force", force, "by", by)
	c.raiseNodeOp(ctx, ingest.DrainCheck, n.GetName(), unyov1.CheckStatus_CHECK_STATUS_WARNING,
		fmt.Sprintf("WARNING - drain of node %s started by %s (deadline %s, force %v)", n.GetName(), by, deadline, force))
	return true, nil
}

// endDrain ends n's drain in phase with message, and its Maintenance.
func (c *Cluster) endDrain(ctx context.Context, n *unyov1.Node, phase, message string) error {
	now := c.now()
	d := proto.CloneOf(n.GetDrain())
	d.Phase, d.Message, d.EndedAt = phase, message, timestamppb.New(now)
	// The maintenance ends before the phase is written, so that whoever
	// reads an ended drain finds its maintenance ended; a crash between the
	// two ends the drain again, which finds the maintenance already ended.
	if name := d.GetMaintenance(); name != "" {
		if _, err := c.store.EndMaintenance(ctx, name, "drain", now); err != nil && !errors.Is(err, store.ErrNotFound) && !strings.Contains(err.Error(), "already ended") {
			c.log.Warn("ending the maintenance of a drain failed", "node", n.GetName(), "maintenance", name, "err", err)
		}
	}
	if err := c.store.SetNodeDrain(ctx, n.GetName(), d); err != nil {
		return err
	}
	status := unyov1.CheckStatus_CHECK_STATUS_OK
	if phase == drainStopped {
		status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	}
	c.log.Info("drain ended", "node", n.GetName(), "phase", phase, "message", message)
	c.raiseNodeOp(ctx, ingest.DrainCheck, n.GetName(), status, fmt.Sprintf("%s - drain of node %s: %s", phase, n.GetName(), message))
	return nil
}

// raiseNodeOp records a node operation's event through ingest, on the
// cluster's own node name (the drain's maintenance silences the node's
// own events), labelled with the node.
func (c *Cluster) raiseNodeOp(ctx context.Context, check, node string, status unyov1.CheckStatus, out string) {
	err := c.raise(ctx, ingest.NodeOps, ingest.Synthetic{
		Node: c.opts.Name, Check: check, Status: status, Output: out,
		Labels: map[string]string{"node": node},
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("recording a node operation event failed", "node", node, "err", err)
	}
}

// drain does one pass of n's drain over computes (read before the pass):
// it places replacements of what runs there, evicts at a forced deadline,
// and ends the drain when the node is empty or the deadline passed
// without force. It says whether it changed assignments.
func (s *nodeStage) drain(ctx context.Context, pl *planner, n *unyov1.Node, computes []*unyov1.Compute) (bool, error) {
	var on []replace.Compute
	byName := map[string]*unyov1.Compute{}
	for _, c := range computes {
		if c.GetStatus().GetNode() == n.GetName() {
			on = append(on, replaceView(c))
			byName[c.GetName()] = c
		}
	}
	d := n.GetDrain()
	step := replace.DrainStep(s.c.now(), replace.Drain{
		Deadline: d.GetDeadline().AsTime(), Force: d.GetForce(), NodeReady: n.GetState() == unyov1.NodeState_NODE_STATE_READY,
	}, on)
	if step.Outcome == replace.Done && slices.ContainsFunc(computes, func(c *unyov1.Compute) bool { return c.GetStatus().GetReplacingNode() == n.GetName() }) {
		// A next instance placed there before the drain began: it takes
		// over and is drained in turn.
		step.Outcome = replace.Continue
	}
	switch step.Outcome {
	case replace.Done:
		return false, s.c.endDrain(ctx, n, drainDrained, "the node is empty; every compute runs elsewhere")
	case replace.Stopped:
		return false, s.c.endDrain(ctx, n, drainStopped, fmt.Sprintf("the deadline passed with %d computes left on the node (%s); use --force to remove them without replacements", step.Left, drainBlockers(on, byName)))
	}
	changed := false
	now := s.c.now()
	for _, name := range step.Place {
		conflict, err := s.placeNext(ctx, pl, byName[name], replace.ReasonDrain)
		if err != nil {
			return changed, err
		}
		changed = true
		if conflict {
			break
		}
	}
	for _, name := range step.Evict {
		if err := s.c.store.SetReplacement(ctx, name, store.ReplacementUpdate{
			Phase: replace.Evicting, Reason: replace.ReasonDrain, Message: "the drain's deadline passed; removed without waiting for a replacement",
			RetireCurrent: true, Current: n.GetName(), At: now,
		}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return changed, err
		}
		s.c.log.Info("drain deadline: compute evicted", "compute", name, "node", n.GetName())
		changed = true
	}
	for _, name := range step.Gone {
		// The node is not Ready: its agent may never say the instance
		// is gone.
		if err := s.c.store.CurrentGone(ctx, name, n.GetName(), now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return changed, err
		}
		changed = true
	}
	msg := fmt.Sprintf("%d computes left", step.Left)
	if b := drainBlockers(on, byName); b != "" {
		msg += "; " + b
	}
	if msg != d.GetMessage() {
		next := proto.CloneOf(d)
		next.Message = msg
		if err := s.c.store.SetNodeDrain(ctx, n.GetName(), next); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// drainBlockers says which computes' replacements cannot be placed or
// failed, and why.
func drainBlockers(on []replace.Compute, byName map[string]*unyov1.Compute) string {
	var out []string
	for _, c := range on {
		if c.RepPhase == replace.Blocked || c.RepPhase == replace.Failed {
			out = append(out, fmt.Sprintf("%s: replacement %s: %s", c.Name, c.RepPhase, byName[c.Name].GetStatus().GetReplacementMessage()))
		}
	}
	return strings.Join(out, "; ")
}

// operatorCordon is what an operator's cordon or uncordon of n does
// besides the flag: either takes the node from the automatic cordon (it
// is the operator's now); uncordoning also cancels a drain that runs and
// forgets the one that ended.
func (c *Cluster) operatorCordon(ctx context.Context, n *unyov1.Node, cordoned bool) error {
	if n.GetAuto().GetCordoned() {
		auto := proto.CloneOf(n.GetAuto())
		auto.Cordoned, auto.EffectiveCordonAfter, auto.EffectiveDrainAfter = false, "", ""
		if err := c.store.SetNodeAuto(ctx, n.GetName(), auto); err != nil {
			return err
		}
	}
	if cordoned || n.GetDrain() == nil {
		return nil
	}
	if n.GetDrain().GetPhase() == store.DrainPhaseDraining {
		if err := c.endDrain(ctx, n, drainCancelled, "the node was uncordoned"); err != nil {
			return err
		}
	}
	return c.store.SetNodeDrain(ctx, n.GetName(), nil)
}
