package cluster

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestLivenessThroughIngest: the liveness monitor's events take the one
// ingest path, so they carry the node's labels and Filter rules apply to
// them; the node's state changes either way.
func TestLivenessThroughIngest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		filtered bool
	}{{"stored", false}, {"filtered", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			c := New(st, Options{Name: "c1", Replica: "r1", HeartbeatInterval: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			beat := time.Now().Add(-time.Hour).Truncate(time.Second)
			if err := st.UpsertNode(ctx, &unyov1.Node{Name: "web1", Labels: map[string]string{"role": "web"}, LastHeartbeat: timestamppb.New(beat)}); err != nil {
				t.Fatal(err)
			}
			if tc.filtered {
				r := &unyov1.EventRule{Name: "quiet-liveness", Spec: &unyov1.EventRuleSpec{Type: "filter", Owner: "ops", Reason: "test",
					Match: &unyov1.EventMatch{Check: ingest.LivenessCheck}}}
				if _, err := st.PutEventRule(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			l := newLivenessMonitor(c)
			l.started = beat // judging for an hour, past the grace period
			l.judge(ctx)     // Ready, then silent for an hour: Stale
			n, err := st.GetNode(ctx, "web1")
			if err != nil {
				t.Fatal(err)
			}
			if n.GetState() != unyov1.NodeState_NODE_STATE_STALE {
				t.Fatalf("node state %s, want Stale", n.GetState())
			}
			events, err := st.ListEvents(ctx, store.EventFilter{Node: "web1", Check: ingest.LivenessCheck, History: true})
			if err != nil {
				t.Fatal(err)
			}
			rules, err := st.ListEventRules(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.filtered {
				if len(events) != 0 || len(rules) != 1 || rules[0].GetMatched() != 1 {
					t.Errorf("filtered: events %v, rules %v; want none stored and the drop counted", events, rules)
				}
				return
			}
			if len(events) != 1 {
				t.Fatalf("liveness events: %v, want one", events)
			}
			e := events[0]
			if e.GetLevel() != unyov1.Level_LEVEL_WARNING || e.GetCluster() != "c1" || e.GetLabels()["role"] != "web" || e.GetReceivedAt() == nil {
				t.Errorf("liveness event %v: want a stamped warning with the node's labels", e)
			}
		})
	}
}

// TestLivenessGraceAfterStart: a monitor that has just started (the cluster
// restarted, or another replica took the lease) does not count the time no
// monitor was listening: no node turns Stale or Down, and no liveness event
// is raised, until stale_after has passed since the start and the agents'
// time to come back (countFrom); then a silent node turns Stale and one
// that heartbeats stays Ready.
func TestLivenessGraceAfterStart(t *testing.T) {
	ctx := t.Context()
	c, st := quietCluster(t, Options{HeartbeatInterval: time.Second, StaleAfter: 30 * time.Second, DownAfter: 90 * time.Second})
	start := time.Now().Truncate(time.Second)
	// Both nodes last heartbeat a minute before the cluster (re)started; web1
	// was Stale already.
	for _, n := range []*unyov1.Node{
		{Name: "web1", State: unyov1.NodeState_NODE_STATE_STALE},
		{Name: "web2", State: unyov1.NodeState_NODE_STATE_READY},
		{Name: "web3", State: unyov1.NodeState_NODE_STATE_READY},
	} {
		n.LastHeartbeat = timestamppb.New(start.Add(-time.Minute))
		if err := st.UpsertNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	clock := start
	l := newLivenessMonitor(c)
	l.started, l.now = start, func() time.Time { return clock }
	l.hc.Timeout = 10 * time.Millisecond
	states := func() map[string]unyov1.NodeState {
		t.Helper()
		nodes, err := st.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]unyov1.NodeState{}
		for _, n := range nodes {
			out[n.GetName()] = n.GetState()
		}
		return out
	}
	liveness := func() int {
		t.Helper()
		events, err := st.ListEvents(ctx, store.EventFilter{Check: ingest.LivenessCheck, History: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(events)
	}
	for _, step := range []struct {
		at   time.Duration // since the start
		beat bool          // web3 heartbeats
		want map[string]unyov1.NodeState
		// events is how many liveness events exist by then.
		events int
	}{
		{0, false, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_READY, "web3": unyov1.NodeState_NODE_STATE_READY}, 0},
		{10 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_READY, "web3": unyov1.NodeState_NODE_STATE_READY}, 0},
		{30 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_READY, "web3": unyov1.NodeState_NODE_STATE_READY}, 0},
		// The cluster was away a minute: agents may take up to 30s more.
		{59 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_READY, "web3": unyov1.NodeState_NODE_STATE_READY}, 0},
		// Grace over: web2 never heartbeat since the start.
		{61 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_STALE, "web3": unyov1.NodeState_NODE_STATE_READY}, 1},
		// Down is judged from then too: web1 was Stale, its probe fails.
		{119 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_STALE, "web2": unyov1.NodeState_NODE_STATE_STALE, "web3": unyov1.NodeState_NODE_STATE_READY}, 1},
		{121 * time.Second, true, map[string]unyov1.NodeState{"web1": unyov1.NodeState_NODE_STATE_DOWN, "web2": unyov1.NodeState_NODE_STATE_DOWN, "web3": unyov1.NodeState_NODE_STATE_READY}, 3},
	} {
		clock = start.Add(step.at)
		if step.beat {
			if err := st.TouchNodes(ctx, map[string]time.Time{"web3": clock}); err != nil {
				t.Fatal(err)
			}
		}
		l.judge(ctx)
		if got := states(); !maps.Equal(got, step.want) {
			t.Errorf("%s after the start: states %v, want %v", step.at, got, step.want)
		}
		if got := liveness(); got != step.events {
			t.Errorf("%s after the start: %d liveness events, want %d", step.at, got, step.events)
		}
	}
}

// TestCountFrom: silence counts from the judge's start plus as long as the
// cluster was away (since the newest heartbeat), at most the agents'
// longest retry delay.
func TestCountFrom(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	beat := func(d time.Duration) time.Time { return start.Add(d) }
	for _, tc := range []struct {
		name  string
		nodes []time.Time
		want  time.Duration
	}{
		{"no nodes", nil, 0},
		{"no heartbeat yet", []time.Time{{}}, 0},
		{"a failover: heartbeats kept arriving", []time.Time{beat(-time.Hour), beat(-time.Second)}, time.Second},
		{"away 5s", []time.Time{beat(-5 * time.Second), beat(-time.Minute)}, 5 * time.Second},
		{"away an hour", []time.Time{beat(-time.Hour)}, limits.MaxHeartbeatRetry},
		{"a heartbeat after the start", []time.Time{beat(time.Second)}, 0},
	} {
		if got := countFrom(start, tc.nodes).Sub(start); got != tc.want {
			t.Errorf("%s: counts from start+%s, want +%s", tc.name, got, tc.want)
		}
	}
}

// quietCluster is cluster c1 (replica r1) on a new SQLite store, logging
// nowhere; the store closes when the test ends.
func quietCluster(t *testing.T, o Options) (*Cluster, *sqlstore.Store) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o.Name, o.Replica, o.Logger = "c1", "r1", slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(st, o), st
}
