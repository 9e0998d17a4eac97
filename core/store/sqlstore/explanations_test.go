package sqlstore

import (
	"database/sql"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// explanationsMigration moved explanations out of the event rows.
const explanationsMigration = 13

// TestUpgradeKeepsExplanations builds a database as unyo left it before
// explanations had a table of their own (in the events and latest_events
// rows), opens it with this unyo, and reads every explanation back: of
// history, of latest entries, and of a latest entry whose history was
// pruned; then the pipeline and pruning go on from there.
func TestUpgradeKeepsExplanations(t *testing.T) {
	t.Parallel()
	upgradeFrom(t, explanationsMigration-1, func(t *testing.T, db *sql.DB) {
		ctx := t.Context()
		ev := func(id, check string, level unyov1.Level) []byte {
			return mustMarshal(t, &unyov1.Event{Id: id, Node: "web1", Check: check, Level: level})
		}
		x := func(outcome string) []byte { return mustMarshal(t, &unyov1.Explanation{Outcome: outcome}) }
		for _, q := range []struct {
			sql  string
			args []any
		}{
			// disk: two results, both processed; the second is latest.
			{"INSERT INTO events (id, node, check_name, level, started_at, body, seq, explanation, silenced_by) VALUES ($1, 'web1', 'disk', 1, 1, $2, 1, $3, 'rule:quiet')", []any{"e1", ev("e1", "disk", 1), x("silenced")}},
			{"INSERT INTO events (id, node, check_name, level, started_at, body, seq, explanation, silenced_by) VALUES ($1, 'web1', 'disk', 2, 2, $2, 2, $3, '')", []any{"e2", ev("e2", "disk", 2), x("processed")}},
			{"INSERT INTO latest_events (node, check_name, id, level, started_at, body, explanation, silenced_by) VALUES ('web1', 'disk', $1, 2, 2, $2, $3, '')", []any{"e2", ev("e2", "disk", 2), x("processed")}},
			// load: the history is pruned, the latest entry is left.
			{"INSERT INTO latest_events (node, check_name, id, level, started_at, body, explanation, silenced_by) VALUES ('web1', 'load', $1, 0, 1, $2, $3, 'maintenance:patch')", []any{"e0", ev("e0", "load", 0), x("silenced")}},
			// cpu: stored before the pipeline existed (seq 0), never explained.
			{"INSERT INTO events (id, node, check_name, level, started_at, body) VALUES ($1, 'web1', 'cpu', 0, 1, $2)", []any{"old", ev("old", "cpu", 0)}},
			{"UPDATE counters SET value = 2 WHERE name IN ('event_seq', 'pipeline_cursor')", nil},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
	}, func(t *testing.T, s *Store) {
		ctx := t.Context()
		want := map[string]struct{ outcome, silencedBy string }{
			"e1": {"silenced", "rule:quiet"}, "e2": {"processed", ""}, "e0": {"silenced", "maintenance:patch"}, "old": {"", ""},
		}
		check := func(when string) {
			t.Helper()
			for id, w := range want {
				e, err := s.GetEvent(ctx, id)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if e.GetExplanation().GetOutcome() != w.outcome || e.GetSilencedBy() != w.silencedBy {
					t.Errorf("%s: event %s explained %q, silenced by %q; want %q, %q", when, id, e.GetExplanation().GetOutcome(), e.GetSilencedBy(), w.outcome, w.silencedBy)
				}
			}
			latest, err := s.ListEvents(ctx, store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range latest {
				if w := want[e.GetId()]; e.GetExplanation().GetOutcome() != w.outcome || e.GetSilencedBy() != w.silencedBy {
					t.Errorf("%s: latest %s/%s is %s explained %q, silenced by %q", when, e.GetNode(), e.GetCheck(), e.GetId(), e.GetExplanation().GetOutcome(), e.GetSilencedBy())
				}
			}
		}
		check("after the upgrade")

		// New events take seqs after the old ones; the pipeline
		// explains them, and an aggregate's flush adds to an old one.
		if _, err := s.AppendEvents(ctx, []*unyov1.Event{{Id: "e3", Node: "web1", Check: "disk", Level: 0, StartedAt: timestamppb.New(time.Unix(0, 3))}}); err != nil {
			t.Fatal(err)
		}
		next, err := s.NextEvents(ctx, 2, 10)
		if err != nil || len(next) != 1 || next[0].Event.GetId() != "e3" || next[0].Seq != 3 {
			t.Fatalf("events after the old cursor: %v, %v", next, err)
		}
		d := store.PipelineCommit{ExpectCursor: 2, Cursor: 3}
		d.Explained = []store.Explained{
			{ID: "e3", Seq: 3, Explanation: &unyov1.Explanation{Outcome: "processed"}},
			{ID: "e0", Append: true, Explanation: &unyov1.Explanation{Outcome: "grouped"}},
		}
		if err := s.CommitPipeline(ctx, &d); err != nil {
			t.Fatal(err)
		}
		want["e3"] = struct{ outcome, silencedBy string }{"processed", ""}
		want["e0"] = struct{ outcome, silencedBy string }{"grouped", ""}
		check("after the pipeline")

		// Pruning keeps the latest entries' explanations, old and new;
		// e3 replaced e2 as latest.
		if _, _, err := s.PruneEvents(ctx, 0, 0); err != nil {
			t.Fatal(err)
		}
		delete(want, "e1")
		delete(want, "e2")
		delete(want, "old")
		check("after pruning")
		var n int
		if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM explanations").Scan(&n); err != nil || n != 2 {
			t.Errorf("after pruning %d explanations are stored (%v), want the 2 of the latest entries", n, err)
		}
	})
}
