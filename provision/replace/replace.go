// Package replace holds the pure decisions of replacing a placed compute
// by a next instance on another node (a drain, a surge update) and of the
// automatic cordon and drain of nodes that are not Ready: which computes
// to replace or evict, when a next instance takes over, when a drain is
// done or stopped. It does no I/O; the cluster applies its answers.
package replace

import "time"

// Phases of a replacement (ComputeStatus.replacement_phase).
const (
	// Scheduled: the next instance is placed, its agent is creating it.
	Scheduled = "Creating:Scheduled"
	// Active: the next instance runs; the current one is being removed.
	Active = "Active"
	// Blocked: no node fits the next instance; the current one runs on.
	Blocked = "Blocked"
	// Failed: the next instance's provider failed; the current one runs on.
	Failed = "Failed"
	// Evicting: a forced drain removes the current instance without
	// waiting for a replacement.
	Evicting = "Evicting"
	// Cancelling: the replacement was called off; its next instance is
	// being removed.
	Cancelling = "Cancelling"
)

// Why a compute is replaced (ComputeStatus.replacement_reason).
const (
	ReasonDrain = "Drain"
	ReasonSurge = "Surge"
)

// Compute is what the decisions need of one compute.
type Compute struct {
	Name string
	// Node runs the current instance ("" when unplaced).
	Node     string
	Deleting bool
	// Replacing is the next instance's node, RepPhase and RepReason the
	// replacement's phase and reason ("" when none is in flight).
	Replacing, RepPhase, RepReason string
}

// InFlight says whether a replacement of c is under way, by any
// mechanism: another one leaves c alone meanwhile.
func (c Compute) InFlight() bool { return c.RepPhase != "" && c.RepPhase != Blocked }

// Retired says whether the current instance is being removed (its
// replacement is Active, or a forced drain evicts it).
func (c Compute) Retired() bool { return c.RepPhase == Active || c.RepPhase == Evicting }

// Outcome is where a drain stands after a step.
type Outcome int

const (
	// Continue: computes are still on the node.
	Continue Outcome = iota
	// Done: the node is empty.
	Done
	// Stopped: the deadline passed without force; what is left stays.
	Stopped
)

// Drain is one drain as its step needs it.
type Drain struct {
	Deadline time.Time
	Force    bool
	// NodeReady is false when the node is Stale or Down: its agent may
	// never report the removals, so a current instance whose replacement
	// is Active (and, at a forced deadline, every one) is taken as gone.
	NodeReady bool
}

// Step is what one pass of a drain does.
type Step struct {
	Outcome Outcome
	// Place are the computes whose next instance to place now (none in
	// flight, or the last try found no node).
	Place []string
	// Evict are the computes to remove without waiting (a forced
	// deadline); Gone those whose removal is taken as done, on a node
	// that is not Ready: those whose replacement is Active, and all at a
	// forced deadline.
	Evict, Gone []string
	// Left is how many computes are still on the node.
	Left int
}

// DrainStep decides a drain's pass at now over the computes whose current
// instance is on the drained node.
func DrainStep(now time.Time, d Drain, on []Compute) Step {
	st := Step{Left: len(on)}
	if len(on) == 0 {
		st.Outcome = Done
		return st
	}
	late := !d.Deadline.IsZero() && !now.Before(d.Deadline)
	if late && !d.Force {
		st.Outcome = Stopped
		return st
	}
	for _, c := range on {
		switch {
		case c.Deleting:
			// Going anyway.
			if late && !d.NodeReady {
				st.Gone = append(st.Gone, c.Name)
			}
		case late:
			if !c.Retired() {
				st.Evict = append(st.Evict, c.Name)
			}
			if !d.NodeReady {
				st.Gone = append(st.Gone, c.Name)
			}
		case c.RepPhase == Active && !d.NodeReady:
			// Replaced: the instance left on a Stale or Down node is
			// released now rather than at the deadline (its agent cannot
			// say it is gone; if the node comes back, the agent removes it
			// as a stray, as after self-healing).
			st.Gone = append(st.Gone, c.Name)
		case c.RepPhase == "" || c.RepPhase == Blocked:
			st.Place = append(st.Place, c.Name)
		}
	}
	return st
}

// Cancel is what becomes of a drain's replacement whose node is no longer
// being drained (the drain was cancelled, stopped or the node uncordoned).
type Cancel int

const (
	// Keep: not a drain's replacement, or too late to call off (the next
	// instance is Active, or the current one is being evicted).
	Keep Cancel = iota
	// CancelNext: remove the next instance; the current one stays.
	CancelNext
	// Clear: nothing was placed; forget the replacement.
	Clear
)

// Orphaned decides a replacement of c when c's node is not draining.
func Orphaned(c Compute) Cancel {
	if c.RepReason != ReasonDrain || c.Retired() || c.RepPhase == "" {
		return Keep
	}
	if c.Replacing == "" {
		return Clear
	}
	if c.RepPhase == Cancelling {
		return Keep
	}
	return CancelNext
}

// Report is what an agent's report of one instance of a compute leads to.
type Report int

const (
	// Ignore: nothing to do with it here.
	Ignore Report = iota
	// Status: the current instance's state, recorded as before.
	Status
	// NextActive: the next instance runs: it is Active and the current
	// instance is retired (its assignment turns to deleted).
	NextActive
	// NextFailed: the next instance's provider failed.
	NextFailed
	// NextGone: the next instance is deleted: its reservation is released.
	NextGone
	// CurrentGone: the current instance is deleted: its reservation is
	// released and the next instance, if any, takes over.
	CurrentGone
	// Drop: the compute is deleted and nothing else holds it.
	Drop
)

// Agent states of an instance.
const (
	StateRunning = "running"
	StateFailed  = "failed"
	StateDeleted = "deleted"
)

// OnReport decides what node's report of state for c means.
func OnReport(c Compute, node, state string) Report {
	switch {
	case c.Replacing != "" && node == c.Replacing:
		switch state {
		case StateRunning:
			if c.RepPhase == Scheduled || c.RepPhase == Failed {
				return NextActive
			}
		case StateFailed:
			if c.RepPhase == Scheduled {
				return NextFailed
			}
		case StateDeleted:
			if c.RepPhase == Cancelling || c.Deleting {
				return NextGone
			}
		}
		return Ignore
	case node != "" && node == c.Node:
		if state != StateDeleted {
			return Status
		}
		switch {
		case c.Deleting && c.Replacing == "":
			return Drop
		case c.Deleting || c.Retired():
			return CurrentGone
		}
		return Status
	}
	return Ignore
}
