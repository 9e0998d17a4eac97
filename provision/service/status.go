package service

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Derive is a service's status from its replicas' statuses, at now:
//
//   - Deleting while the service is being deleted;
//   - Failed, with the first failed replica's reason, when one failed;
//   - Blocked, with the first blocked replica's reason, when one is
//     waiting for capacity or could not be placed at the cluster stage;
//   - Updating while a replica is being replaced, or a rolling update
//     moves replicas to the service's template revision;
//   - Active when every desired replica is Active;
//   - Creating once a replica was handed to a cluster, else Initializing.
//
// computes are the service's replicas, those being deleted included (they
// are not counted as desired). updated_at moves only when the status
// changes, so that a steady service is not rewritten every pass.
func Derive(s *unyov1.RegionService, computes []*unyov1.Compute, deleting bool, now time.Time) *unyov1.RegionServiceStatus {
	st := &unyov1.RegionServiceStatus{Replicas: s.GetSpec().GetCompute().GetReplicas(), ObservedRevision: s.GetRevision()}
	// The autoscaler's state is root's autoscaler's to write: carried over
	// while the service is autoscaled, dropped once it is not.
	if s.GetSpec().GetCompute().GetAutoscale() != nil {
		st.Autoscale = s.GetStatus().GetAutoscale()
	}
	var live []*unyov1.Compute
	for _, c := range computes {
		if c.GetStatus().GetPhase() == PhaseDeleting {
			continue
		}
		live = append(live, c)
		if c.GetStatus().GetPhase() == PhaseActive {
			st.Active++
		}
	}
	slices.SortFunc(live, func(a, b *unyov1.Compute) int { return int(a.GetIndex() - b.GetIndex()) })
	first := func(phase string) *unyov1.Compute {
		for _, c := range live {
			if c.GetStatus().GetPhase() == phase {
				return c
			}
		}
		return nil
	}
	blame := func(c *unyov1.Compute) {
		st.Reason = c.GetStatus().GetReason()
		st.Message = fmt.Sprintf("%s: %s", c.GetName(), c.GetStatus().GetMessage())
	}
	switch {
	case deleting:
		st.Phase = PhaseDeleting
	case first(PhaseFailed) != nil:
		st.Phase = PhaseFailed
		blame(first(PhaseFailed))
	case first(PhaseBlocked) != nil:
		st.Phase = PhaseBlocked
		blame(first(PhaseBlocked))
	case first(PhaseUpdating) != nil:
		st.Phase = PhaseUpdating
	case int32(len(live)) == st.Replicas && st.Active == st.Replicas:
		st.Phase = PhaseActive
	case slices.ContainsFunc(live, func(c *unyov1.Compute) bool {
		p := c.GetStatus().GetPhase()
		return p != "" && p != PhaseInitializing
	}):
		st.Phase = PhaseCreating
	default:
		st.Phase = PhaseInitializing
	}
	withRollout(st, s.GetStatus(), live)
	old := s.GetStatus()
	st.UpdatedAt = old.GetUpdatedAt()
	cmp := proto.Clone(old).(*unyov1.RegionServiceStatus)
	if cmp == nil {
		cmp = &unyov1.RegionServiceStatus{}
	}
	cmp.UpdatedAt, cmp.ObservedRevision = st.UpdatedAt, st.ObservedRevision
	if old == nil || !proto.Equal(cmp, st) {
		st.UpdatedAt = timestamppb.New(now)
	}
	return st
}

// SameStatus says whether two service statuses agree but for the revision
// they observed, so that storing the status does not itself count as a
// change to observe.
func SameStatus(a, b *unyov1.RegionServiceStatus) bool {
	a, b = proto.Clone(a).(*unyov1.RegionServiceStatus), proto.Clone(b).(*unyov1.RegionServiceStatus)
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	a.ObservedRevision, b.ObservedRevision = 0, 0
	return proto.Equal(a, b)
}

// withRollout carries a service's template revision and history (kept by
// the controller) into its new status and says how far the rolling update
// to that revision is. A rollout runs while a live replica is to run an
// older revision or still runs an older instance; an Active or Creating
// service is Updating meanwhile.
func withRollout(st, old *unyov1.RegionServiceStatus, live []*unyov1.Compute) {
	st.TemplateRevision, st.History = old.GetTemplateRevision(), old.GetHistory()
	target := st.GetTemplateRevision()
	if target == 0 {
		return
	}
	p := Rollout(RolloutReplicas(live), target)
	st.Updated = int32(p.Updated)
	rolling := slices.ContainsFunc(live, func(c *unyov1.Compute) bool {
		run := c.GetStatus().GetSpecRevision()
		return c.GetSpecRevision() != target || (run != 0 && run != target)
	})
	if !rolling {
		return
	}
	st.Rollout, st.RolloutPaused = p.String(), p.Paused
	if st.Phase == PhaseActive || st.Phase == PhaseCreating {
		st.Phase = PhaseUpdating
	}
}
