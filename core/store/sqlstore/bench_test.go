package sqlstore

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
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
		benchmarkAppend(b, s)
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
		benchmarkAppend(b, s)
	})
	b.Run("postgres-durable", func(b *testing.B) {
		// fsync and synchronous_commit on: every commit is on disk.
		srv := testpg.New(b, testpg.WithDurable())
		s, err := OpenPostgres(b.Context(), srv.CreateDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkAppend(b, s)
	})
	// The same with concurrent calls merged into one transaction, as SQLite
	// does; shows whether PostgreSQL would gain from it.
	b.Run("postgres-durable-groupcommit", func(b *testing.B) {
		srv := testpg.New(b, testpg.WithDurable())
		s, err := OpenPostgres(b.Context(), srv.CreateDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.group = newGroupCommit(s, groupMaxRows)
		benchmarkAppend(b, s)
	})
}

func benchmarkAppend(b *testing.B, s *Store) {
	const (
		writers   = 4
		batchSize = 500
		nodes     = 200
		checks    = 25
	)
	// Realistic results: a line of output and two perfdata values. Building
	// them is part of the measured time (about 2% of it), as decoding them
	// would be in a server; building all up front would take gigabytes.
	makeBatch := func(n int) []*unyov1.Event {
		batch := make([]*unyov1.Event, batchSize)
		for i := range batch {
			k := n*batchSize + i
			started := time.Unix(1_750_000_000, 0).Add(time.Duration(k) * time.Millisecond)
			batch[i] = &unyov1.Event{
				// Random-looking ids, as agents' UUIDs are.
				Id:      fmt.Sprintf("%08x-%012d", uint32(k)*2654435761, k),
				Cluster: "bench",
				Node:    fmt.Sprintf("node-%04d", k%nodes),
				Check:   fmt.Sprintf("check-%02d", k/nodes%checks),
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
	var (
		next     atomic.Int64
		inserted atomic.Int64
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				got, err := s.AppendEvents(b.Context(), makeBatch(int(n)))
				if err != nil {
					b.Error(err)
					return
				}
				inserted.Add(int64(got))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if want := int64(b.N) * batchSize; inserted.Load() != want {
		b.Fatalf("inserted %d events, want %d", inserted.Load(), want)
	}
	b.ReportMetric(float64(inserted.Load())/elapsed.Seconds(), "events/s")
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
