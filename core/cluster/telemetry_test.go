package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
)

// startTelemetryCluster starts a cluster on SQLite with the given stores and
// registers node web1.
func startTelemetryCluster(t testing.TB, opts cluster.Options) *client.Clients {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := startCluster(t, st, opts)
	if _, err := c.Agent.Register(context.Background(), connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}})); err != nil {
		t.Fatal(err)
	}
	return c
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("%s: got %v, want code %v", what, err, code)
	}
}

func TestTelemetryWithoutStores(t *testing.T) {
	c := startTelemetryCluster(t, cluster.Options{})
	ctx := t.Context()
	_, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(&unyov1.WriteMetricsRequest{Node: "web1"}))
	wantCode(t, "WriteMetrics", err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "metrics.store") {
		t.Errorf("error %q does not name the setting", err)
	}
	_, err = c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: "up"}))
	wantCode(t, "Query", err, connect.CodeFailedPrecondition)
	_, err = c.Logs.WriteLogs(ctx, connect.NewRequest(&unyov1.WriteLogsRequest{Node: "web1"}))
	wantCode(t, "WriteLogs", err, connect.CodeFailedPrecondition)
	_, err = c.Logs.Query(ctx, connect.NewRequest(&unyov1.QueryLogsRequest{}))
	wantCode(t, "Logs.Query", err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "logs.store") {
		t.Errorf("error %q does not name the setting", err)
	}
}

// TestTelemetryServices runs the metrics and logs services on the embedded
// stores: one test, since only one embedded VictoriaMetrics fits a process.
func TestTelemetryServices(t *testing.T) {
	db, err := vmembed.Open(vmembed.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs, err := vlembed.Open(vlembed.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	c := startTelemetryCluster(t, cluster.Options{Metrics: db, Logs: logs})

	t.Run("Metrics", func(t *testing.T) {
		ctx := t.Context()
		now := time.Now().Truncate(time.Second)
		var samples []*unyov1.Sample
		var bl metricbatch.Builder
		for i := range 5 {
			at := now.Add(time.Duration(i-4) * 10 * time.Second).UnixMilli()
			bl.Add("node_load1", nil, at, float64(i))
			// An agent cannot claim another node: the cluster sets the label.
			bl.Add("unyo_check_perfdata", []tsdb.Label{{Name: "check", Value: "disk"}, {Name: "label", Value: "/"}, {Name: "uom", Value: "bytes"}, {Name: "node", Value: "other"}}, at, 1e9)
			// The form of agents before MetricBatch is still accepted.
			samples = append(samples, &unyov1.Sample{Name: "legacy_load1", Labels: map[string]string{"node": "other"}, TimeMs: at, Value: float64(i)})
		}
		req := &unyov1.WriteMetricsRequest{Node: "web1", Samples: samples, Batches: []*unyov1.MetricBatch{bl.Take()}}
		for range 2 { // a resend is harmless: the TSDB deduplicates identical samples
			resp, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			if n := resp.Msg.GetAccepted(); n != 15 {
				t.Errorf("accepted %d samples, want 15", n)
			}
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		inst, err := c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: "node_load1", Time: timestamppb.New(now)}))
		if err != nil {
			t.Fatal(err)
		}
		if s := inst.Msg.GetSeries(); len(s) != 1 || s[0].GetLabels()["node"] != "web1" || s[0].GetPoints()[0].GetValue() != 4 {
			t.Fatalf("instant query = %v, want node_load1{node=web1} 4", s)
		}
		rng, err := c.Metrics.QueryRange(ctx, connect.NewRequest(&unyov1.QueryRangeRequest{
			Expr: `unyo_check_perfdata{check="disk"}`, Start: timestamppb.New(now.Add(-40 * time.Second)), End: timestamppb.New(now), Step: durationpb.New(10 * time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		if s := rng.Msg.GetSeries(); len(s) != 1 || len(s[0].GetPoints()) != 5 || s[0].GetLabels()["node"] != "web1" {
			t.Fatalf("range query = %v, want one series of 5 points on web1", s)
		}
		ser, err := c.Metrics.Series(ctx, connect.NewRequest(&unyov1.SeriesRequest{Match: `{node="web1"}`}))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ser.Msg.GetSeries()); n != 3 {
			t.Errorf("series = %d, want 3", n)
		}
		inst, err = c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: "legacy_load1", Time: timestamppb.New(now)}))
		if err != nil {
			t.Fatal(err)
		}
		if s := inst.Msg.GetSeries(); len(s) != 1 || s[0].GetLabels()["node"] != "web1" || s[0].GetPoints()[0].GetValue() != 4 {
			t.Fatalf("instant query = %v, want legacy_load1{node=web1} 4", s)
		}
		_, err = c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: "sum(("}))
		wantCode(t, "bad expression", err, connect.CodeInvalidArgument)
		_, err = c.Metrics.WriteMetrics(ctx, connect.NewRequest(&unyov1.WriteMetricsRequest{Node: "ghost"}))
		wantCode(t, "unregistered node", err, connect.CodeNotFound)
		bl.Add("bad name!", nil, now.UnixMilli(), 1)
		for _, tc := range []struct {
			what, msg string
			req       *unyov1.WriteMetricsRequest
		}{
			{"invalid legacy sample", `"bad name!" must match`, &unyov1.WriteMetricsRequest{Node: "web1", Samples: []*unyov1.Sample{{Name: "bad name!", TimeMs: now.UnixMilli()}}}},
			{"invalid sample", `bad name!{instance="web1",job="unyo",node="web1"}`, &unyov1.WriteMetricsRequest{Node: "web1", Batches: []*unyov1.MetricBatch{bl.Take()}}},
			{"malformed batch", "metric batch 1 of 1 from node \"web1\": malformed metric batch", &unyov1.WriteMetricsRequest{Node: "web1", Batches: []*unyov1.MetricBatch{{Series: []uint32{3, 0}, PointCounts: []uint32{1}, TimeMsDeltas: []int64{1}, Values: []float64{1}}}}},
			{"too many samples", "100001 in one request, at most 100000", &unyov1.WriteMetricsRequest{Node: "web1", Batches: []*unyov1.MetricBatch{{Values: make([]float64, 100_001)}}}},
		} {
			_, err = c.Metrics.WriteMetrics(ctx, connect.NewRequest(tc.req))
			wantCode(t, tc.what, err, connect.CodeInvalidArgument)
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: error %q does not say %q", tc.what, err, tc.msg)
			}
		}
	})

	t.Run("MetricChecks", func(t *testing.T) { testMetricChecks(t, db) })

	t.Run("Logs", func(t *testing.T) {
		ctx := t.Context()
		base := time.Now().Add(-time.Minute).Truncate(time.Second)
		seq := uint64(1000)
		line := func(file string, off int64, level, msg string) *unyov1.LogEntry {
			seq++
			return &unyov1.LogEntry{Time: timestamppb.New(base.Add(time.Duration(seq) * time.Millisecond)), App: "shop", Level: level,
				Message: msg, FileId: file, Offset: off, Sequence: seq, TraceId: "t-" + file, Host: "spoofed"}
		}
		write := func(entries ...*unyov1.LogEntry) *unyov1.WriteLogsResponse {
			t.Helper()
			resp, err := c.Logs.WriteLogs(ctx, connect.NewRequest(&unyov1.WriteLogsRequest{Node: "web1", Entries: entries}))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Msg
		}
		first := []*unyov1.LogEntry{line("1:1", 0, "info", "a0"), line("1:1", 10, "error", "a1"), line("1:1", 20, "info", "a2")}
		if r := write(first...); r.GetAccepted() != 3 || r.GetDuplicates() != 0 {
			t.Fatalf("first write = %v", r)
		}
		// A resend after a lost answer: same sequences.
		if r := write(first...); r.GetAccepted() != 0 || r.GetDuplicates() != 3 {
			t.Fatalf("resend = %v, want 3 duplicates", r)
		}
		// A replay after an agent crash: new sequences, old offsets; then new lines.
		if r := write(line("1:1", 10, "error", "a1"), line("1:1", 20, "info", "a2"), line("1:1", 30, "warn", "a3")); r.GetAccepted() != 1 || r.GetDuplicates() != 2 {
			t.Fatalf("replay = %v, want 1 accepted, 2 duplicates", r)
		}
		// Truncation: the file is read again from 0; and a second file.
		if r := write(line("1:1", 0, "info", "b0"), line("1:1", 5, "error", "b1"), line("2:7", 0, "info", "c0")); r.GetAccepted() != 3 {
			t.Fatalf("after truncation = %v, want 3 accepted", r)
		}
		q, err := c.Logs.Query(ctx, connect.NewRequest(&unyov1.QueryLogsRequest{Filter: &unyov1.LogFilter{App: "shop"}}))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, e := range q.Msg.GetEntries() {
			msgs = append(msgs, e.GetMessage())
			if e.GetHost() != "web1" || e.GetCluster() != "c1" {
				t.Errorf("entry %q: host %q cluster %q, want web1 and c1", e.GetMessage(), e.GetHost(), e.GetCluster())
			}
		}
		sort.Strings(msgs)
		if got := strings.Join(msgs, " "); got != "a0 a1 a2 a3 b0 b1 c0" {
			t.Errorf("stored lines = %s, want each once: a0 a1 a2 a3 b0 b1 c0", got)
		}
		st, err := c.Logs.Stats(ctx, connect.NewRequest(&unyov1.LogStatsRequest{By: "level", Interval: durationpb.New(24 * time.Hour)}))
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int64{}
		for _, b := range st.Msg.GetBuckets() {
			counts[b.GetKey()] += b.GetCount()
		}
		if fmt.Sprint(counts) != "map[error:2 info:4 warn:1]" {
			t.Errorf("stats by level = %v", counts)
		}
		tr, err := c.Logs.Trace(ctx, connect.NewRequest(&unyov1.TraceLogsRequest{TraceId: "t-2:7"}))
		if err != nil {
			t.Fatal(err)
		}
		if e := tr.Msg.GetEntries(); len(e) != 1 || e[0].GetMessage() != "c0" {
			t.Errorf("trace = %v, want c0", e)
		}
		_, err = c.Logs.Stats(ctx, connect.NewRequest(&unyov1.LogStatsRequest{By: "colour", Interval: durationpb.New(time.Hour)}))
		wantCode(t, "stats by colour", err, connect.CodeInvalidArgument)
		_, err = c.Logs.Trace(ctx, connect.NewRequest(&unyov1.TraceLogsRequest{}))
		wantCode(t, "empty trace id", err, connect.CodeInvalidArgument)
	})
}

// testMetricChecks drives a metric check through ok, pending, warning,
// critical, ok and no data on the embedded TSDB, evaluating at chosen
// instants on a cluster of its own (its controller does not run, so the
// test's evaluations are the only ones).
func testMetricChecks(t *testing.T, db *vmembed.Store) {
	ctx := t.Context()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl := cluster.New(st, cluster.Options{Name: "c1", Replica: "r1", Metrics: db, Logger: quiet})
	if _, err := st.PutCheck(ctx, &unyov1.Check{Name: "load", Spec: &unyov1.CheckSpec{
		Interval: "10s",
		Metric:   &unyov1.MetricCheck{Expr: "mc_load1", Warning: "5", Critical: "10", For: "15s"},
	}}); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-30 * time.Minute).Truncate(time.Second)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	var samples []tsdb.Sample
	for i, v := range []float64{1, 7, 7, 7, 12, 12, 12, 2} {
		samples = append(samples, tsdb.Sample{Name: "mc_load1", Labels: map[string]string{"node": "web1"}, Timestamp: at(time.Duration(i) * 10 * time.Second), Value: v})
	}
	// After a gap longer than any lookback, data again.
	samples = append(samples, tsdb.Sample{Name: "mc_load1", Labels: map[string]string{"node": "web1"}, Timestamp: at(21 * time.Minute), Value: 1})
	if err := db.Write(ctx, samples); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tick := cluster.NewMetricTicker(cl)
	type want struct {
		node   string
		level  unyov1.Level
		output string
	}
	ok, warn, crit := unyov1.Level_LEVEL_SUCCESS, unyov1.Level_LEVEL_WARNING, unyov1.Level_LEVEL_CRITICAL
	for _, step := range []struct {
		at   time.Duration
		want []want
	}{
		{0, []want{{"web1", ok, "mc_load1 = 1"}}},
		{10 * time.Second, []want{{"web1", ok, "mc_load1 = 7 (warning above 5); pending for 0s of 15s"}}},
		{20 * time.Second, []want{{"web1", ok, "mc_load1 = 7 (warning above 5); pending for 10s of 15s"}}},
		{30 * time.Second, []want{{"web1", warn, "mc_load1 = 7 (warning above 5)"}}},
		{40 * time.Second, []want{{"web1", warn, "mc_load1 = 12 (critical above 10); pending for 0s of 15s"}}},
		{50 * time.Second, []want{{"web1", warn, "mc_load1 = 12 (critical above 10); pending for 10s of 15s"}}},
		{60 * time.Second, []want{{"web1", crit, "mc_load1 = 12 (critical above 10)"}}},
		{70 * time.Second, []want{{"web1", ok, "mc_load1 = 2"}}},
		// No series: the no-data level (unknown, hence critical) for the
		// cluster, after `for` like any other condition.
		{20 * time.Minute, []want{{"c1", ok, "no data: mc_load1 returned no series; pending for 0s of 15s"}}},
		{20*time.Minute + 20*time.Second, []want{{"c1", crit, "no data: mc_load1 returned no series"}}},
		{21 * time.Minute, []want{{"web1", ok, "mc_load1 = 1"}, {"c1", ok, "data again: 1 series"}}},
	} {
		events := tick(ctx, at(step.at))
		var got []want
		for _, e := range events {
			got = append(got, want{e.GetNode(), e.GetLevel(), e.GetOutput()})
			if e.GetCheck() != "load" || !e.GetStartedAt().AsTime().Equal(at(step.at)) {
				t.Errorf("at +%s: event %v: want check load started at the evaluation", step.at, e)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("at +%s:\n got %v\nwant %v", step.at, got, step.want)
		}
	}
	// Not due yet: nothing is evaluated twice within the interval.
	if events := tick(ctx, at(21*time.Minute+5*time.Second)); len(events) != 0 {
		t.Errorf("evaluated before the interval passed: %v", events)
	}
	hist, err := st.ListEvents(ctx, store.EventFilter{Check: "load", Node: "web1", History: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 9 || len(hist[0].GetPerfdata()) != 1 || hist[0].GetPerfdata()[0].GetValue() != 1 || hist[0].GetPerfdata()[0].GetCrit() != "10" {
		t.Errorf("stored history of web1 = %d events, newest %v; want 9 with the value as perfdata", len(hist), hist[0])
	}
}
