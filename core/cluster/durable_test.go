package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
	"github.com/unyo-ops/unyo/core/wal"
)

// TestTelemetryWALReplay: what a cluster acknowledged is in its WAL; a
// cluster started on that WAL with stores that lost it (a kill) writes it
// back, and replaying again (another kill before the WAL was trimmed)
// doubles nothing. A resent log request is then a duplicate.
func TestTelemetryWALReplay(t *testing.T) {
	ctx := context.Background()
	f := newWALFixture(t)
	st, dir, openWAL, openLogs := f.st, f.dir, f.openWAL, f.openLogs

	// The first run takes samples and lines; its stores are then thrown
	// away, as a kill throws away their memory buffers.
	w := openWAL()
	m1, err := vmembed.Open(vmembed.Options{DataDir: filepath.Join(dir, "metrics1")})
	if err != nil {
		t.Fatal(err)
	}
	l1 := openLogs("logs1")
	c := startCluster(t, st, cluster.Options{Metrics: m1, Logs: l1, TelemetryWAL: w})
	if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}})); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	metrics := &unyov1.WriteMetricsRequest{Node: "web1"}
	for i := range 100 {
		metrics.Samples = append(metrics.Samples, &unyov1.Sample{Name: "replayed", TimeMs: base.Add(time.Duration(i) * time.Second).UnixMilli(), Value: float64(i)})
	}
	if _, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(metrics)); err != nil {
		t.Fatal(err)
	}
	logs := &unyov1.WriteLogsRequest{Node: "web1"}
	for i := range 50 {
		logs.Entries = append(logs.Entries, &unyov1.LogEntry{FileId: "f", Sequence: uint64(i + 1), Offset: int64(i+1) * 10, App: "app", Message: fmt.Sprintf("line %d", i%25)}) // each text twice
	}
	if _, err := c.Logs.WriteLogs(ctx, connect.NewRequest(logs)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	l1.Close()

	count := func(l logstore.Store) int {
		got, err := l.Query(ctx, logstore.Query{App: "app", Limit: logstore.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	// Replayed into empty stores, then again into the same stores.
	m2, err := vmembed.Open(vmembed.Options{DataDir: filepath.Join(dir, "metrics2")})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2 := openLogs("logs2")
	defer l2.Close()
	for run := 1; run <= 2; run++ {
		f.restart(cluster.Options{Metrics: m2, Logs: l2})
		if n := count(l2); n != 50 {
			t.Fatalf("replay %d: %d lines in the log store, want 50", run, n)
		}
		if err := m2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		at := base.Add(100 * time.Second)
		series, err := m2.Query(ctx, `count_over_time(replayed[2h])`, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 1 || series[0].Points[0].V != 100 {
			t.Fatalf("replay %d: samples %v, want a count of 100", run, series)
		}
	}

	// The replayed lines' positions are recorded: the agent, which had no
	// answer, resends them and they are duplicates.
	w = openWAL()
	defer w.Close()
	c2 := startCluster(t, st, cluster.Options{Metrics: m2, Logs: l2, TelemetryWAL: w})
	resp, err := c2.Logs.WriteLogs(ctx, connect.NewRequest(logs))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetDuplicates() != 50 {
		t.Errorf("resent lines: %d duplicates, want 50", resp.Msg.GetDuplicates())
	}
}

// walFixture is a state store and the makings of a cluster's WAL and log
// store in one directory, reopened as a restarted cluster would.
type walFixture struct {
	t     *testing.T
	dir   string
	st    *sqlstore.Store
	quiet *slog.Logger
}

func newWALFixture(t *testing.T) *walFixture {
	dir := t.TempDir()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &walFixture{t: t, dir: dir, st: st, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func (f *walFixture) openWAL() *wal.WAL {
	w, err := wal.Open(wal.Options{Dir: filepath.Join(f.dir, "wal"), Logger: f.quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

func (f *walFixture) openLogs(name string) *vlembed.Store {
	l, err := vlembed.Open(vlembed.Options{Path: filepath.Join(f.dir, name)})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// restart is a cluster started on the fixture's WAL after a kill: it
// replays the WAL into logs.
func (f *walFixture) restart(opts cluster.Options) {
	f.t.Helper()
	w := f.openWAL()
	defer w.Close()
	opts.Name, opts.Replica, opts.Logger, opts.TelemetryWAL = "c1", "r1", f.quiet, w
	if err := cluster.New(f.st, opts).ReplayTelemetry(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// TestReplayHistoryCommittedOnly: the event history of a pipeline batch is
// in the WAL before its commit; replay writes it only if the commit
// happened, marks the other batches so that a later replay (the cursor has
// moved past them since) does not take them for committed, and writes
// nothing twice.
func TestReplayHistoryCommittedOnly(t *testing.T) {
	ctx := context.Background()
	f := newWALFixture(t)
	logs := f.openLogs("logs")
	defer logs.Close()
	commit := func(expect, cursor int64) {
		if err := f.st.CommitPipeline(ctx, &store.PipelineCommit{ExpectCursor: expect, Cursor: cursor}); err != nil {
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

	// Batch (0,3] was committed, batch (3,7] was logged but the kill came
	// before its commit.
	w := f.openWAL()
	c := cluster.New(f.st, cluster.Options{Name: "c1", Replica: "r1", Logger: f.quiet, Logs: logs, TelemetryWAL: w})
	if !cluster.LogHistory(c, ctx, 0, 3, "committed") || !cluster.LogHistory(c, ctx, 3, 7, "uncommitted") {
		t.Fatal("the history was not logged")
	}
	commit(0, 3)
	w.Close()

	f.restart(cluster.Options{Logs: logs})
	if got := history(); got["committed"] != 1 || got["uncommitted"] != 0 {
		t.Fatalf("after the first replay: %v, want committed once and uncommitted not", got)
	}
	// The pipeline processes events 4..9 again and commits them; killed
	// again before the WAL was trimmed, the cluster replays once more.
	commit(3, 9)
	f.restart(cluster.Options{Logs: logs})
	if got := history(); got["committed"] != 1 || got["uncommitted"] != 0 {
		t.Fatalf("after the second replay: %v, want committed once and uncommitted not", got)
	}
}

// TestTelemetryWALFull: a full WAL refuses telemetry with a retryable code
// (the agent keeps it in its spool) and says why.
func TestTelemetryWALFull(t *testing.T) {
	w, err := wal.Open(wal.Options{Dir: t.TempDir(), MaxBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := vlembed.Open(vlembed.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := startTelemetryCluster(t, cluster.Options{Logs: l, TelemetryWAL: w})
	req := &unyov1.WriteLogsRequest{Node: "web1", Entries: []*unyov1.LogEntry{{App: "a", Message: strings.Repeat("x", 300), Time: timestamppb.Now()}}}
	_, err = c.Logs.WriteLogs(t.Context(), connect.NewRequest(req))
	wantCode(t, "WriteLogs into a full WAL", err, connect.CodeResourceExhausted)
	if !strings.Contains(err.Error(), "write-ahead log full") || !strings.Contains(err.Error(), "retry") {
		t.Errorf("error %q does not say the WAL is full and to retry", err)
	}
}

// TestReplayLinesOwed: replay writes a line as many times as one record
// holds it, less what the store holds: the same line in two records is a
// request sent again, not a second line.
func TestReplayLinesOwed(t *testing.T) {
	ctx := context.Background()
	f := newWALFixture(t)
	logs := f.openLogs("logs")
	defer logs.Close()
	at := time.Now().Truncate(time.Millisecond)
	line := func(msg string) logstore.Entry {
		return logstore.Entry{Time: at, Host: "web1", App: "app", Level: "info", Message: msg}
	}
	if err := logs.Write(ctx, []logstore.Entry{line("b")}); err != nil {
		t.Fatal(err)
	}
	records := [][]logstore.Entry{
		{line("a"), line("a"), line("b")},
		{line("a"), line("b"), line("c")}, // resent, with one line more
	}
	n, err := cluster.ReplayLines(ctx, logs, records)
	if err != nil {
		t.Fatal(err)
	}
	got, err := logs.Query(ctx, logstore.Query{App: "app"})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range got {
		count[e.Message]++
	}
	if want := map[string]int{"a": 2, "b": 1, "c": 1}; n != 3 || !maps.Equal(count, want) {
		t.Fatalf("wrote %d lines, the store holds %v; want 3 written and %v", n, count, want)
	}
}

// failingLogs is a log store that is down while fail is set.
type failingLogs struct {
	*vlembed.Store
	fail atomic.Bool
}

func (f *failingLogs) Write(ctx context.Context, entries []logstore.Entry) error {
	if f.fail.Load() {
		return errors.New("log store down")
	}
	return f.Store.Write(ctx, entries)
}

func (f *failingLogs) Query(ctx context.Context, q logstore.Query) ([]logstore.Entry, error) {
	if f.fail.Load() {
		return nil, errors.New("log store down")
	}
	return f.Store.Query(ctx, q)
}

// TestReplayWhileStoreDown: a cluster whose log store is down at start
// serves anyway and replays the WAL into the store once it is back.
func TestReplayWhileStoreDown(t *testing.T) {
	ctx := context.Background()
	f := newWALFixture(t)
	w := f.openWAL()
	l1 := f.openLogs("logs1")
	c := startCluster(t, f.st, cluster.Options{Logs: l1, TelemetryWAL: w})
	if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}})); err != nil {
		t.Fatal(err)
	}
	req := &unyov1.WriteLogsRequest{Node: "web1"}
	for i := range 10 {
		req.Entries = append(req.Entries, &unyov1.LogEntry{FileId: "f", Sequence: uint64(i + 1), App: "app", Message: fmt.Sprintf("line %d", i)})
	}
	if _, err := c.Logs.WriteLogs(ctx, connect.NewRequest(req)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	l1.Close()

	l2 := &failingLogs{Store: f.openLogs("logs2")}
	defer l2.Close()
	l2.fail.Store(true)
	w2 := f.openWAL()
	defer w2.Close()
	c2 := startCluster(t, f.st, cluster.Options{Logs: l2, TelemetryWAL: w2})
	if _, err := c2.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{})); err != nil {
		t.Fatalf("the cluster does not serve while its log store is down: %v", err)
	}
	l2.fail.Store(false)
	testutil.Eventually(t, 30*time.Second, "the replay once the store is back", func() error {
		got, err := l2.Query(ctx, logstore.Query{App: "app"})
		if err != nil {
			return err
		}
		if len(got) != 10 {
			return fmt.Errorf("%d lines in the store, want 10", len(got))
		}
		return nil
	})
}
