package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/replace"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// Replacement instances: a placed compute gets a next instance on another
// node (its own reservation and assignment) while the current one runs;
// once the next one's agent reports it running, the current one's
// assignment turns to deleted, and once that agent reports it deleted the
// next instance takes over (ReportAssignments, provision/replace.OnReport).
// Drains (drain.go) and surge updates (surge.go) start replacements here.

// replaceView is what provision/replace needs of c.
func replaceView(c *unyov1.Compute) replace.Compute {
	st := c.GetStatus()
	return replace.Compute{
		Name: c.GetName(), Node: st.GetNode(), Deleting: st.GetPhase() == PhaseDeleting,
		Replacing: st.GetReplacingNode(), RepPhase: st.GetReplacementPhase(), RepReason: st.GetReplacementReason(),
	}
}

// existingExcept is the service's placements without one on node: a
// replacement does not count the instance it replaces.
func (p *planner) existingExcept(service, node string) []schedule.Placement {
	var out []schedule.Placement
	skipped := false
	for _, e := range p.placed[service] {
		if !skipped && e.Node == node {
			skipped = true
			continue
		}
		out = append(out, e)
	}
	return out
}

// placeNext places a next instance of c (running c's spec as it is now)
// on a node other than its current one, for why (replace.ReasonDrain,
// ReasonSurge). When no node fits, the replacement is Blocked with the
// reason and the current instance runs on. conflict says a commit found
// its node moved: the caller reads the nodes again.
func (s *nodeStage) placeNext(ctx context.Context, pl *planner, c *unyov1.Compute, why string) (conflict bool, err error) {
	cur := c.GetStatus().GetNode()
	nodes := make([]schedule.Node, len(pl.nodes))
	copy(nodes, pl.nodes)
	if i, ok := pl.index[cur]; ok {
		// Both instances would be one resource to the node's agent.
		nodes[i].Cordoned = true
	}
	req := placement.Request(c, pl.existingExcept(c.GetService(), cur))
	res := schedule.NewSnapshot(nodes).Place(req, 1)
	now := s.c.now()
	if len(res.Placed) == 1 {
		ch := res.Placed[0]
		moved, err := s.c.store.ReserveNext(ctx, store.Reservation{
			Compute: c.GetName(), Service: c.GetService(), Node: ch.Node,
			Resources: req.Shape, Generation: pl.generation(ch.Node, ch.Generation), Policy: req.Policy, ReservedAt: now,
		}, assignmentFor(c), c.GetSpecRevision(), why)
		var reason *schedule.Reason
		switch {
		case err == nil:
			pl.commit(ch.Node, c.GetService(), req.Shape, moved)
			s.c.log.Info("replacement placed", "compute", c.GetName(), "node", cur, "next_node", ch.Node, "why", why)
			return false, nil
		case errors.Is(err, store.ErrGeneration), errors.As(err, &reason), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrNotFound):
			s.c.log.Debug("placing a replacement conflicted; rereading the nodes", "compute", c.GetName(), "node", ch.Node, "err", err)
			return true, nil
		default:
			return false, err
		}
	}
	msg := "no node fits"
	if res.Reason != nil {
		msg = res.Reason.String()
	}
	st := c.GetStatus()
	if st.GetReplacementPhase() == replace.Blocked && st.GetReplacementMessage() == msg {
		return false, nil
	}
	if err := s.c.store.SetReplacement(ctx, c.GetName(), store.ReplacementUpdate{Phase: replace.Blocked, Reason: why, Message: msg, Current: cur, At: now}); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	s.c.log.Info("no node for a replacement; the compute runs on where it is", "compute", c.GetName(), "node", cur, "why", why, "reason", msg)
	s.raise(ctx, c, unyov1.CheckStatus_CHECK_STATUS_WARNING, fmt.Sprintf("Blocked %s - replacement of compute %s (%s): %s", ReasonNoCapacity, c.GetName(), why, msg))
	return false, nil
}

// replacements is the node stage's second half: it calls off drain
// replacements whose node is no longer draining, starts surge updates,
// and drives every drain (drain.go). It reads the store afresh, after
// the placements of the pass.
func (s *nodeStage) replacements(ctx context.Context) error {
	computes, err := s.c.store.ListComputes(ctx)
	if err != nil {
		return err
	}
	var nodes []*unyov1.Node
	if len(computes) == 0 {
		// Nothing to place or replace: the drains to end are all there
		// is, and only their nodes are read (not a whole fleet's, every
		// second).
		nodes, err = s.c.store.ListNodesMatching(ctx, store.NodeFilter{Draining: true})
	} else {
		nodes, err = s.c.store.ListNodes(ctx)
	}
	if err != nil {
		return err
	}
	draining, exists := map[string]bool{}, map[string]bool{}
	var drains []*unyov1.Node
	for _, n := range nodes {
		exists[n.GetName()] = true
		if n.GetDrain().GetPhase() == store.DrainPhaseDraining {
			draining[n.GetName()] = true
			drains = append(drains, n)
		}
	}
	if len(computes) == 0 && len(drains) == 0 {
		return nil
	}
	changed := false
	for _, c := range computes {
		if v := replaceView(c); v.Retired() && !exists[v.Node] {
			// The retired instance's node is gone: no agent will say it
			// is deleted.
			if err := s.c.store.CurrentGone(ctx, c.GetName(), v.Node, s.c.now()); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			changed = true
			continue
		}
		var u *store.ReplacementUpdate
		switch replace.Orphaned(replaceView(c)) {
		case replace.Keep:
			continue
		case replace.CancelNext:
			if draining[c.GetStatus().GetNode()] {
				continue
			}
			u = &store.ReplacementUpdate{Phase: replace.Cancelling, Message: "the drain ended; the replacement is removed", CancelNext: true,
				Current: c.GetStatus().GetNode(), Next: c.GetStatus().GetReplacingNode(), At: s.c.now()}
		case replace.Clear:
			if draining[c.GetStatus().GetNode()] {
				continue
			}
			u = &store.ReplacementUpdate{Current: c.GetStatus().GetNode(), At: s.c.now()}
		}
		if err := s.c.store.SetReplacement(ctx, c.GetName(), *u); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		s.c.log.Info("replacement called off: its node is no longer drained", "compute", c.GetName(), "node", c.GetStatus().GetNode())
		changed = true
	}
	reservations, err := s.c.store.ListReservations(ctx)
	if err != nil {
		return err
	}
	pl := newPlanner(nodes, reservations)
	for _, c := range computes {
		if !surgeWanted(c) {
			continue
		}
		conflict, err := s.replaceWithSurge(ctx, pl, c)
		if err != nil {
			return err
		}
		changed = true
		if conflict {
			break
		}
	}
	for _, n := range drains {
		moved, err := s.drain(ctx, pl, n, computes)
		if err != nil {
			return err
		}
		changed = changed || moved
	}
	if changed {
		s.c.assignments.notify()
	}
	return nil
}
