package cluster

import (
	"context"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/replace"
)

// surgeWanted says whether c's spec revision moved past the instance it
// runs and root asked for a surge update: a next instance with the new
// spec first, the old one removed once the new one is Active. A compute
// already being replaced (by a drain, or by self-healing) is left to
// that replacement; its next instance runs the spec of when it was placed.
func surgeWanted(c *unyov1.Compute) bool {
	st := c.GetStatus()
	return c.GetSurge() && c.GetSpecRevision() != 0 && st.GetSpecRevision() != c.GetSpecRevision() &&
		st.GetPhase() == PhaseActive && st.GetNode() != "" && !replaceView(c).InFlight()
}

// replaceWithSurge starts the surge update of c: a next instance with c's
// new spec on another feasible node (the current one is excluded: both
// instances would be one resource to its agent). When it is Active,
// ComputeStatus.spec_revision becomes the new revision.
func (s *nodeStage) replaceWithSurge(ctx context.Context, pl *planner, c *unyov1.Compute) (conflict bool, err error) {
	return s.placeNext(ctx, pl, c, replace.ReasonSurge)
}
