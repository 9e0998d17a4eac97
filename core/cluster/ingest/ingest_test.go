package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/eventrules"
)

// fakeClock is the clock of receipt; tests move it by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	st    *sqlstore.Store
	in    *ingest.Ingester
	clock *fakeClock
	wake  chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, clock: &fakeClock{t: time.Now().UTC().Truncate(time.Second)}, wake: make(chan struct{}, 1)}
	f.in = ingest.New(ingest.Options{
		Cluster: "c1", Store: st, Wake: f.wake, Now: f.clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return f
}

func (f *fixture) ingest(t *testing.T, b ingest.Batch) ingest.Result {
	t.Helper()
	res, err := f.in.Ingest(t.Context(), b)
	if err != nil {
		t.Fatalf("Ingest(%s): %v", b.Source, err)
	}
	return res
}

// stored returns every stored event, by id.
func (f *fixture) stored(t *testing.T) map[string]*unyov1.Event {
	t.Helper()
	events, err := f.st.ListEvents(t.Context(), store.EventFilter{History: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unyov1.Event{}
	for _, e := range events {
		out[e.GetId()] = e
	}
	return out
}

func (f *fixture) filterRule(t *testing.T, name, check string) {
	t.Helper()
	r := &unyov1.EventRule{Name: name, Spec: &unyov1.EventRuleSpec{Type: "filter", Owner: "ops", Reason: "test", Match: &unyov1.EventMatch{Check: check}}}
	if _, err := eventrules.Compile(r); err != nil {
		t.Fatal(err) // a rule that does not compile is skipped, and the test would prove nothing
	}
	if _, err := f.st.PutEventRule(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	// The rules are cached for a second of the ingest's clock.
	f.clock.Add(2 * time.Second)
}

func (f *fixture) matched(t *testing.T, rule string) int64 {
	t.Helper()
	r, err := f.st.GetEventRule(t.Context(), rule)
	if err != nil {
		t.Fatal(err)
	}
	return r.GetMatched()
}

func agentResult(id, node, check string, at time.Time) *unyov1.Event {
	return &unyov1.Event{Id: id, Node: node, Check: check, Level: unyov1.Level_LEVEL_WARNING, Status: unyov1.CheckStatus_CHECK_STATUS_WARNING,
		StartedAt: timestamppb.New(at), Output: "WARNING - " + check}
}

func synthetic(node, check string, at time.Time) *unyov1.Event {
	return ingest.Synthetic{Node: node, Check: check, Status: unyov1.CheckStatus_CHECK_STATUS_WARNING, Output: "WARNING - " + check, At: at}.Event()
}

// TestFilterAppliesToEverySource: a Filter rule drops an event before it
// is stored whatever its source, and counts the drop on the rule.
func TestFilterAppliesToEverySource(t *testing.T) {
	for _, tc := range []struct {
		source ingest.Source
		check  string
		event  func(now time.Time) *unyov1.Event
	}{
		{ingest.Agent, "disk", func(now time.Time) *unyov1.Event { return agentResult("r1", "web1", "disk", now) }},
		{ingest.MetricCheck, "cpu-high", func(now time.Time) *unyov1.Event { return synthetic("web1", "cpu-high", now) }},
		{ingest.Liveness, ingest.LivenessCheck, func(now time.Time) *unyov1.Event { return synthetic("web1", ingest.LivenessCheck, now) }},
		{ingest.ActionFailure, "api-hook", func(now time.Time) *unyov1.Event { return synthetic("web1", "api-hook", now) }},
		{ingest.PluginState, "plugin-action-Mail_X", func(now time.Time) *unyov1.Event { return synthetic("c1", "plugin-action-Mail_X", now) }},
		{ingest.StoreLoss, "cluster-store", func(now time.Time) *unyov1.Event { return synthetic("c1", "cluster-store", now) }},
		{ingest.PeerWatch, ingest.PeerCheck, func(now time.Time) *unyov1.Event { return synthetic("c2", ingest.PeerCheck, now) }},
	} {
		t.Run(string(tc.source), func(t *testing.T) {
			f := newFixture(t)
			f.filterRule(t, "drop", tc.check)
			b := ingest.Batch{Source: tc.source, Events: []*unyov1.Event{tc.event(f.clock.Now()), synthetic("web1", "kept", f.clock.Now())}}
			if tc.source == ingest.Agent {
				b.Node = "web1"
				b.Events[1] = agentResult("r2", "web1", "kept", f.clock.Now())
			}
			res := f.ingest(t, b)
			if res.Filtered != 1 || res.Stored != 1 || len(res.Rejected) != 0 {
				t.Fatalf("result %+v: want 1 filtered, 1 stored", res)
			}
			got := f.stored(t)
			if len(got) != 1 {
				t.Fatalf("stored %d events, want the unfiltered one", len(got))
			}
			for _, e := range got {
				if e.GetCheck() != "kept" {
					t.Errorf("stored %q, want only check kept", e.GetCheck())
				}
			}
			if n := f.matched(t, "drop"); n != 1 {
				t.Errorf("rule drop matched %d, want 1", n)
			}
		})
	}
}

// TestStamping: the cluster, the time of receipt and (for an agent) the
// node's labels are the cluster's to set (over the check's own labels,
// which the result keeps); what the pipeline fills in is
// cleared; the cluster's own events get an id when they have none.
func TestStamping(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	e := agentResult("r1", "web1", "disk", now.Add(-time.Minute))
	e.Cluster, e.ReceivedAt, e.Labels = "elsewhere", timestamppb.New(now.Add(-time.Hour)), map[string]string{"role": "claimed", "team": "storage"}
	e.SilencedBy, e.Explanation = "rule:x", &unyov1.Explanation{Outcome: "claimed"}
	f.ingest(t, ingest.Batch{Source: ingest.Agent, Node: "web1", Labels: map[string]string{"role": "web"}, Events: []*unyov1.Event{e}})

	own := synthetic("web1", ingest.LivenessCheck, now)
	own.Id = ""
	res := f.ingest(t, ingest.Batch{Source: ingest.Liveness, Events: []*unyov1.Event{own}})
	if own.GetId() == "" || res.Stored != 1 {
		t.Fatalf("the cluster's event without an id: id %q, result %+v", own.GetId(), res)
	}

	got := f.stored(t)
	for _, id := range []string{"r1", own.GetId()} {
		s := got[id]
		if s == nil {
			t.Fatalf("event %s not stored", id)
		}
		if s.GetCluster() != "c1" || !s.GetReceivedAt().AsTime().Equal(now) {
			t.Errorf("event %s: cluster %q received %s, want c1 at %s", id, s.GetCluster(), s.GetReceivedAt().AsTime(), now)
		}
		if s.GetSilencedBy() != "" || s.GetExplanation().GetOutcome() == "claimed" {
			t.Errorf("event %s: silenced_by %q explanation %v, want the sender's cleared", id, s.GetSilencedBy(), s.GetExplanation())
		}
	}
	if l := got["r1"].GetLabels(); len(l) != 2 || l["role"] != "web" || l["team"] != "storage" {
		t.Errorf("agent result labels %v, want the check's team and the node's role: web over the claimed one", l)
	}
}

// TestValidation: an agent's results are judged as its node's claims, the
// cluster's own events only as what every stored event must be; one
// invalid event is rejected and the rest of the batch is stored.
func TestValidation(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	noLevel := agentResult("r5", "web1", "disk", now)
	noLevel.Level = unyov1.Level_LEVEL_UNSPECIFIED
	res := f.ingest(t, ingest.Batch{Source: ingest.Agent, Node: "web1", Events: []*unyov1.Event{
		agentResult("r0", "web1", "disk", now),
		agentResult("r1", "web2", "disk", now),                        // another node's
		agentResult("r2", "web1", ingest.LivenessCheck, now),          // the cluster's judgement
		agentResult("r3", "web1", "Bad Name", now),                    // not a check name
		agentResult("r4", "web1", "disk", now.Add(-400*24*time.Hour)), // too old
		noLevel,
		agentResult("", "web1", "disk", now), // an agent's result needs its own id
		agentResult("r7", "web1", ingest.PeerCheck, now), // a cluster's judgement of a peer
	}})
	if res.Stored != 1 || len(res.Rejected) != 7 {
		t.Fatalf("result %+v: want 1 stored, 7 rejected", res)
	}
	for i, want := range []string{"results[1] (id \"r1\"): node", "results[2] (id \"r2\"): check", "results[3] (id \"r3\"): check", "results[4] (id \"r4\"): started_at", "results[5] (id \"r5\"): level", "results[6] (id \"\"): id", "results[7] (id \"r7\"): check"} {
		if !strings.HasPrefix(res.Rejected[i], want) {
			t.Errorf("rejection %d: %q, want it to start with %q", i, res.Rejected[i], want)
		}
	}

	// The cluster's own: its checks and times are its own business.
	old := synthetic("web1", ingest.LivenessCheck, now.Add(-400*24*time.Hour))
	plugin := synthetic("c1", "plugin-action-Mail_X", now)
	bad := synthetic("c1", "x", now)
	bad.Level = unyov1.Level_LEVEL_UNSPECIFIED
	res = f.ingest(t, ingest.Batch{Source: ingest.Liveness, Events: []*unyov1.Event{old, plugin, bad}})
	if res.Stored != 2 || len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0], "level") {
		t.Fatalf("the cluster's own events: %+v, want 2 stored and the one without a level rejected", res)
	}
}

// TestNothingLostOrDoubled: a resent batch is counted as duplicates and
// stored once; the pipeline is woken only when something new was stored.
func TestNothingLostOrDoubled(t *testing.T) {
	f := newFixture(t)
	batch := func() ingest.Batch {
		var events []*unyov1.Event
		for i := range 50 {
			events = append(events, agentResult("r"+string(rune('a'+i%26))+string(rune('a'+i/26)), "web1", "disk", f.clock.Now()))
		}
		return ingest.Batch{Source: ingest.Agent, Node: "web1", Events: events}
	}
	if res := f.ingest(t, batch()); res.Stored != 50 || res.Duplicates != 0 {
		t.Fatalf("first: %+v, want 50 stored", res)
	}
	select {
	case <-f.wake:
	default:
		t.Error("the pipeline was not woken after events were stored")
	}
	if res := f.ingest(t, batch()); res.Stored != 0 || res.Duplicates != 50 {
		t.Fatalf("resent: %+v, want 50 duplicates", res)
	}
	select {
	case <-f.wake:
		t.Error("the pipeline was woken though nothing new was stored")
	default:
	}
	if n := len(f.stored(t)); n != 50 {
		t.Errorf("stored %d events, want 50", n)
	}
}

// TestSyntheticEvent: the one constructor of the cluster's own events.
func TestSyntheticEvent(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		status  unyov1.CheckStatus
		unknown unyov1.Level
		want    unyov1.Level
	}{
		{unyov1.CheckStatus_CHECK_STATUS_OK, 0, unyov1.Level_LEVEL_SUCCESS},
		{unyov1.CheckStatus_CHECK_STATUS_WARNING, 0, unyov1.Level_LEVEL_WARNING},
		{unyov1.CheckStatus_CHECK_STATUS_CRITICAL, 0, unyov1.Level_LEVEL_CRITICAL},
		{unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, 0, unyov1.Level_LEVEL_CRITICAL},
		{unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, unyov1.Level_LEVEL_WARNING, unyov1.Level_LEVEL_WARNING},
	} {
		e := ingest.Synthetic{Node: "n", Check: "c", Status: tc.status, UnknownLevel: tc.unknown, Output: "first\nsecond\nthird", At: at, Duration: time.Second}.Event()
		want := &unyov1.Event{
			Id: e.GetId(), Node: "n", Check: "c", Status: tc.status, Level: tc.want, ExitCode: int32(tc.status),
			Output: "first", LongOutput: "second\nthird", StartedAt: timestamppb.New(at), Duration: e.GetDuration(),
		}
		if !proto.Equal(e, want) || e.GetDuration().AsDuration() != time.Second {
			t.Errorf("status %s: got %v, want %v", tc.status, e, want)
		}
	}
	a, b := ingest.Synthetic{At: at}.Event(), ingest.Synthetic{At: at}.Event()
	if a.GetId() == "" || a.GetId() == b.GetId() {
		t.Errorf("ids %q and %q: want new and distinct", a.GetId(), b.GetId())
	}
}

// TestDeletedCheckResultsDropped: results of a deleted check still in
// flight (run before the deletion, or within the grace after it while the
// agent had not heard) are dropped and counted, not stored; results of
// other checks, and of the check once applied again, are stored.
func TestDeletedCheckResultsDropped(t *testing.T) {
	f := newFixture(t)
	f.in = ingest.New(ingest.Options{
		Cluster: "c1", Store: f.st, Wake: f.wake, Now: f.clock.Now, DeletedGrace: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx := t.Context()
	disk := &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{Command: []string{"true"}, Interval: "10s"}}
	if _, err := f.st.PutCheck(ctx, disk); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute) // the agents' clock, not the ingest's
	if res := f.ingest(t, ingest.Batch{Source: ingest.Agent, Node: "web1", Events: []*unyov1.Event{agentResult("r1", "web1", "disk", before)}}); res.Stored != 1 {
		t.Fatalf("before the deletion: %+v, want 1 stored", res)
	}
	if err := f.st.DeleteCheck(ctx, "disk"); err != nil {
		t.Fatal(err)
	}
	f.in.ChecksChanged()
	deletedAt := time.Now()
	res := f.ingest(t, ingest.Batch{Source: ingest.Agent, Node: "web1", Events: []*unyov1.Event{
		agentResult("r2", "web1", "disk", before),                       // spooled before the deletion
		agentResult("r3", "web1", "disk", deletedAt.Add(5*time.Second)), // run before the agent heard
		agentResult("r4", "web1", "disk", deletedAt.Add(time.Minute)),   // after the grace: an agent's own check
		agentResult("r5", "web1", "load", before),                       // another check
	}})
	if res.DeletedCheck != 2 || res.Stored != 2 || len(res.Rejected) != 0 {
		t.Fatalf("after the deletion: %+v, want 2 dropped as of a deleted check, 2 stored", res)
	}
	got := f.stored(t)
	for id, want := range map[string]bool{"r1": true, "r2": false, "r3": false, "r4": true, "r5": true} {
		if _, ok := got[id]; ok != want {
			t.Errorf("result %s stored = %v, want %v", id, ok, want)
		}
	}
	// Other sources are the cluster's own: never dropped here.
	if res := f.ingest(t, ingest.Batch{Source: ingest.Freshness, Events: []*unyov1.Event{synthetic("web1", "disk", f.clock.Now())}}); res.Stored != 1 {
		t.Errorf("freshness event of the deleted check: %+v, want stored", res)
	}

	// Applied again, the check's results count again, even ones run
	// before (another replica finds out within the cache's second).
	if _, err := f.st.PutCheck(ctx, disk); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(2 * time.Second)
	if res := f.ingest(t, ingest.Batch{Source: ingest.Agent, Node: "web1", Events: []*unyov1.Event{agentResult("r6", "web1", "disk", deletedAt)}}); res.Stored != 1 || res.DeletedCheck != 0 {
		t.Errorf("after the check was applied again: %+v, want 1 stored", res)
	}
}
