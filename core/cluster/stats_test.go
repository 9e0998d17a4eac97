package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
)

// fakeClock is the controller's clock in tests: days pass in a call.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// serveOnly serves a cluster's API without running its loops, so the test
// alone decides when the controller works.
func serveOnly(t *testing.T, cl *cluster.Cluster) *client.Clients {
	return serveWith(t, cl, server.Auth{}, "")
}

// serveWith is serveOnly with auth, and clients that present token.
func serveWith(t *testing.T, cl *cluster.Cluster, auth server.Auth, token string) *client.Clients {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: quiet, Auth: auth})
	cl.Register(srv)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := client.New(client.Options{URL: "http://" + ln.Addr().String(), Token: token, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStatistics runs the statistics controller on the embedded TSDB and log
// store with a fake clock: exact hourly and daily rollups and daily counts,
// late data within and beyond the lateness, a restart, expiry of statistics
// and of the raw log days.
func TestStatistics(t *testing.T) {
	ctx := t.Context()
	// One series per query at most: st_load's two series are too many for
	// one query, so the controller has to split it by node, as it does
	// for a metric with more series than a big fleet's TSDB answers at once.
	db, err := vmembed.Open(vmembed.Options{DataDir: t.TempDir(), MaxSeries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs, err := vlembed.Open(vlembed.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	// Day 0 is three UTC days back, so that the stores (which check against
	// the real clock) take its data; the fake clock moves from there.
	d0 := time.Now().UTC().Add(-72 * time.Hour).Truncate(24 * time.Hour)
	at := func(day, hour, min int) time.Time {
		return d0.Add(time.Duration(day)*24*time.Hour + time.Duration(hour)*time.Hour + time.Duration(min)*time.Minute)
	}
	var samples []tsdb.Sample
	for h := range 24 {
		for i, v := range []float64{1, 5, 3} { // min +1, max +5, avg and last +3
			samples = append(samples, tsdb.Sample{Name: "st_load", Labels: map[string]string{"node": "web1"}, Timestamp: at(0, h, 20*i), Value: float64(10*h) + v})
		}
		for day := range 2 {
			samples = append(samples, tsdb.Sample{Name: "st_load", Labels: map[string]string{"node": "web2"}, Timestamp: at(day, h, 30), Value: 100})
		}
		samples = append(samples,
			tsdb.Sample{Name: "st_mem_free", Labels: map[string]string{"node": "web1"}, Timestamp: at(1, h, 0), Value: float64(h)},
			tsdb.Sample{Name: "st_unselected", Labels: map[string]string{"node": "web1"}, Timestamp: at(1, h, 0), Value: 1})
	}
	writeSamples(t, db, samples...)

	line := func(day, hour int, host, app, level string) logstore.Entry {
		return logstore.Entry{Time: at(day, hour, 7), Host: host, App: app, Level: level, Message: "m"}
	}
	if err := logs.Write(ctx, []logstore.Entry{
		line(0, 1, "web1", "shop", "info"), line(0, 2, "web1", "shop", "info"), line(0, 3, "web1", "shop", "info"),
		line(0, 4, "web1", "shop", "error"), line(0, 5, "web1", "shop", "error"), line(0, 6, "web1", "shop", "warn"),
		line(0, 7, "web2", "db", "info"), line(0, 8, "web2", "db", "info"), line(0, 9, "web2", "db", "info"), line(0, 23, "web2", "db", "info"),
		line(1, 0, "web1", "shop", "error"),
	}); err != nil {
		t.Fatal(err)
	}

	clock := &fakeClock{t: at(2, 3, 0)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := cluster.Options{
		Name: "c1", Replica: "r1", Metrics: db, Logs: logs, LogRetention: 2 * 24 * time.Hour, Logger: quiet, Now: clock.Now,
		Stats: &cluster.StatsOptions{
			HourlyRetention: 3 * 24 * time.Hour, DailyRetention: 6 * 24 * time.Hour, Lateness: 2 * time.Hour,
			Metrics:         []string{"st_load", `{__name__=~"st_mem_.*"}`},
			MetricsBackfill: 4 * 24 * time.Hour, LogsBackfill: 4 * 24 * time.Hour,
		},
	}
	cl := cluster.New(st, opts)
	event := func(hour int, node, check string, level unyov1.Level) *unyov1.Event {
		return &unyov1.Event{Id: fmt.Sprintf("%s-%s-%d", node, check, hour), Node: node, Check: check, Level: level,
			StartedAt: timestamppb.New(at(0, hour, 30)), Output: "x"}
	}
	crit, warn, ok := unyov1.Level_LEVEL_CRITICAL, unyov1.Level_LEVEL_WARNING, unyov1.Level_LEVEL_SUCCESS
	cluster.RecordHistory(cl, ctx, []*unyov1.Event{
		event(1, "web1", "disk", crit), event(2, "web1", "disk", crit), event(3, "web1", "load", warn),
		event(4, "web2", "disk", ok), event(5, "web2", "disk", ok), event(6, "web2", "disk", ok),
	})
	run := cluster.RunStats(cl)
	if err := run(ctx, clock.Now()); err != nil {
		t.Fatalf("first run: %v", err)
	}
	api := serveOnly(t, cl)

	rollups := func(selector, res string, since, until time.Time) map[string]string {
		t.Helper()
		resp, err := api.Stats.MetricStats(ctx, connect.NewRequest(&unyov1.MetricStatsRequest{
			Selector: selector, Resolution: res, Since: timestamppb.New(since), Until: timestamppb.New(until)}))
		if err != nil {
			t.Fatalf("MetricStats(%s, %s): %v", selector, res, err)
		}
		out := map[string]string{}
		for _, r := range resp.Msg.GetRollups() {
			if r.GetCluster() != "c1" || r.GetResolution() != res {
				t.Errorf("rollup %v: want cluster c1 and resolution %s", r, res)
			}
			key := fmt.Sprintf("%s/%s/%s", r.GetLabels()["__name__"], r.GetLabels()["node"], r.GetStart().AsTime().Sub(d0))
			out[key] = fmt.Sprintf("min=%g max=%g avg=%g last=%g n=%d", r.GetMin(), r.GetMax(), round(r.GetAvg()), r.GetLast(), r.GetCount())
		}
		return out
	}
	// Every hour of day 0, exactly.
	hourly := rollups(`st_load{node="web1"}`, "1h", d0, d0.Add(24*time.Hour))
	if len(hourly) != 24 {
		t.Errorf("hourly rollups of web1 on day 0: %d, want 24: %v", len(hourly), hourly)
	}
	for h := range 24 {
		key := fmt.Sprintf("st_load/web1/%s", time.Duration(h)*time.Hour)
		want := fmt.Sprintf("min=%d max=%d avg=%d last=%d n=3", 10*h+1, 10*h+5, 10*h+3, 10*h+3)
		if hourly[key] != want {
			t.Errorf("%s: %s, want %s", key, hourly[key], want)
		}
	}
	// Daily rollups from the hourly ones; the unselected metric is absent.
	wantDaily := map[string]string{
		"st_load/web1/0s":      "min=1 max=235 avg=118 last=233 n=72",
		"st_load/web2/0s":      "min=100 max=100 avg=100 last=100 n=24",
		"st_load/web2/24h0m0s": "min=100 max=100 avg=100 last=100 n=24",
	}
	if got := rollups("st_load", "1d", d0, at(3, 0, 0)); fmt.Sprint(got) != fmt.Sprint(wantDaily) {
		t.Errorf("daily st_load:\n got %v\nwant %v", got, wantDaily)
	}
	if got := rollups(`{__name__=~"st_.*"}`, "1d", d0, at(3, 0, 0)); len(got) != 4 || got["st_mem_free/web1/24h0m0s"] != "min=0 max=23 avg=11.5 last=23 n=24" {
		t.Errorf("daily st_*: %v, want st_load's and st_mem_free of day 1 (min=0 max=23 avg=11.5 last=23 n=24), no st_unselected", got)
	}

	// Daily counts, events apart from log lines, events by check and node.
	counts := func(kind, by string) string {
		t.Helper()
		resp, err := api.Stats.CountStats(ctx, connect.NewRequest(&unyov1.CountStatsRequest{Kind: kind, By: by, Since: timestamppb.New(d0.Add(-48 * time.Hour))}))
		if err != nil {
			t.Fatalf("CountStats(%s, %s): %v", kind, by, err)
		}
		var parts []string
		for _, c := range resp.Msg.GetCounts() {
			parts = append(parts, fmt.Sprintf("%s/%s=%d(e%d,w%d)", c.GetDay().AsTime().Sub(d0), c.GetKey(), c.GetCount(), c.GetErrors(), c.GetWarnings()))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct{ kind, by, want string }{
		{"logs", "level", "0s/error=2(e2,w0) 0s/info=7(e0,w0) 0s/warn=1(e0,w1) 24h0m0s/error=1(e1,w0)"},
		{"logs", "app", "0s/db=4(e0,w0) 0s/shop=6(e2,w1) 24h0m0s/shop=1(e1,w0)"},
		{"logs", "host", "0s/web1=6(e2,w1) 0s/web2=4(e0,w0) 24h0m0s/web1=1(e1,w0)"},
		{"events", "level", "0s/critical=2(e2,w0) 0s/success=3(e0,w0) 0s/warning=1(e0,w1)"},
		{"events", "app", "0s/disk=5(e2,w0) 0s/load=1(e0,w1)"},
		{"events", "host", "0s/web1=3(e2,w1) 0s/web2=3(e0,w0)"},
	} {
		if got := counts(tc.kind, tc.by); got != tc.want {
			t.Errorf("%s by %s:\n got %s\nwant %s", tc.kind, tc.by, got, tc.want)
		}
	}

	for what, call := range map[string]func() error{
		"an expression for a selector": func() error {
			_, err := api.Stats.MetricStats(ctx, connect.NewRequest(&unyov1.MetricStatsRequest{Selector: "sum(st_load)"}))
			return err
		},
		"resolution 5m": func() error {
			_, err := api.Stats.MetricStats(ctx, connect.NewRequest(&unyov1.MetricStatsRequest{Selector: "st_load", Resolution: "5m"}))
			return err
		},
		"until before since": func() error {
			_, err := api.Stats.MetricStats(ctx, connect.NewRequest(&unyov1.MetricStatsRequest{Selector: "st_load", Since: timestamppb.New(d0), Until: timestamppb.New(d0.Add(-time.Hour))}))
			return err
		},
		"kind metrics": func() error {
			_, err := api.Stats.CountStats(ctx, connect.NewRequest(&unyov1.CountStatsRequest{Kind: "metrics", By: "level"}))
			return err
		},
		"by check": func() error {
			_, err := api.Stats.CountStats(ctx, connect.NewRequest(&unyov1.CountStatsRequest{Kind: "events", By: "check"}))
			return err
		},
	} {
		wantCode(t, what, call(), connect.CodeInvalidArgument)
	}

	// Late data: within the lateness it is taken in on the next run; an
	// hour already final stays as it was.
	writeSamples(t, db,
		tsdb.Sample{Name: "st_load", Labels: map[string]string{"node": "web1"}, Timestamp: at(2, 1, 10), Value: 1000},
		tsdb.Sample{Name: "st_load", Labels: map[string]string{"node": "web1"}, Timestamp: at(0, 5, 50), Value: -1})
	clock.Set(at(2, 3, 30))
	if err := run(ctx, clock.Now()); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got := rollups(`st_load{node="web1"}`, "1h", at(2, 1, 0), at(2, 2, 0)); got["st_load/web1/49h0m0s"] != "min=1000 max=1000 avg=1000 last=1000 n=1" {
		t.Errorf("hour +49h after a late sample: %v", got)
	}
	if got := rollups(`st_load{node="web1"}`, "1h", at(0, 5, 0), at(0, 6, 0)); got["st_load/web1/5h0m0s"] != "min=51 max=55 avg=53 last=53 n=3" {
		t.Errorf("final hour +5h changed after a sample later than the lateness: %v", got)
	}

	// A restarted controller (another replica) resumes: nothing counted twice.
	restarted := cluster.RunStats(cluster.New(st, opts))
	if err := restarted(ctx, clock.Now()); err != nil {
		t.Fatalf("run after restart: %v", err)
	}
	if got := rollups("st_load", "1d", d0, d0.Add(24*time.Hour)); fmt.Sprint(got) != fmt.Sprint(map[string]string{
		"st_load/web1/0s": wantDaily["st_load/web1/0s"], "st_load/web2/0s": wantDaily["st_load/web2/0s"]}) {
		t.Errorf("daily st_load of day 0 after a restart: %v", got)
	}
	if got := counts("logs", "host"); got != "0s/web1=6(e2,w1) 0s/web2=4(e0,w0) 24h0m0s/web1=1(e1,w0)" {
		t.Errorf("logs by host after a restart: %s", got)
	}

	// Expiry: 3.5 days on, hourly rollups before day 0 12:00 are gone, the
	// rest stay; then past the daily retention, day 0's daily rows go too.
	clock.Set(at(3, 12, 0))
	if err := run(ctx, clock.Now()); err != nil {
		t.Fatalf("run at +3.5d: %v", err)
	}
	hourly = rollups(`st_load{node="web1"}`, "1h", d0, d0.Add(24*time.Hour))
	if _, kept := hourly["st_load/web1/11h0m0s"]; kept || len(hourly) != 12 {
		t.Errorf("hourly rollups of day 0 at +3.5d: %d (%v), want the 12 from 12:00", len(hourly), hourly)
	}
	clock.Set(at(7, 1, 0))
	if err := run(ctx, clock.Now()); err != nil {
		t.Fatalf("run at +7d: %v", err)
	}
	if got := rollups("st_load", "1h", d0.Add(-24*time.Hour), at(7, 0, 0)); len(got) != 0 {
		t.Errorf("hourly rollups older than 3d remain: %v", got)
	}
	if got := rollups("st_load", "1d", d0.Add(-24*time.Hour), at(7, 0, 0)); fmt.Sprint(got) != fmt.Sprint(map[string]string{
		"st_load/web2/24h0m0s": wantDaily["st_load/web2/24h0m0s"],
		"st_load/web1/48h0m0s": "min=1000 max=1000 avg=1000 last=1000 n=1", // the late sample's day
	}) {
		t.Errorf("daily rollups at +7d: %v, want only those of days 1 and 2", got)
	}
	if got := counts("logs", "level"); got != "24h0m0s/error=1(e1,w0)" {
		t.Errorf("logs by level at +7d: %s, want only day 1's", got)
	}

	// Full resolution: the retention loop drops the raw log days past
	// logs.retention (2d), while their statistics stay.
	cluster.PruneLogs(cl, ctx)
	left, err := logs.Query(ctx, logstore.Query{Since: d0, Until: at(2, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("log lines of days 0 and 1 after the retention loop: %d, want 0", len(left))
	}
	if got := counts("logs", "app"); got != "24h0m0s/shop=1(e1,w0)" {
		t.Errorf("logs by app after the raw days were dropped: %s", got)
	}
}

func writeSamples(t *testing.T, db tsdb.Store, samples ...tsdb.Sample) {
	t.Helper()
	if err := db.Write(t.Context(), samples); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }
