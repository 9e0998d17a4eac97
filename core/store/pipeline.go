package store

import (
	"context"
	"errors"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// ErrConflict is returned when a pipeline commit finds the cursor moved:
// another replica processed events meanwhile, so this one lost its lease.
var ErrConflict = errors.New("pipeline cursor moved: another replica is processing events")

// Rules are the event rules and maintenance records of a cluster.
type Rules interface {
	PutEventRule(ctx context.Context, r *unyov1.EventRule) (PutResult, error)
	DeleteEventRule(ctx context.Context, name string) error
	GetEventRule(ctx context.Context, name string) (*unyov1.EventRule, error)
	// ListEventRules returns every rule sorted by name, with its matched count.
	ListEventRules(ctx context.Context) ([]*unyov1.EventRule, error)
	PutMaintenance(ctx context.Context, m *unyov1.Maintenance) (PutResult, error)
	DeleteMaintenance(ctx context.Context, name string) error
	GetMaintenance(ctx context.Context, name string) (*unyov1.Maintenance, error)
	// ListMaintenance returns every record sorted by name, past ones included,
	// with its silenced count.
	ListMaintenance(ctx context.Context) ([]*unyov1.Maintenance, error)
	// EndMaintenance sets ended_at and ended_by of an open record.
	EndMaintenance(ctx context.Context, name, by string, at time.Time) (*unyov1.Maintenance, error)
	// RulesRevision moves whenever a rule or a maintenance record changes.
	RulesRevision(ctx context.Context) (int64, error)
	// CountMatches adds to rules' matched counts and maintenances' silenced
	// counts (by name); used by ingest for filter drops.
	CountMatches(ctx context.Context, rules, maintenances map[string]int64) error
}

// SeqEvent is a stored event with its ingest sequence number, which orders
// the event pipeline's work across every replica.
type SeqEvent struct {
	Seq   int64
	Event *unyov1.Event
}

// PipelineState is what a replica loads when it takes over the pipeline:
// the cursor and the committed state of the stages.
type PipelineState struct {
	Cursor   int64
	Counters map[pipeline.NodeCheck]eventrules.Counter
	Issued   map[pipeline.NodeCheck]eventrules.Issued
	Groups   []*unyov1.AggregateGroup
	// Notified is what notifying actions last sent per firing node/check.
	Notified map[pipeline.NodeCheck]map[pipeline.HookID]pipeline.Notified
}

// Explained is the pipeline's verdict on one event.
type Explained = pipeline.Explained

// PendingAction is an action job waiting in the actions outbox, with the
// body the commit built for it.
type PendingAction struct {
	Key      string
	Rule     string
	EventID  string
	Hook     *unyov1.ApiHookAction
	Plugin   *unyov1.PluginAction
	Body     []byte
	Attempts int
}

// PipelineCommit is one step of the event pipeline: the decision, written
// in one transaction together with the cursor. The store applies each
// alert operation with alerts.Apply to the active alert of its key, writes
// the outcome into the operation's explanation step, and builds each
// action job's body from the alert the operations produced.
type PipelineCommit struct {
	// ExpectCursor must equal the stored cursor, else ErrConflict.
	ExpectCursor, Cursor int64
	pipeline.Decision
}

// AlertFilter selects alerts; zero fields select everything but closed alerts.
type AlertFilter struct {
	Node, Check string
	Levels      []unyov1.AlertLevel
	States      []unyov1.AlertState
	Limit       int
}

// Pipeline is the event pipeline's durable state and the alerts it keeps.
type Pipeline interface {
	// NextEvents returns stored events with a sequence above after, oldest first.
	NextEvents(ctx context.Context, after int64, limit int) ([]SeqEvent, error)
	LoadPipeline(ctx context.Context) (*PipelineState, error)
	CommitPipeline(ctx context.Context, c *PipelineCommit) error

	ListAlerts(ctx context.Context, f AlertFilter) ([]*unyov1.Alert, error)
	GetAlert(ctx context.Context, id string) (*unyov1.Alert, error)
	// UpdateAlert changes one alert by id in a transaction (operators' ack and close).
	UpdateAlert(ctx context.Context, id string, fn func(*unyov1.Alert) error) (*unyov1.Alert, error)

	// DueActions returns actions outbox jobs not yet finished, oldest first.
	DueActions(ctx context.Context, limit int) ([]PendingAction, error)
	// FinishAction removes a job from the actions outbox and adds step to
	// its event's explanation.
	FinishAction(ctx context.Context, key string, step *unyov1.ExplanationStep) error
}
