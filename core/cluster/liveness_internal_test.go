package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
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
			l.judge(ctx) // Ready, then silent for an hour: Stale
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
