package sqlstore

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// BenchmarkAppendEvents measures the hot path as a cluster sees it: batches
// of 500 results arriving from 4 agents' connections at once. One benchmark
// op is one batch; events/s is the figure that matters.
func BenchmarkAppendEvents(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "unyo.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkAppend(b, s, nil)
	})
	// The same with the acknowledged-events mark advanced after every
	// commit, as a cluster runs it.
	b.Run("sqlite-ackmark", func(b *testing.B) {
		dir := b.TempDir()
		s, err := OpenSQLite(b.Context(), filepath.Join(dir, "unyo.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.TrackAcked(b.Context(), filepath.Join(dir, "acked")); err != nil {
			b.Fatal(err)
		}
		benchmarkAppend(b, s, nil)
	})
	b.Run("postgres-durable", func(b *testing.B) {
		// fsync and synchronous_commit on: every commit is on disk.
		srv := testpg.New(b, testpg.WithDurable())
		s, err := OpenPostgres(b.Context(), srv.CreateDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkAppend(b, s, srv)
	})
	// The same with each call in a transaction of its own, as PostgreSQL
	// ran them before session 8: shows what merging them gains.
	b.Run("postgres-durable-nogroup", func(b *testing.B) {
		srv := testpg.New(b, testpg.WithDurable())
		s, err := OpenPostgres(b.Context(), srv.CreateDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.group = nil
		benchmarkAppend(b, s, srv)
	})
}

const (
	benchBatchSize = 500
	benchNodes     = 200
	benchChecks    = 25
)

// benchBatch is batch n of realistic results: a line of output and two
// perfdata values. Building them is part of the measured time (about 2% of
// it), as decoding them would be in a server; building all up front would
// take gigabytes.
func benchBatch(n int) []*unyov1.Event {
	batch := make([]*unyov1.Event, benchBatchSize)
	for i := range batch {
		k := n*benchBatchSize + i
		started := time.Unix(1_750_000_000, 0).Add(time.Duration(k) * time.Millisecond)
		batch[i] = &unyov1.Event{
			// Random-looking ids, as agents' UUIDs are.
			Id:      fmt.Sprintf("%08x-%012d", uint32(k)*2654435761, k),
			Cluster: "bench",
			Node:    fmt.Sprintf("node-%04d", k%benchNodes),
			Check:   fmt.Sprintf("check-%02d", k/benchNodes%benchChecks),
			Level:   unyov1.Level_LEVEL_SUCCESS,
			Output:  "DISK OK - free space: / 31000 MB (62% inode=91%);",
			Perfdata: []*unyov1.PerfData{
				{Label: "/", Value: 19000, Uom: "MB", Warn: "40000", Crit: "45000"},
				{Label: "/var", Value: 1234.5, Uom: "MB"},
			},
			StartedAt:  timestamppb.New(started),
			Duration:   durationpb.New(120 * time.Millisecond),
			ReceivedAt: timestamppb.New(started.Add(time.Second)),
			Sequence:   uint64(k),
		}
	}
	return batch
}

// benchmarkAppend reports events/s and CPU milliseconds per 1,000 events:
// this process's and, with a PostgreSQL server pg, the server's and both
// together, which a loaded machine skews less than events/s.
func benchmarkAppend(b *testing.B, s *Store, pg *testpg.Server) {
	const (
		writers   = 4
		batchSize = benchBatchSize
	)
	var (
		next     atomic.Int64
		inserted atomic.Int64
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start, cpu0, pgCPU0 := time.Now(), cpuTime(b), serverCPU(b, pg)
	for range writers {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				got, err := s.AppendEvents(b.Context(), benchBatch(int(n)))
				if err != nil {
					b.Error(err)
					return
				}
				inserted.Add(int64(got))
			}
		})
	}
	wg.Wait()
	elapsed, cpu, pgCPU := time.Since(start), cpuTime(b)-cpu0, serverCPU(b, pg)-pgCPU0
	b.StopTimer()
	if want := int64(b.N) * batchSize; inserted.Load() != want {
		b.Fatalf("inserted %d events, want %d", inserted.Load(), want)
	}
	b.ReportMetric(float64(inserted.Load())/elapsed.Seconds(), "events/s")
	perK := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(inserted.Load()) }
	b.ReportMetric(perK(cpu), "cpu-ms/1k")
	if pg != nil {
		b.ReportMetric(perK(pgCPU), "pg-cpu-ms/1k")
		b.ReportMetric(perK(cpu+pgCPU), "total-cpu-ms/1k")
	}
}

// serverCPU is the CPU time of the database server pg (0 if nil).
func serverCPU(tb testing.TB, pg *testpg.Server) time.Duration {
	if pg == nil {
		return 0
	}
	d, err := pg.CPUTime()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAckMark measures what the acknowledged-events mark adds to one
// group commit: one pwrite, and an fdatasync at most once a second.
func BenchmarkAckMark(b *testing.B) {
	m, _, err := openMark(filepath.Join(b.TempDir(), "acked"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.close()
	for i := range b.N {
		if err := m.set(int64(i+1)*500, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAckMarkOverhead compares ingest without and with the
// acknowledged-events mark in one run, alternating short rounds between two
// stores so that a machine busy with other work slows both alike. One op is
// one batch of 500 into each store.
func BenchmarkAckMarkOverhead(b *testing.B) {
	dir := b.TempDir()
	var stores [2]*Store
	for i := range stores {
		s, err := OpenSQLite(b.Context(), filepath.Join(dir, fmt.Sprintf("unyo%d.db", i)))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	if _, err := stores[1].TrackAcked(b.Context(), filepath.Join(dir, "acked")); err != nil {
		b.Fatal(err)
	}
	var took [2]time.Duration
	const round = 10
	b.ResetTimer()
	for n := 0; n < b.N; n += round {
		for k := range 2 {
			i := (n/round + k) % 2 // alternate which store goes first
			start := time.Now()
			for j := n; j < min(n+round, b.N); j++ {
				if _, err := stores[i].AppendEvents(b.Context(), benchBatch(j)); err != nil {
					b.Fatal(err)
				}
			}
			took[i] += time.Since(start)
		}
	}
	b.StopTimer()
	events := float64(b.N * benchBatchSize)
	b.ReportMetric(events/took[0].Seconds(), "events/s-without")
	b.ReportMetric(events/took[1].Seconds(), "events/s-with-mark")
	b.ReportMetric(100*(took[1].Seconds()/took[0].Seconds()-1), "%overhead")
}

// BenchmarkPruneEvents: one retention pass over a history of 2,000
// node/check pairs x 50 events (keep 20) after 200 pairs got a new event:
// "full" ranks the whole history, as every pass did before; "incremental"
// ranks only the pairs that got events since the previous pass.
func BenchmarkPruneEvents(b *testing.B) {
	const pairs, depth, keep, touched = 2000, 50, 20, 200
	event := func(pair, i int) *unyov1.Event {
		return &unyov1.Event{
			Id: fmt.Sprintf("p%04d-%06d", pair, i), Node: fmt.Sprintf("n%04d", pair), Check: "disk",
			Status: unyov1.CheckStatus_CHECK_STATUS_OK, Output: "fine",
			StartedAt: timestamppb.New(time.Unix(1700000000+int64(i), 0)),
		}
	}
	for _, mode := range []string{"full", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "unyo.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range depth {
				batch := make([]*unyov1.Event, pairs)
				for p := range pairs {
					batch[p] = event(p, i)
				}
				if _, err := s.AppendEvents(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			processed := func() {
				if _, err := s.w.ExecContext(b.Context(), "UPDATE counters SET value = (SELECT MAX(seq) FROM events) WHERE name = 'pipeline_cursor'"); err != nil {
					b.Fatal(err)
				}
			}
			processed()
			_, through, err := s.PruneEvents(b.Context(), keep, 0)
			if err != nil {
				b.Fatal(err)
			}
			removed := 0
			b.ResetTimer()
			for n := range b.N {
				b.StopTimer()
				batch := make([]*unyov1.Event, touched)
				for p := range touched {
					batch[p] = event((n*touched+p)%pairs, depth+n)
				}
				if _, err := s.AppendEvents(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
				processed()
				after := through
				if mode == "full" {
					after = 0
				}
				b.StartTimer()
				got, t, err := s.PruneEvents(b.Context(), keep, after)
				if err != nil {
					b.Fatal(err)
				}
				removed += got
				through = t
			}
			b.ReportMetric(float64(removed)/float64(b.N), "removed/op")
		})
	}
}
