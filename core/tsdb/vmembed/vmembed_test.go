package vmembed

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/tsdbtest"
	"github.com/unyo-ops/unyo/core/tsdb/vmremote"
)

// All tests here run sequentially: VictoriaMetrics allows one embedded
// instance per process, and every test opens and closes its own.

func openAt(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{
		DataDir:            dir,
		Retention:          tsdbtest.Retention,
		MaxSeries:          tsdbtest.MaxSeries,
		MaxPointsPerSeries: tsdbtest.MaxPointsPerSeries,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	tsdbtest.RunHarness(t, tsdbtest.Harness{
		Open: func(t *testing.T) tsdb.Store { return openAt(t, t.TempDir()) },
		Reopen: func(t *testing.T, s tsdb.Store) tsdb.Store {
			dir := s.(*Store).DataDir()
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, dir)
		},
	})
}

// TestContractOverHandler runs the suite through Handler with the remote
// client, so Handler speaks the same API as a VictoriaMetrics server.
func TestContractOverHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	tsdbtest.Run(t, func(t *testing.T) tsdb.Store {
		srv := httptest.NewServer(openAt(t, t.TempDir()).Handler())
		t.Cleanup(srv.Close)
		c, err := vmremote.Open(vmremote.Options{URL: srv.URL, Retention: tsdbtest.Retention,
			MaxSeries: tsdbtest.MaxSeries, MaxPointsPerSeries: tsdbtest.MaxPointsPerSeries})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

func TestSecondOpenFails(t *testing.T) {
	openAt(t, t.TempDir())
	_, err := Open(Options{DataDir: t.TempDir()})
	if !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second Open: err = %v, want ErrAlreadyOpen", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, o := range []Options{
		{},
		{DataDir: t.TempDir(), Retention: time.Hour},
		{DataDir: t.TempDir(), LogLevel: "DEBUG"},
	} {
		if s, err := Open(o); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded, want an error", o)
		}
	}
}

func TestLockedDirRefused(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "flock.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// flock locks belong to the open file, so this fd conflicts with
	// Open's probe like another process would.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("Open on a locked dir: err = %v, want 'in use by another process'", err)
	}
}

func TestHandlerStorageEndpoints(t *testing.T) {
	s := openAt(t, t.TempDir())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for path, want := range map[string]int{"/health": 200, "/internal/force_flush": 200, "/nope": 404, "/api/v1/query": 400} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// BenchmarkWrite measures the embedded write path: batches of 10k samples,
// each batch one "scrape" of 10k series at a new timestamp.
func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch, series = 10_000, 10_000
	samples := make([]tsdb.Sample, batch)
	for i := range samples {
		samples[i] = tsdb.Sample{Name: "bench_metric", Labels: map[string]string{
			"instance": fmt.Sprintf("host-%d:9100", i%100), "job": "node", "cpu": fmt.Sprint(i / 100 % (series / 100)), "mode": "user",
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

// TestConcurrentUse gives the race detector concurrent writes, queries and
// flushes on one store.
func TestConcurrentUse(t *testing.T) {
	s := openAt(t, t.TempDir())
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				smp := []tsdb.Sample{{Name: "conc", Labels: map[string]string{"g": fmt.Sprint(g)}, Timestamp: base.Add(time.Duration(i) * time.Second), Value: float64(i)}}
				if err := s.Write(ctx, smp); err != nil {
					done <- err
					return
				}
				if _, err := s.Query(ctx, "sum(conc)", base.Add(time.Minute)); err != nil {
					done <- err
					return
				}
				if i%10 == 0 {
					_ = s.Flush(ctx)
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionOnReopen: samples older than the retention are not returned
// once the database is reopened with a shorter one, so lowering
// metrics.retention really expires the analysis data.
func TestRetentionOnReopen(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ctx := t.Context()
	old, recent := time.Now().Add(-72*time.Hour).Truncate(time.Second), time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := s.Write(ctx, []tsdb.Sample{
		{Name: "ret_old", Timestamp: old, Value: 1},
		{Name: "ret_recent", Timestamp: recent, Value: 2},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for name, at := range map[string]time.Time{"ret_old": old, "ret_recent": recent} {
		if res, err := s.Query(ctx, name, at); err != nil || len(res) != 1 {
			t.Fatalf("%s before reopening: %v, %v; want one series", name, res, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	short, err := Open(Options{DataDir: dir, Retention: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Close() })
	if res, err := short.Query(ctx, "ret_old", old); err != nil || len(res) != 0 {
		t.Errorf("a sample older than the 48h retention: Query = %v, %v; want nothing", res, err)
	}
	if res, err := short.QueryRange(ctx, tsdb.QueryRange{Expr: "ret_old", Start: old.Add(-time.Minute), End: old.Add(time.Minute), Step: time.Minute}); err != nil || len(res) != 0 {
		t.Errorf("a sample older than the 48h retention: QueryRange = %v, %v; want nothing", res, err)
	}
	if res, err := short.Query(ctx, "ret_recent", recent); err != nil || len(res) != 1 || res[0].Points[0].V != 2 {
		t.Errorf("a sample within the retention: Query = %v, %v; want 2", res, err)
	}
}
