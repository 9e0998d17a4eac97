package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/wal"
)

// TestReplayHistoryCommittedOnly: the event history of a pipeline batch is
// in the WAL before its commit; replay writes it only if the commit
// happened, marks the other batches so that a later replay (the cursor has
// moved past them since) does not take them for committed, and writes
// nothing twice.
func TestReplayHistoryCommittedOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs, err := vlembed.Open(vlembed.Options{Path: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	openWAL := func() *wal.WAL {
		w, err := wal.Open(wal.Options{Dir: filepath.Join(dir, "wal"), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	line := func(id string) logstore.Entry {
		return prepareLines([]logstore.Entry{logstore.EventRecord{Time: time.Now(), Host: "web1", EventID: id, Kind: "check", Outcome: "stored", Message: id}.Entry()})[0]
	}
	commit := func(expect, cursor int64) {
		if err := st.CommitPipeline(ctx, &store.PipelineCommit{ExpectCursor: expect, Cursor: cursor}); err != nil {
			t.Fatal(err)
		}
	}
	history := func() map[string]int {
		got, err := logs.Query(ctx, logstore.Query{App: logstore.EventsApp, Limit: logstore.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, e := range got {
			ids[e.Fields[logstore.FieldEventID]]++
		}
		return ids
	}
	replay := func() {
		w := openWAL()
		defer w.Close()
		c := New(st, Options{Name: "c1", Replica: "r1", Logger: quiet, Logs: logs, TelemetryWAL: w})
		if err := c.ReplayTelemetry(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Batch (0,3] was committed, batch (3,7] was logged but the kill came
	// before its commit.
	w := openWAL()
	c := New(st, Options{Name: "c1", Replica: "r1", Logger: quiet, Logs: logs, TelemetryWAL: w})
	if !c.logHistory(ctx, 0, 3, []logstore.Entry{line("committed")}) || !c.logHistory(ctx, 3, 7, []logstore.Entry{line("uncommitted")}) {
		t.Fatal("logHistory did not log")
	}
	commit(0, 3)
	w.Close()

	replay()
	if got := history(); got["committed"] != 1 || got["uncommitted"] != 0 {
		t.Fatalf("after the first replay: %v, want committed once and uncommitted not", got)
	}
	// The pipeline processes events 4..9 again and commits them; killed
	// again before the WAL was trimmed, the cluster replays once more.
	commit(3, 9)
	replay()
	if got := history(); got["committed"] != 1 || got["uncommitted"] != 0 {
		t.Fatalf("after the second replay: %v, want committed once and uncommitted not", got)
	}
}
