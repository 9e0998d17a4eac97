package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// computeOf says whether node may speak for compute: an agent inside the
// compute reaches the cluster only through its node's agent (the proxy on
// 169.254.1.2), which forwards with the node's own credential and names
// the compute; the compute must be assigned to that node (its current or
// next instance, not one being removed).
func (c *Cluster) computeOf(ctx context.Context, node, compute string) error {
	as, _, err := c.store.ListAssignments(ctx, node)
	if err != nil {
		return fmt.Errorf("the assignments of node %q: %w", node, err)
	}
	for _, a := range as {
		if a.GetCompute() == compute && a.GetDesired() != StateDeleted && a.GetLoadbalancer() == nil {
			return nil
		}
	}
	return fmt.Errorf("compute %q is not assigned to node %q", compute, node)
}

// LabelViaNode marks the node record of an agent running inside a compute
// (registered through its node's proxy on 169.254.1.2): the node whose
// agent forwards its calls. The cluster sets it from the proxy at each
// registration; an agent cannot set or drop it.
const LabelViaNode = "unyo.dev/via-node"

// computeAgentSweep is how often the compute agents are checked against
// the computes even without a compute being dropped on this replica (one
// dropped on another replica, or while this one was not the controller).
const computeAgentSweep = 5 * time.Minute

// computeAgents deregisters the agent of a compute once the compute is
// gone: the agent went with it, and its node record, liveness and latest
// events would otherwise stay as a Down node forever. It runs at once, when
// a compute is dropped here, and every computeAgentSweep.
type computeAgents struct{ c *Cluster }

func (ca computeAgents) Run(ctx context.Context) {
	t := time.NewTicker(computeAgentSweep)
	defer t.Stop()
	for {
		if err := ca.sweep(ctx); err != nil && ctx.Err() == nil {
			ca.c.log.Warn("removing the agents of deleted computes failed; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ca.c.computeGone:
		}
	}
}

// sweep deregisters every compute agent whose compute no longer exists.
func (ca computeAgents) sweep(ctx context.Context) error {
	nodes, err := ca.c.store.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	var errs []error
	for _, n := range nodes {
		via := n.GetLabels()[LabelViaNode]
		if via == "" {
			continue
		}
		_, err := ca.c.store.GetCompute(ctx, n.GetName())
		if !errors.Is(err, store.ErrNotFound) {
			if err != nil {
				errs = append(errs, fmt.Errorf("look up compute %q: %w", n.GetName(), err))
			}
			continue
		}
		reason := fmt.Sprintf("compute %q is deleted", n.GetName())
		if err := ca.c.deregister(ctx, n.GetName(), "cluster "+ca.c.opts.Name, reason); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		ca.c.log.Info("the agent of a deleted compute is deregistered", "node", n.GetName(), "via", via)
	}
	return errors.Join(errs...)
}

// computeDropped wakes the compute agents' sweep (a compute was deleted).
func (c *Cluster) computeDropped() {
	select {
	case c.computeGone <- struct{}{}:
	default:
	}
}
