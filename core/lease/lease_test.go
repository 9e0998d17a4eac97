package lease_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/lease"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
)

func TestOneHolderAndHandover(t *testing.T) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var running atomic.Int32 // replicas inside work right now
	var overlap atomic.Bool
	work := func(ctx context.Context) {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		<-ctx.Done()
		running.Add(-1)
	}
	runners := []*lease.Runner{
		{Leases: st, Name: "controller", Holder: "a", TTL: 300 * time.Millisecond},
		{Leases: st, Name: "controller", Holder: "b", TTL: 300 * time.Millisecond},
	}
	ctxs := make([]context.CancelFunc, 2)
	var wg sync.WaitGroup
	for i, r := range runners {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx, work) }()
	}
	defer func() {
		for _, c := range ctxs {
			c()
		}
		wg.Wait()
	}()

	testutil.Until(t, 10*time.Second, "a holder", func() bool { return running.Load() == 1 })
	holder := 0
	if runners[1].Held() {
		holder = 1
	}
	// Several TTLs pass: the holder keeps it, the other never runs.
	for i := 0; i < 20; i++ {
		time.Sleep(50 * time.Millisecond)
		if runners[1-holder].Held() || !runners[holder].Held() {
			t.Fatalf("lease moved while its holder renewed it")
		}
	}
	// The holder stops: the other takes over.
	ctxs[holder]()
	testutil.Until(t, 10*time.Second, "the other replica to take over", func() bool { return runners[1-holder].Held() && running.Load() == 1 })
	if overlap.Load() {
		t.Fatal("two replicas ran the controller work at the same time")
	}
}
