// Package ingest is the one way events enter a cluster's store. Whatever
// their source — results agents report, metric checks the cluster
// evaluates, node liveness, webhooks and action plugins that failed for
// good, action plugins changing state, the store losing acknowledged events
// — a batch of events goes through the same steps, in this order:
//
//  1. stamp: the cluster's name and the time of receipt; an id for an event
//     the cluster made without one;
//  2. validate, once: what every stored event must be (id, times, level,
//     status, sizes) and, for agents' results, what an agent may claim
//     (its own node, a valid check name, a plausible time, not a check the
//     cluster reserves); an invalid event is rejected, the rest go on;
//  3. deleted checks, for agents' results: a result of a check deleted (and
//     not applied again) that ran before the deletion, or so soon after it
//     that the agent had not heard, is dropped and counted;
//  4. Filter rules, for every source: a matching event is dropped before it
//     is stored, and the drop is counted on the rule;
//  5. store, through the store's group commit: an id already stored is a
//     duplicate, not a second event;
//  6. wake the event pipeline.
//
// A new source of events (inter-cluster checks, say) is a new Source and a
// call to Ingest, nothing more.
package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/internal/failpoint"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/peerwatch"
)

// Source says where a batch of events comes from. Agent results are judged
// as claims of the node that reports them; the other sources are the
// cluster's own.
type Source string

// The sources of events.
const (
	Agent         Source = "agent"          // results an agent reports
	MetricCheck   Source = "metric-check"   // metric checks the cluster evaluates
	Liveness      Source = "liveness"       // a node's liveness changed
	Freshness     Source = "freshness"      // a check with a ttl stopped reporting
	ActionFailure Source = "action-failure" // a webhook or action plugin failed for good
	PluginState   Source = "plugin-state"   // an action plugin of the cluster changed state
	StoreLoss     Source = "store-loss"     // the store lost events it had acknowledged
	PeerWatch     Source = "peer-watch"     // a peer cluster this one watches is down, stuck or back
	Placement     Source = "placement"      // a compute could not be placed (Blocked, Failed) or was placed again
	RootService   Source = "root-service"   // root's event about a RegionService (an autoscaling decision)
	NodeOps       Source = "node-ops"       // a drain started, finished or stopped; unyo cordoned, uncordoned or drained a node on its own
)

// DrainCheck is the check of drain events and AutoCheck of automatic
// cordon and drain events: on the cluster's own node name (so that the
// drain's maintenance does not silence them), labelled with the node.
const (
	DrainCheck = "node-drain"
	AutoCheck  = "node-auto"
)

// AutoscaleCheck is the check of root's autoscaling events: one per
// decision that changed a service's replicas, and when its metric stops or
// starts being usable; on the cluster's own node name, labelled with the
// service.
const AutoscaleCheck = "service-autoscale"

// PlacementCheck is the check of placement events: one per compute that
// the node stage could not place, on the cluster's own node name, labelled
// with the compute and service.
const PlacementCheck = "compute-placement"

// LivenessCheck is the check of node liveness events: the cluster's own
// judgement of a node, which its agent may not report.
const LivenessCheck = "node-liveness"

// PeerCheck is the check of the events a cluster raises about a peer
// cluster it watches (the event's node is the peer's name); agents may not
// report it either.
const PeerCheck = peerwatch.Check

// Store is what ingest needs of the state store.
type Store interface {
	// AppendEvents stores the events whose ids are new; see store.Store.
	AppendEvents(ctx context.Context, events []*unyov1.Event) (inserted int, err error)
	RulesRevision(ctx context.Context) (int64, error)
	ListEventRules(ctx context.Context) ([]*unyov1.EventRule, error)
	CountMatches(ctx context.Context, rules map[string]int64, maintenance map[string]int64) error
	ChecksRevision(ctx context.Context) (int64, error)
	// DeletedChecks are the checks deleted and not applied again since; see
	// store.Checks.
	DeletedChecks(ctx context.Context) (map[string]time.Time, error)
}

// Options configure an Ingester.
type Options struct {
	Cluster string
	Store   Store
	// Wake is signalled, without blocking, after events were stored: the
	// pipeline waits on it.
	Wake chan<- struct{}
	// Now is the clock of receipt and of judging agents' times; default
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// DeletedGrace: the results of a deleted check run up to this long
	// after its deletion are dropped too, as an agent runs the check until
	// its next heartbeat tells it otherwise. The cluster passes its
	// staleAfter, three heartbeats.
	DeletedGrace time.Duration
}

// Ingester stores events. It is safe for concurrent use: every request
// handler and background loop of a replica shares one.
type Ingester struct {
	cluster string
	store   Store
	wake    chan<- struct{}
	now     func() time.Time
	log     *slog.Logger
	filters filterCache
	deleted deletedCache
	// deletedGrace: see Options.DeletedGrace.
	deletedGrace time.Duration
	// beforeCommit and afterCommit are test hooks that crash the process
	// around storing a batch (ingest-before-commit, ingest-after-commit);
	// nil unless UNYO_FAILPOINT says.
	beforeCommit, afterCommit *failpoint.Point
}

// New returns an Ingester.
func New(o Options) *Ingester {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Ingester{
		cluster: o.Cluster, store: o.Store, wake: o.Wake, now: o.Now, log: o.Logger,
		filters:      filterCache{st: o.Store, now: o.Now},
		deleted:      deletedCache{st: o.Store, now: o.Now},
		deletedGrace: o.DeletedGrace,
		beforeCommit: failpoint.New("ingest-before-commit"),
		afterCommit:  failpoint.New("ingest-after-commit"),
	}
}

// Batch is events from one source.
type Batch struct {
	Source Source
	// Node is the node reporting an Agent batch; every result must name it.
	Node string
	// Labels, when not nil, are laid over every event's labels: an agent's
	// results carry its check's labels and, overriding them, its node's,
	// whatever the agent sent under a node label's name.
	Labels map[string]string
	Events []*unyov1.Event
}

// Result is what became of a batch.
type Result struct {
	// Stored were new; Duplicates had been stored before (an agent
	// resending); Filtered were dropped by Filter rules; DeletedCheck
	// were results of a check deleted meanwhile (see dropDeleted).
	Stored, Duplicates, Filtered, DeletedCheck int
	// Rejected says why each invalid event was refused, by its index in
	// the batch.
	Rejected []string
	// Kept are the events given to the store (new ones and duplicates).
	Kept []*unyov1.Event
}

// Ingest stamps, validates, filters and stores a batch, and wakes the
// pipeline. An error means nothing of the batch may have been stored (the
// rules or the store could not be read or written): an agent resends it, and
// ids keep the resend from doubling what was stored after all.
func (in *Ingester) Ingest(ctx context.Context, b Batch) (Result, error) {
	now := in.now()
	received := timestamppb.New(now)
	var res Result
	kept := make([]*unyov1.Event, 0, len(b.Events))
	for i, e := range b.Events {
		if e.GetId() == "" && b.Source != Agent {
			e.Id = NewID()
		}
		if err := validEvent(e, b, now); err != nil {
			res.Rejected = append(res.Rejected, fmt.Sprintf("results[%d] (id %q): %v", i, limits.Abbrev(e.GetId()), err))
			continue
		}
		capSizes(e)
		e.Cluster = in.cluster
		e.ReceivedAt = received
		if b.Labels != nil {
			e.Labels = overlay(e.Labels, b.Labels)
		}
		// The pipeline's to fill in, never the sender's.
		e.Explanation, e.SilencedBy = nil, ""
		kept = append(kept, e)
	}
	if len(res.Rejected) > 0 && b.Source != Agent {
		// The cluster made these events: a rejection is a bug here, not bad input.
		in.log.Error("the cluster made events that are not valid; they are not stored", "source", b.Source, "count", len(res.Rejected), "first", res.Rejected[0])
	}
	if b.Source == Agent {
		var err error
		if kept, res.DeletedCheck, err = in.dropDeleted(ctx, kept); err != nil {
			return Result{}, fmt.Errorf("read the deleted checks to drop their results: %w", err)
		}
	}
	valid := len(kept)
	kept, err := in.filter(ctx, kept)
	if err != nil {
		return Result{}, fmt.Errorf("read the event rules to apply Filter rules: %w", err)
	}
	res.Filtered = valid - len(kept)
	in.beforeCommit.Pass()
	inserted, err := in.store.AppendEvents(ctx, kept)
	if err != nil {
		return Result{}, fmt.Errorf("store %d events (%s): %w", len(kept), b.Source, err)
	}
	// Stored but not yet acknowledged: an agent resends, and the ids keep
	// the resend from doubling anything.
	in.afterCommit.Pass()
	res.Stored, res.Duplicates, res.Kept = inserted, len(kept)-inserted, kept
	if inserted > 0 {
		in.wakePipeline()
	}
	return res, nil
}

// wakePipeline tells the pipeline that new events were stored, without
// blocking when it already knows.
func (in *Ingester) wakePipeline() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// NewID is a new event id: a UUIDv7, so ids sort by creation time.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// overlay is base with over's labels laid on top; over itself when base
// is empty, as most results carry no labels of their own.
func overlay(base, over map[string]string) map[string]string {
	if len(base) == 0 {
		return over
	}
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}
