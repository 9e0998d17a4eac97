package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// BenchmarkAllocateAddress measures address allocation as scheduling uses
// it: many concurrent callers, one address each, from one network. One op
// is one allocation; allocs/s is the figure that matters (goal: 10,000/s
// on SQLite with durable commits).
func BenchmarkAllocateAddress(b *testing.B) {
	sqlite := func(b *testing.B, sync string) *Store {
		s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "unyo.db"))
		if err != nil {
			b.Fatal(err)
		}
		// The writer is one long-lived connection: the pragma holds.
		if _, err := s.w.ExecContext(b.Context(), "PRAGMA synchronous="+sync); err != nil {
			b.Fatal(err)
		}
		return s
	}
	for _, callers := range []int{1, 64} {
		// NORMAL is the store's setting (WAL: durable across process
		// crashes); FULL syncs the WAL at every commit, durable across
		// power loss too.
		for _, sync := range []string{"NORMAL", "FULL"} {
			b.Run(fmt.Sprintf("sqlite-%s/callers=%d", sync, callers), func(b *testing.B) {
				s := sqlite(b, sync)
				defer s.Close()
				benchmarkAllocate(b, s, callers)
			})
		}
		b.Run(fmt.Sprintf("postgres-durable/callers=%d", callers), func(b *testing.B) {
			srv := testpg.New(b, testpg.WithDurable())
			s, err := OpenPostgres(b.Context(), srv.CreateDatabase(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchmarkAllocate(b, s, callers)
		})
	}
}

func benchmarkAllocate(b *testing.B, s *Store, callers int) {
	net := &unyov1.Object{Kind: &unyov1.Object_Network{Network: &unyov1.Network{Name: "bench",
		Spec: &unyov1.NetworkSpec{Cidr: "10.0.0.0/8", Gateway: "10.0.0.1", Scope: "region", Region: "r"}}}}
	if _, err := s.PutObjects(b.Context(), []*unyov1.Object{net}); err != nil {
		b.Fatal(err)
	}
	var n, txs atomic.Int64
	run := s.allocs.run
	s.allocs.run = func(ctx context.Context, calls []allocCall) ([]allocResult, error) {
		txs.Add(1)
		return run(ctx, calls)
	}
	at := time.Now()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := s.AllocateAddress(b.Context(), "bench", fmt.Sprintf("holder-%d", i), at); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "allocs/s")
	b.ReportMetric(float64(b.N)/float64(txs.Load()), "allocs/tx")
}
