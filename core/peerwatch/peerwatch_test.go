package peerwatch_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/peerwatch"
)

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		names []string
		n     int
		want  map[string][]string
	}{
		{nil, 2, map[string][]string{}},
		{[]string{"a"}, 2, map[string][]string{}}, // nobody to watch it
		{[]string{"b", "a"}, 2, map[string][]string{"a": {"b"}, "b": {"a"}}},
		{[]string{"c", "a", "b"}, 2, map[string][]string{"a": {"b", "c"}, "b": {"c", "a"}, "c": {"a", "b"}}},
		{[]string{"a", "b", "c", "d"}, 1, map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"a"}}},
	} {
		got := peerwatch.Assign(tc.names, tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("Assign(%v, %d) = %v, want %v", tc.names, tc.n, got, tc.want)
			continue
		}
		for w, watched := range tc.want {
			if !reflect.DeepEqual(got[w], watched) {
				t.Errorf("Assign(%v, %d)[%s] = %v, want %v", tc.names, tc.n, w, got[w], watched)
			}
		}
		// Every cluster is watched once there are two.
		if len(tc.names) >= 2 {
			for _, c := range tc.names {
				if len(peerwatch.WatchersOf(got, c)) == 0 {
					t.Errorf("Assign(%v, %d): nobody watches %s", tc.names, tc.n, c)
				}
			}
		}
	}
	if got := peerwatch.WatchersOf(peerwatch.Assign([]string{"a", "b", "c"}, 2), "a"); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Errorf("WatchersOf a = %v, want [b c]", got)
	}
}

var (
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	th       = peerwatch.Thresholds{Unreachable: 30 * time.Second, Lag: time.Minute, Ingest: 5 * time.Minute}
	down     = errors.New("connection refused")
	healthy  = &unyov1.ClusterHealth{LeaseHolder: "b-1", IngestAge: durationpb.New(3 * time.Second), Nodes: 2, Checks: 1}
	noLease  = &unyov1.ClusterHealth{Nodes: 2, Checks: 1}
	lagging  = &unyov1.ClusterHealth{LeaseHolder: "b-1", PipelineBehind: 40, PipelineLag: durationpb.New(2 * time.Minute)}
	behindOK = &unyov1.ClusterHealth{LeaseHolder: "b-1", PipelineBehind: 40, PipelineLag: durationpb.New(10 * time.Second)}
	starved  = &unyov1.ClusterHealth{LeaseHolder: "b-1", IngestAge: durationpb.New(6 * time.Minute), Nodes: 2, Checks: 1}
	noChecks = &unyov1.ClusterHealth{LeaseHolder: "b-1", IngestAge: durationpb.New(6 * time.Minute), Nodes: 2}
)

// look is one look in a sequence: after is the time since the watch began.
type look struct {
	after  time.Duration
	err    error
	health *unyov1.ClusterHealth
	status string
	msg    string // a part of the message
}

func TestObserve(t *testing.T) {
	ok, warn, crit := unyov1.CheckStatus_CHECK_STATUS_OK, unyov1.CheckStatus_CHECK_STATUS_WARNING, unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	want := map[string]unyov1.CheckStatus{peerwatch.StatusOK: ok, peerwatch.StatusUnreachable: warn, peerwatch.StatusDown: crit, peerwatch.StatusStuck: crit}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"healthy", []look{{0, nil, healthy, peerwatch.StatusOK, "controller b-1"}}},
		{"killed and back", []look{
			{0, nil, healthy, peerwatch.StatusOK, ""},
			{10 * time.Second, down, nil, peerwatch.StatusUnreachable, "has not answered for 10s (down after 30s)"},
			{30 * time.Second, down, nil, peerwatch.StatusUnreachable, "for 30s"}, // 30 s after the last answer, not more
			{31 * time.Second, down, nil, peerwatch.StatusDown, "has not answered for 31s (down after 30s), last seen 2026-01-02T03:04:05Z: connection refused"},
			{50 * time.Second, nil, healthy, peerwatch.StatusOK, ""},
			{55 * time.Second, down, nil, peerwatch.StatusUnreachable, "for 5s"}, // counted from the last answer
		}},
		{"never seen", []look{
			{0, down, nil, peerwatch.StatusUnreachable, "not seen since the watch began"},
			{31 * time.Second, down, nil, peerwatch.StatusDown, "for 31s"},
		}},
		{"no controller", []look{
			{0, nil, noLease, peerwatch.StatusOK, "controller none"},
			{30 * time.Second, nil, noLease, peerwatch.StatusOK, ""},
			{31 * time.Second, nil, noLease, peerwatch.StatusStuck, "no replica has held the controller lease for 31s"},
			{32 * time.Second, nil, healthy, peerwatch.StatusOK, ""},
			{63 * time.Second, nil, noLease, peerwatch.StatusOK, ""}, // counted afresh
		}},
		{"pipeline behind", []look{
			{0, nil, behindOK, peerwatch.StatusOK, "pipeline 40 behind"},
			{time.Second, nil, lagging, peerwatch.StatusStuck, "40 events behind, the oldest received 2m0s ago (threshold 1m0s)"},
		}},
		{"no results", []look{{0, nil, starved, peerwatch.StatusStuck, "no agent result for 6m0s"}}},
		{"no checks, no results due", []look{{0, nil, noChecks, peerwatch.StatusOK, ""}}},
		{"store fails", []look{
			{0, nil, healthy, peerwatch.StatusOK, ""},
			{31 * time.Second, nil, &unyov1.ClusterHealth{Error: "read the pipeline cursor: disk I/O error"}, peerwatch.StatusDown, "cannot read its own state: read the pipeline cursor"},
		}},
		{"older cluster", []look{{0, nil, nil, peerwatch.StatusOK, "reports no health"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := peerwatch.NewWatch("b", t0)
			if o := w.Observation("a"); o.GetStatus() != peerwatch.StatusUnknown || o.GetLastSeen() != nil {
				t.Fatalf("before a look: %v", o)
			}
			for i, l := range tc.looks {
				v := w.Observe(peerwatch.Look{At: t0.Add(l.after), Err: l.err, Health: l.health}, th)
				if v.Status != l.status || v.CheckStatus != want[l.status] || !strings.Contains(v.Message, l.msg) {
					t.Fatalf("look %d (+%s): %+v, want %s with %q", i, l.after, v, l.status, l.msg)
				}
				o := w.Observation("a")
				// The event raised keeps the observation.
				e := &unyov1.Event{Node: "b", Level: o.GetLevel(), Output: v.Message, StartedAt: o.GetCheckedAt(), Labels: w.Labels("a")}
				if back := peerwatch.ObservationOf(e); !proto.Equal(back, o) {
					t.Fatalf("look %d: observation from the event %v, want %v", i, back, o)
				}
				if o.GetStatus() != v.Status || o.GetWatcher() != "a" || o.GetCluster() != "b" || !o.GetCheckedAt().AsTime().Equal(t0.Add(l.after)) {
					t.Fatalf("look %d: observation %v", i, o)
				}
				if answered := v.Status == peerwatch.StatusOK || v.Status == peerwatch.StatusStuck; answered && !o.GetLastSeen().AsTime().Equal(t0.Add(l.after)) {
					t.Fatalf("look %d: last seen %v, want the look's time", i, o.GetLastSeen())
				}
			}
		})
	}
}

func TestThresholdDefaults(t *testing.T) {
	if got := (peerwatch.Thresholds{Lag: time.Second}).WithDefaults(); got.Unreachable != 30*time.Second || got.Lag != time.Second || got.Ingest != 10*time.Minute {
		t.Errorf("WithDefaults = %+v", got)
	}
}
