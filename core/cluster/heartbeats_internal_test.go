package cluster

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestHeartbeatWrites: the tracker writes a node's first heartbeat at the
// next flush, then at most every writeEvery (stale_after/2 - 1 s), a beat
// left unwritten once that time has passed even if the node fell silent,
// and everything unwritten at the last flush; it forgets written beats
// older than stale_after.
func TestHeartbeatWrites(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	clock := start
	h := newHeartbeats(nil, nil, 30*time.Second)
	h.now = func() time.Time { return clock }
	if h.writeEvery != 14*time.Second {
		t.Fatalf("writeEvery %s, want 14s", h.writeEvery)
	}
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, step := range []struct {
		at    time.Duration
		beats []string // nodes heartbeating at this time
		all   bool     // the last flush
		want  map[string]time.Time
	}{
		{0, []string{"a", "b"}, false, map[string]time.Time{"a": at(0), "b": at(0)}},
		{10 * time.Second, []string{"a", "b"}, false, nil},
		{13 * time.Second, nil, false, nil},
		// 14 s after their first write: the beat of 10 s goes out.
		{14 * time.Second, []string{"c"}, false, map[string]time.Time{"a": at(10 * time.Second), "b": at(10 * time.Second), "c": at(14 * time.Second)}},
		{20 * time.Second, []string{"a"}, false, nil},
		{21 * time.Second, []string{"b"}, true, map[string]time.Time{"a": at(20 * time.Second), "b": at(21 * time.Second)}},
	} {
		clock = at(step.at)
		for _, n := range step.beats {
			h.add(n, clock)
		}
		if got := h.due(step.all); !maps.Equal(got, step.want) {
			t.Errorf("at %s: wrote %v, want %v", step.at, got, step.want)
		}
	}
	if got := h.lastBeat("a"); !got.Equal(at(20 * time.Second)) {
		t.Errorf("a's last beat %s, want %s", got, at(20*time.Second))
	}
	clock = at(60 * time.Second) // all written, 39 s and more ago
	h.due(false)
	if len(h.nodes) != 0 || len(h.dirty) != 0 {
		t.Errorf("still remembered: %d nodes, %d dirty", len(h.nodes), len(h.dirty))
	}
	// A deleted node's unwritten beat is not written.
	h.add("d", clock)
	h.forget("d")
	if got := h.due(true); len(got) != 0 {
		t.Errorf("wrote %v for a deleted node", got)
	}
}

// TestLivenessFromTracker: the judge counts a node's silence from the newer
// of the store's heartbeat and the tracker's, which the store may not have
// yet: a node heartbeating here stays Ready while its stored beat is old.
func TestLivenessFromTracker(t *testing.T) {
	ctx := t.Context()
	c, st := quietCluster(t, Options{HeartbeatInterval: 10 * time.Second, StaleAfter: 30 * time.Second, DownAfter: 90 * time.Second})
	start := time.Now().Truncate(time.Second)
	for _, name := range []string{"heard", "silent"} {
		if err := st.UpsertNode(ctx, &unyov1.Node{Name: name, State: unyov1.NodeState_NODE_STATE_READY, LastHeartbeat: timestamppb.New(start)}); err != nil {
			t.Fatal(err)
		}
	}
	clock := start
	l := newLivenessMonitor(c)
	l.started, l.now = start.Add(-time.Hour), func() time.Time { return clock } // past the grace period
	l.hc.Timeout = 10 * time.Millisecond
	l.judge(ctx)
	clock = start.Add(40 * time.Second)
	c.beats.add("heard", clock.Add(-5*time.Second)) // not written to the store
	l.judge(ctx)
	for name, want := range map[string]unyov1.NodeState{"heard": unyov1.NodeState_NODE_STATE_READY, "silent": unyov1.NodeState_NODE_STATE_STALE} {
		n, err := st.GetNode(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if n.GetState() != want {
			t.Errorf("%s: state %s, want %s", name, n.GetState(), want)
		}
	}
}

// BenchmarkHeartbeatTracker: one second of 10,000 nodes heartbeating every
// 10 s through the tracker: 1,000 adds and the flush's due; ns/op is the
// tracker's CPU per second of that load (the store's writes not counted).
func BenchmarkHeartbeatTracker(b *testing.B) {
	const nodes, perSecond = 10000, 1000
	clock := time.Unix(1_800_000_000, 0)
	h := newHeartbeats(nil, nil, 30*time.Second)
	h.now = func() time.Time { return clock }
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%05d", i)
		h.add(names[i], clock)
	}
	h.due(false)
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		clock = clock.Add(time.Second)
		for range perSecond {
			h.add(names[next%nodes], clock)
			next++
		}
		h.due(false)
	}
}
