// Package pipeline is the event pipeline's decisions, as a list of pure
// stages: occurrences, the reissue window, silence rules, maintenance,
// aggregation and action rules.
//
// A stage reads the pipeline's State, one event and the time it is given,
// and writes what should happen into a Decision; it does no I/O and never
// reads the clock. The cluster's runner loads the State, runs a batch of
// stored events through New's stages, has the store apply the Decision in
// one transaction with the cursor, and then folds the Decision into the
// State (State.Apply). Prometheus Alertmanager's notify.Stage is the model.
package pipeline

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Event is one event on its way through the stages.
type Event struct {
	*unyov1.Event
	// At is the event's time (EventTime), by which occurrences, reissue
	// windows, rule expiry and maintenance are judged.
	At time.Time
	// Now is when the pipeline processes it: alert transitions and
	// aggregate windows are in processing time.
	Now time.Time
	// Explanation collects the stages' steps and outcome.
	Explanation *unyov1.Explanation
	// SilencedBy is "rule:NAME" or "maintenance:NAME" once silenced.
	SilencedBy string
	// Suppressed: a repeat within the reissue window. It still refreshes
	// its alerts (count, last seen) but opens none, joins no group and
	// notifies nobody.
	Suppressed bool
	// Recovered: a success after a processed non-success event of the same
	// node/check, which a notifying action reports once as resolved.
	Recovered bool
}

// step appends an explanation step at the event's time and returns it.
func (ev *Event) step(stage, rule, outcome string) *unyov1.ExplanationStep {
	s := Step(stage, rule, outcome, ev.At)
	ev.Explanation.Steps = append(ev.Explanation.Steps, s)
	return s
}

// Step is one line of an event's explanation.
func Step(stage, rule, outcome string, at time.Time) *unyov1.ExplanationStep {
	return &unyov1.ExplanationStep{Stage: stage, Rule: rule, Outcome: outcome, At: timestamppb.New(at)}
}

// EventTime is when an event happened: its start, else its receipt.
// Results replayed after an outage are judged as they would have been on
// time.
func EventTime(e *unyov1.Event) time.Time {
	if e.GetStartedAt() != nil {
		return e.GetStartedAt().AsTime()
	}
	return e.GetReceivedAt().AsTime()
}

// Stage is one step of the pipeline. Process reads st and ev, records its
// effects in d and ev's explanation, and reports whether ev goes on to the
// next stage. It must not change st: the Decision is applied to it only
// after the store committed it.
type Stage interface {
	Process(st *State, d *Decision, ev *Event) bool
}

// MultiStage runs stages in order until one stops the event.
type MultiStage []Stage

// Process runs ev through the stages.
func (ms MultiStage) Process(st *State, d *Decision, ev *Event) bool {
	for _, s := range ms {
		if !s.Process(st, d, ev) {
			return false
		}
	}
	return true
}

// Pipeline is the stages in their order.
type Pipeline struct{ stages MultiStage }

// New is the event pipeline: the order here is the documented one.
func New() *Pipeline {
	return &Pipeline{stages: MultiStage{
		Occurrences{},
		Reissue{},
		Silence{},
		Maintenance{},
		Aggregate{},
		Actions{},
	}}
}

// Decide runs a batch of events, oldest first, through the stages at now
// and returns what the store is to commit. Later events of the batch see
// the counters, windows and groups the earlier ones left in d.
func (p *Pipeline) Decide(st *State, events []*unyov1.Event, now time.Time) *Decision {
	d := NewDecision()
	processed := timestamppb.New(now)
	for _, e := range events {
		ev := &Event{Event: e, At: EventTime(e), Now: now, Explanation: &unyov1.Explanation{}}
		p.stages.Process(st, d, ev)
		ev.Explanation.ProcessedAt = processed
		d.Explained = append(d.Explained, Explained{ID: e.GetId(), Explanation: ev.Explanation, SilencedBy: ev.SilencedBy})
	}
	return d
}
