package cluster

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// TestFreshness: a check with a ttl whose results stop raises one UNKNOWN
// event of the check per silence, for Ready nodes the check selects, not
// counting the time before the monitor started; a result arriving again
// starts a new silence.
func TestFreshness(t *testing.T) {
	ctx := t.Context()
	c, st := quietCluster(t, Options{})
	if _, err := st.PutCheck(ctx, &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{
		Command: []string{"check_disk"}, Interval: "5s", Ttl: "10s", UnknownLevel: "warning", NodeSelector: map[string]string{"role": "web"}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Truncate(time.Second)
	for _, n := range []*unyov1.Node{
		{Name: "web1", State: unyov1.NodeState_NODE_STATE_READY, Labels: map[string]string{"role": "web"}},
		{Name: "web2", State: unyov1.NodeState_NODE_STATE_STALE, Labels: map[string]string{"role": "web"}},
		{Name: "db1", State: unyov1.NodeState_NODE_STATE_READY, Labels: map[string]string{"role": "db"}},
	} {
		if err := st.UpsertNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	seq := 0
	result := func(node string, at time.Time) {
		t.Helper()
		seq++
		e := &unyov1.Event{Id: node + "-" + at.String(), Node: node, Check: "disk", Level: unyov1.Level_LEVEL_SUCCESS,
			Status: unyov1.CheckStatus_CHECK_STATUS_OK, Output: "DISK OK", StartedAt: timestamppb.New(at), ReceivedAt: timestamppb.New(at)}
		if _, err := st.AppendEvents(ctx, []*unyov1.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	// Every node reported a minute before the monitor started.
	for _, n := range []string{"web1", "web2", "db1"} {
		result(n, start.Add(-time.Minute))
	}
	clock := start
	m := newFreshnessMonitor(c)
	m.started, m.from, m.now = start, start, func() time.Time { return clock } // no allowance: see TestCountFrom
	history := func(node string) []*unyov1.Event {
		t.Helper()
		h, err := st.ListEvents(ctx, store.EventFilter{Node: node, Check: "disk", History: true})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, step := range []struct {
		at     time.Duration
		result bool // web1 reports just before
		want   int  // web1's history by then
	}{
		{5 * time.Second, false, 1},  // within the ttl since the start
		{11 * time.Second, false, 2}, // overdue: raised
		{30 * time.Second, false, 2}, // once per silence
		{35 * time.Second, true, 3},  // a result again
		{44 * time.Second, false, 3},
		{46 * time.Second, false, 4}, // overdue again
	} {
		clock = start.Add(step.at)
		if step.result {
			result("web1", clock.Add(-time.Second))
		}
		m.judge(ctx)
		if got := history("web1"); len(got) != step.want {
			t.Fatalf("%s after the start: web1/disk history %d, want %d", step.at, len(got), step.want)
		}
	}
	e := history("web1")[0]
	if e.GetStatus() != unyov1.CheckStatus_CHECK_STATUS_UNKNOWN || e.GetLevel() != unyov1.Level_LEVEL_WARNING ||
		!strings.Contains(e.GetOutput(), "no result of check disk from node web1 for 12s (ttl 10s); the last one was ok: DISK OK") || e.GetLabels()["role"] != "web" {
		t.Errorf("freshness event %v: want UNKNOWN at the check's unknown_level, saying how long", e)
	}
	for _, n := range []string{"web2", "db1"} {
		if h := history(n); len(h) != 1 {
			t.Errorf("%s: %d events, want none raised (Stale, or not selected)", n, len(h))
		}
	}
}
