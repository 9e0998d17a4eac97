package vmremote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/tsdbtest"
	"github.com/unyo-ops/unyo/core/tsdb/vmtest"
)

func startServer(t testing.TB) *vmtest.Server {
	return vmtest.Start(t, vmtest.Config{
		Retention:          "30d",
		MaxSeries:          tsdbtest.MaxSeries,
		MaxPointsPerSeries: tsdbtest.MaxPointsPerSeries,
	})
}

func client(t testing.TB, url string) *Store {
	s, err := Open(Options{URL: url, Retention: tsdbtest.Retention, MaxSeries: tsdbtest.MaxSeries, MaxPointsPerSeries: tsdbtest.MaxPointsPerSeries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestContract runs the suite against one server process; subtests use
// distinct metric names, and Reopen restarts the process on its data.
func TestContract(t *testing.T) {
	srv := startServer(t)
	tsdbtest.RunHarness(t, tsdbtest.Harness{
		Open: func(t *testing.T) tsdb.Store { return client(t, srv.URL) },
		Reopen: func(t *testing.T, s tsdb.Store) tsdb.Store {
			_ = s.Close()
			srv.Restart(t)
			return client(t, srv.URL)
		},
	})
}

func TestServerGoneIsAnError(t *testing.T) {
	srv := startServer(t)
	s := client(t, srv.URL)
	ctx := context.Background()
	smp := []tsdb.Sample{{Name: "gone", Timestamp: time.Now(), Value: 1}}
	if err := s.Write(ctx, smp); err != nil {
		t.Fatalf("Write while up: %v", err)
	}
	srv.Stop()
	err := s.Write(ctx, smp)
	if err == nil || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("Write after server stop: err = %v, want 'unreachable' naming %s", err, srv.URL)
	}
	var ne net.Error
	if !errors.As(err, &ne) {
		t.Errorf("err %v does not wrap the network error", err)
	}
	if _, err := s.Query(ctx, "gone", time.Now()); err == nil {
		t.Errorf("Query after server stop succeeded")
	}
}

func TestServerErrorQuoted(t *testing.T) {
	srv := startServer(t)
	s := client(t, srv.URL)
	_, err := s.Query(context.Background(), "sum(", time.Now())
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/api/v1/query") || !strings.Contains(err.Error(), "HTTP 4") {
		t.Fatalf("bad query: err = %v, want HTTP 4xx naming the URL", err)
	}
	t.Log(err)
}

func TestOpenValidatesURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8428", "ftp://x", "http://"} {
		if _, err := Open(Options{URL: u}); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

func TestAppendSeriesEscapes(t *testing.T) {
	lw := lineWriter{win: tsdb.AcceptWindow(time.UnixMilli(1700000000123), 0)}
	lw.b = appendSeries(lw.b, "m", []tsdb.Label{{Name: "a", Value: "1"}, {Name: "b", Value: "x\"y\\z\nw"}})
	lw.point(1700000000123, 1.5)
	want := "m{a=\"1\",b=\"x\\\"y\\\\z\\nw\"} 1.5 1700000000123\n"
	if got := string(lw.b); got != want {
		t.Errorf("appendSeries+point = %q, want %q", got, want)
	}
}

// BenchmarkWrite measures writing to a local victoria-metrics server in
// batches of 10k samples: the "import directly into VictoriaMetrics"
// baseline for the embedded store's write rate.
func BenchmarkWrite(b *testing.B) {
	srv := startServer(b)
	s := client(b, srv.URL)
	const batch = 10_000
	samples := make([]tsdb.Sample, batch)
	for i := range samples {
		samples[i] = tsdb.Sample{Name: "bench_metric", Labels: map[string]string{
			"instance": fmt.Sprintf("host-%d:9100", i%100), "job": "node", "cpu": fmt.Sprint(i / 100), "mode": "user",
		}, Value: float64(i)}
	}
	ctx := context.Background()
	start := time.Now().Add(-time.Hour)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		ts := start.Add(time.Duration(n) * time.Millisecond)
		for i := range samples {
			samples[i].Timestamp = ts
			samples[i].Value++
		}
		if err := s.Write(ctx, samples); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "samples/s")
}
