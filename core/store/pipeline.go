package store

import (
	"context"
	"errors"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
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

// NodeCheck names a node's check.
type NodeCheck struct{ Node, Check string }

// Counter is the occurrences state of one node/check.
type Counter struct {
	Level unyov1.Level
	Count int
}

// Issued is the reissue window of one node/check: the level and event time
// it was last processed at.
type Issued struct {
	Level unyov1.Level
	At    time.Time
}

// PipelineState is what a replica loads when it takes over the pipeline.
type PipelineState struct {
	Cursor   int64
	Counters map[NodeCheck]Counter
	Issued   map[NodeCheck]Issued
	Groups   []*unyov1.AggregateGroup
}

// AlertOp changes the active (not closed) alert with Key inside the commit's
// transaction: Apply gets the current alert (nil if none) and returns the
// alert to store (nil: store nothing). It must not do I/O.
type AlertOp struct {
	Key   string
	Apply func(current *unyov1.Alert) (*unyov1.Alert, error)
}

// Explained is the pipeline's verdict on one event.
type Explained struct {
	ID          string
	Explanation *unyov1.Explanation
	SilencedBy  string
	// Append adds the steps to the stored explanation and replaces only its
	// outcome (an aggregate group's flush, after its members were grouped).
	Append bool
	// KeepOutcome, with Append, keeps the stored outcome too (a hook's
	// delivery, reported after the event was processed).
	KeepOutcome bool
}

// HookJob is one ApiHook delivery or action plugin run, run at least once by the outbox worker.
type HookJob struct {
	// Key is the idempotency key (rule + event or group); a second job with
	// the same key is ignored.
	Key     string
	Rule    string
	EventID string
	// Exactly one of Hook and Plugin is set: an HTTP POST, or an action
	// plugin run with Body as its payload.
	Hook   *unyov1.ApiHookAction
	Plugin *unyov1.PluginAction
	// Body is built inside the commit, after the alert operations, so that
	// it can carry the alert they produced.
	Body func() ([]byte, error)
}

// PendingHook is a HookJob waiting in the outbox.
type PendingHook struct {
	Key      string
	Rule     string
	EventID  string
	Hook     *unyov1.ApiHookAction
	Plugin   *unyov1.PluginAction
	Body     []byte
	Attempts int
}

// PipelineCommit is everything one step of the event pipeline changes,
// written in one transaction together with the cursor.
type PipelineCommit struct {
	// ExpectCursor must equal the stored cursor, else ErrConflict.
	ExpectCursor, Cursor int64
	Explained            []Explained
	Counters             map[NodeCheck]Counter
	Issued               map[NodeCheck]Issued
	PutGroups            []*unyov1.AggregateGroup
	DeleteGroups         []*unyov1.AggregateGroup // by rule and key
	AlertOps             []AlertOp
	Hooks                []HookJob
	RuleMatches          map[string]int64
	MaintenanceSilenced  map[string]int64
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

	// DueHooks returns outbox jobs not yet finished, oldest first.
	DueHooks(ctx context.Context, limit int) ([]PendingHook, error)
	// FinishHook removes a job from the outbox and adds step to its event's
	// explanation.
	FinishHook(ctx context.Context, key string, step *unyov1.ExplanationStep) error
}
