package pipeline

import (
	"time"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// Decision is everything a batch of events (or a flush of aggregate
// groups) changes, as explicit operations the store applies in one
// transaction.
type Decision struct {
	Counters map[NodeCheck]eventrules.Counter
	Issued   map[NodeCheck]eventrules.Issued
	// PutGroups are groups opened or grown, DeleteGroups groups flushed.
	PutGroups    []*unyov1.AggregateGroup
	DeleteGroups []*unyov1.AggregateGroup
	// Notified are notification records written (nil: removed, after a
	// resolved notification).
	Notified map[NodeCheck]map[HookID]*Notified
	// Alerts are applied in order, each to the active alert of its key.
	Alerts []AlertOp
	// Actions are queued in the actions outbox.
	Actions   []ActionJob
	Explained []Explained
	// RuleMatches and MaintenanceSilenced count by rule and maintenance name.
	RuleMatches         map[string]int64
	MaintenanceSilenced map[string]int64

	// groups indexes PutGroups by id, for later events of the batch.
	groups map[GroupID]*unyov1.AggregateGroup
}

// NewDecision is a decision that changes nothing yet.
func NewDecision() *Decision {
	return &Decision{
		Counters: map[NodeCheck]eventrules.Counter{}, Issued: map[NodeCheck]eventrules.Issued{},
		Notified:    map[NodeCheck]map[HookID]*Notified{},
		RuleMatches: map[string]int64{}, MaintenanceSilenced: map[string]int64{},
		groups: map[GroupID]*unyov1.AggregateGroup{},
	}
}

// putGroup records g as opened or grown; a group changed twice in a batch
// is written once.
func (d *Decision) putGroup(g *unyov1.AggregateGroup) {
	id := IDOf(g)
	if _, ok := d.groups[id]; !ok {
		d.PutGroups = append(d.PutGroups, g)
	}
	d.groups[id] = g
}

// setNotified records what hook sent about nc; nil removes the record.
func (d *Decision) setNotified(nc NodeCheck, h HookID, n *Notified) {
	if d.Notified[nc] == nil {
		d.Notified[nc] = map[HookID]*Notified{}
	}
	d.Notified[nc][h] = n
}

// AlertOp is an alert transition and the explanation step that reports
// it: the store writes alerts.Apply's outcome into Step.
type AlertOp struct {
	alerts.Op
	Step *unyov1.ExplanationStep
}

// ActionJob is one api_hook delivery or action plugin run for the actions
// outbox, which runs it at least once. Its body is built by the store from
// the payload below and the alert the commit produced, with apihook.Body.
type ActionJob struct {
	// Key is the idempotency key (rule + event or group); a second job
	// with the same key is ignored.
	Key     string
	Rule    string
	EventID string
	// Exactly one of Hook and Plugin is set. A plugin gets the unyo
	// api_hook body.
	Hook   *unyov1.ApiHookAction
	Plugin *unyov1.PluginAction

	// The payload: the event or a group's members, firing or resolved, and
	// the cluster.
	Events  []*unyov1.Event
	Status  string
	Cluster string
	// Since and Level are what the receiver was told while the condition
	// fired (when it began, at which level), so that a resolved
	// notification without an alert still says when it started and how
	// severe it was. Zero for a group or a first firing.
	Since time.Time
	Level unyov1.Level
	// AlertOps index Decision.Alerts: the alert operations of the same
	// rule; the body carries the alert the last of them that produced one
	// left (none when empty).
	AlertOps []int
}

// Explained is the pipeline's verdict on one event.
type Explained struct {
	ID string
	// Seq is the event's place in the store's order, which the runner
	// knows and the stages do not; it saves the store finding the event by
	// ID. 0: find it by ID.
	Seq         int64
	Explanation *unyov1.Explanation
	SilencedBy  string
	// Append adds the steps to the stored explanation and replaces only its
	// outcome (an aggregate group's flush, after its members were grouped).
	Append bool
	// KeepOutcome, with Append, keeps the stored outcome too (an action's
	// delivery, reported after the event was processed).
	KeepOutcome bool
}
