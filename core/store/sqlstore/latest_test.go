package sqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// TestLatestBodyWrittenOnce: a result's body is written into its history
// row only; the latest row refers to it, and takes a copy only when that
// history row is pruned, so the latest state reads the same throughout.
func TestLatestBodyWrittenOnce(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		ctx := t.Context()
		s, err := open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ev := func(id string, at int64, level unyov1.Level) *unyov1.Event {
			return &unyov1.Event{Id: id, Node: "web1", Check: "disk", Level: level, Output: "output of " + id,
				StartedAt: timestamppb.New(time.Unix(at, 0))}
		}
		events := []*unyov1.Event{ev("e1", 1, unyov1.Level_LEVEL_SUCCESS), ev("e2", 2, unyov1.Level_LEVEL_CRITICAL)}
		if _, err := s.AppendEvents(ctx, events); err != nil {
			t.Fatal(err)
		}
		// latestBody is the body column of the latest row: NULL while the
		// history row has it.
		latestBody := func() []byte {
			t.Helper()
			var b []byte
			if err := s.w.QueryRowContext(ctx, "SELECT body FROM latest_events WHERE node = 'web1' AND check_name = 'disk'").Scan(&b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		wantLatest := func(when string, want *unyov1.Event) {
			t.Helper()
			got, err := s.ListEvents(ctx, store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%s: %d latest events, want 1", when, len(got))
			}
			got[0].Explanation, got[0].SilencedBy = nil, ""
			if !proto.Equal(got[0], want) {
				t.Errorf("%s: latest = %v, want %v", when, got[0], want)
			}
		}
		if b := latestBody(); b != nil {
			t.Errorf("the latest row holds a copy of the body (%d bytes)", len(b))
		}
		wantLatest("after the append", events[1])

		st, err := s.LoadPipeline(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next, err := s.NextEvents(ctx, st.Cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CommitPipeline(ctx, &store.PipelineCommit{ExpectCursor: st.Cursor, Cursor: next[len(next)-1].Seq}); err != nil {
			t.Fatal(err)
		}
		if removed, _, err := s.PruneEvents(ctx, 0, 0); err != nil || removed != 2 {
			t.Fatalf("prune to 0: removed %d, %v; want 2", removed, err)
		}
		if b := latestBody(); b == nil {
			t.Error("pruning the latest event's history row left the latest row without a body")
		}
		wantLatest("after pruning its history", events[1])
		got, err := s.GetEvent(ctx, "e2")
		if err != nil {
			t.Fatal(err)
		}
		if got.Explanation = nil; !proto.Equal(got, events[1]) {
			t.Errorf("GetEvent after pruning = %v, want %v", got, events[1])
		}

		// A newer result takes over: its body is in its history row again.
		e3 := ev("e3", 3, unyov1.Level_LEVEL_WARNING)
		if _, err := s.AppendEvents(ctx, []*unyov1.Event{e3}); err != nil {
			t.Fatal(err)
		}
		if b := latestBody(); b != nil {
			t.Errorf("a newer result left the pruned one's body (%d bytes) in the latest row", len(b))
		}
		wantLatest("after a newer result", e3)
	})
}

// TestUpgradeLatestBodyOnce opens a database as unyo left it before
// migration 0022 (every latest row with a copy of its body): a latest row
// whose history row is there drops its copy, one whose history was pruned
// keeps it, and both read back whole.
func TestUpgradeLatestBodyOnce(t *testing.T) {
	t.Parallel()
	ev := func(id, check string) *unyov1.Event {
		return &unyov1.Event{Id: id, Node: "web1", Check: check, Output: "output of " + id, StartedAt: timestamppb.New(time.Unix(1, 0))}
	}
	kept, pruned := ev("kept", "disk"), ev("pruned", "load")
	upgradeFrom(t, 21, func(t *testing.T, db *sql.DB) {
		ctx := t.Context()
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"INSERT INTO events (id, node, check_name, level, started_at, body, seq) VALUES ('kept', 'web1', 'disk', 0, 1000000000, $1, 1)", []any{mustMarshal(t, kept)}},
			{"INSERT INTO latest_events (node, check_name, id, level, started_at, body, seq) VALUES ('web1', 'disk', 'kept', 0, 1000000000, $1, 1)", []any{mustMarshal(t, kept)}},
			{"INSERT INTO latest_events (node, check_name, id, level, started_at, body, seq) VALUES ('web1', 'load', 'pruned', 0, 1000000000, $1, -1)", []any{mustMarshal(t, pruned)}},
			{"UPDATE counters SET value = 1 WHERE name IN ('event_seq', 'pipeline_cursor')", nil},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
	}, func(t *testing.T, s *Store) {
		ctx := t.Context()
		for check, wantCopy := range map[string]bool{"disk": false, "load": true} {
			var b []byte
			if err := s.w.QueryRowContext(ctx, "SELECT body FROM latest_events WHERE check_name = $1", check).Scan(&b); err != nil {
				t.Fatal(err)
			}
			if (b != nil) != wantCopy {
				t.Errorf("latest row of %s: holds a body %v, want %v", check, b != nil, wantCopy)
			}
		}
		latest, err := s.ListEvents(ctx, store.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(latest) != 2 || !proto.Equal(latest[0], kept) || !proto.Equal(latest[1], pruned) {
			t.Errorf("latest after the upgrade = %v, want %v and %v", latest, kept, pruned)
		}
	})
}
