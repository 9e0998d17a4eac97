package service

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// MaxRevisionHistory is how many compute templates a service keeps for
// `unyo services rollout history|undo` (the seeds' MaxRevisionHistory).
const MaxRevisionHistory = 10

// Template is the part of a compute spec that makes the replica: a change
// to it is a new revision that a rolling update moves the replicas to.
// Replicas, autoscaling, the schedule policy, the update strategy and
// replace_after change no replica and so no revision.
func Template(c *unyov1.ComputeSpec) *unyov1.ComputeSpec {
	return &unyov1.ComputeSpec{Flavor: c.GetFlavor(), Image: c.GetImage(), Network: c.GetNetwork(),
		Provider: c.GetProvider(), Env: maps.Clone(c.GetEnv()), Command: slices.Clone(c.GetCommand())}
}

// WithTemplate is spec with t's template fields.
func WithTemplate(spec, t *unyov1.ComputeSpec) *unyov1.ComputeSpec {
	out := proto.CloneOf(spec)
	if out == nil {
		out = &unyov1.ComputeSpec{}
	}
	out.Flavor, out.Image, out.Network, out.Provider = t.GetFlavor(), t.GetImage(), t.GetNetwork(), t.GetProvider()
	out.Env, out.Command = maps.Clone(t.GetEnv()), slices.Clone(t.GetCommand())
	return out
}

// Revise is a service's template history once its current compute spec is
// counted: unchanged when the newest revision has the same template, else
// with a new revision (the newest plus one) appended and the oldest
// dropped beyond MaxRevisionHistory. It returns the history and the
// current revision.
func Revise(history []*unyov1.TemplateRevision, spec *unyov1.ComputeSpec, now time.Time) ([]*unyov1.TemplateRevision, int64) {
	t := Template(spec)
	if n := len(history); n > 0 && proto.Equal(history[n-1].GetTemplate(), t) {
		return history, history[n-1].GetRevision()
	}
	rev := int64(1)
	if n := len(history); n > 0 {
		rev = history[n-1].GetRevision() + 1
	}
	out := append(slices.Clone(history), &unyov1.TemplateRevision{Revision: rev, Template: t, CreatedAt: timestamppb.New(now)})
	if len(out) > MaxRevisionHistory {
		out = out[len(out)-MaxRevisionHistory:]
	}
	return out, rev
}

// Revision finds revision rev in a history; nil if it is not kept.
func Revision(history []*unyov1.TemplateRevision, rev int64) *unyov1.TemplateRevision {
	for _, h := range history {
		if h.GetRevision() == rev {
			return h
		}
	}
	return nil
}

// Budget is a rolling update's max_unavailable and max_surge for replicas
// desired replicas. Unset (both zero) they are Kubernetes' defaults, 25%
// rounded down and 25% rounded up; at least one of them is above zero.
func Budget(u *unyov1.UpdateStrategy, replicas int) (maxUnavailable, maxSurge int) {
	maxUnavailable, maxSurge = int(u.GetMaxUnavailable()), int(u.GetMaxSurge())
	if maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable, maxSurge = replicas/4, (replicas+3)/4
	}
	if maxUnavailable == 0 && maxSurge == 0 {
		maxSurge = 1
	}
	return maxUnavailable, maxSurge
}

// RolloutReplica is one live replica as the rollout paces it.
type RolloutReplica struct {
	Name string
	// Revision is the template revision the replica is to run.
	Revision int64
	// Ready: Active, running its Revision.
	Ready bool
	// Surge: its new instance is placed before its old one goes.
	Surge bool
	// Failing says why its update checks fail, or "".
	Failing string
	// Active says it runs its revision, whatever its update checks say:
	// a replica of an older revision whose checks fail still serves, so
	// moving it costs availability like any other.
	Active bool
}

// Move is a replica to move to the target revision now.
type Move struct {
	Name  string
	Surge bool
}

// Pace decides which replicas move to the target revision now, in order
// (those not Ready first, which cost no availability, then by position):
// at any time at most maxUnavailable replicas are not Ready, and at most
// maxSurge replicas are being replaced with a surge instance (which keeps
// the old one running). A replica moved is not Ready until it is Active at
// the target, so the next ones wait for it. A replica at the target whose
// update checks fail pauses the rollout: nothing moves until they pass (or
// the rollout is undone), as the new revision looks broken.
func Pace(replicas []RolloutReplica, target int64, maxUnavailable, maxSurge int) []Move {
	if Paused(replicas, target) != "" {
		return nil
	}
	unavailable, surging := 0, 0
	var candidates []RolloutReplica
	for _, r := range replicas {
		if r.Revision != target && r.Active {
			// Update checks judge the update: an old instance failing
			// them is not moved ahead as if it cost no availability.
			r.Ready = true
		}
		if !r.Ready {
			unavailable++
		}
		if r.Revision == target {
			if r.Surge && !r.Ready {
				surging++
			}
			continue
		}
		candidates = append(candidates, r)
	}
	slices.SortStableFunc(candidates, func(a, b RolloutReplica) int {
		switch {
		case a.Ready == b.Ready:
			return 0
		case !a.Ready:
			return -1
		default:
			return 1
		}
	})
	var moves []Move
	for _, r := range candidates {
		switch {
		case !r.Ready:
			moves = append(moves, Move{Name: r.Name})
		case unavailable < maxUnavailable:
			moves = append(moves, Move{Name: r.Name})
			unavailable++
		case surging < maxSurge:
			moves = append(moves, Move{Name: r.Name, Surge: true})
			surging++
		default:
			return moves
		}
	}
	return moves
}

// Paused says why a rollout to target is paused: the first replica at the
// target whose update checks fail; "" when none does.
func Paused(replicas []RolloutReplica, target int64) string {
	for _, r := range replicas {
		if r.Revision == target && r.Failing != "" {
			return r.Failing
		}
	}
	return ""
}

// Progress is a rollout's state in numbers and words.
type Progress struct {
	// Updated replicas are Ready at the target revision.
	Updated, Replicas, Replacing int
	// Running while any replica is not Ready at the target.
	Running bool
	// Paused is why the rollout moves nothing (see Paused).
	Paused string
}

func (p Progress) String() string {
	s := fmt.Sprintf("%d/%d replicas updated", p.Updated, p.Replicas)
	if p.Replacing > 0 {
		s += fmt.Sprintf(", %d being replaced", p.Replacing)
	}
	if p.Paused != "" {
		s += "; paused: " + p.Paused
	}
	return s
}

// Rollout measures a rollout to target over the live replicas: replacing
// counts those moved to the target but not yet Ready there.
func Rollout(replicas []RolloutReplica, target int64) Progress {
	p := Progress{Replicas: len(replicas)}
	for _, r := range replicas {
		switch {
		case r.Revision == target && r.Ready:
			p.Updated++
		case r.Revision == target:
			p.Replacing++
		}
	}
	p.Running = p.Updated < p.Replicas
	p.Paused = Paused(replicas, target)
	return p
}

// Ready says whether a replica is Active running the revision it is to
// run, with its update checks (if it has any) passing there.
func Ready(c *unyov1.Compute) bool {
	st := c.GetStatus()
	return st.GetPhase() == PhaseActive && st.GetSpecRevision() == c.GetSpecRevision() && checksOK(c)
}

// RolloutReplicas are a service's live replicas as the rollout sees them.
func RolloutReplicas(records []*unyov1.Compute) []RolloutReplica {
	var out []RolloutReplica
	for _, c := range records {
		if c.GetStatus().GetPhase() == PhaseDeleting {
			continue
		}
		out = append(out, RolloutReplica{Name: c.GetName(), Revision: c.GetSpecRevision(), Ready: Ready(c), Surge: c.GetSurge(), Failing: checksFailing(c),
			Active: c.GetStatus().GetPhase() == PhaseActive && c.GetStatus().GetSpecRevision() == c.GetSpecRevision()})
	}
	return out
}
