// Package lease runs controller loops on exactly one of several server
// replicas sharing a database: the replica holding the named lease.
package lease

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// Runner keeps trying to hold one lease and runs work while it does.
type Runner struct {
	Leases store.Leases
	Name   string
	Holder string
	TTL    time.Duration
	Logger *slog.Logger

	held atomic.Bool
}

// Held reports whether this replica holds the lease right now.
func (r *Runner) Held() bool { return r.held.Load() }

// Run acquires and renews the lease every TTL/3 until ctx ends. While held,
// work runs in a context that is cancelled as soon as a renewal fails, so a
// replica that lost the lease stops before another can take it over (the
// other must wait out the TTL).
func (r *Runner) Run(ctx context.Context, work func(ctx context.Context)) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("lease", r.Name, "holder", r.Holder)
	tick := time.NewTicker(r.TTL / 3)
	defer tick.Stop()
	var w *worker
	defer func() {
		w.stop()
		r.held.Store(false)
		// Hand over at once on a clean shutdown instead of making the next
		// replica wait for expiry.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := r.Leases.ReleaseLease(rctx, r.Name, r.Holder); err != nil {
			log.Warn("could not release lease", "err", err)
		}
	}()
	for {
		// A renewal must finish well within the TTL to be meaningful.
		actx, cancel := context.WithTimeout(ctx, r.TTL/3)
		ok, err := r.Leases.TryAcquireLease(actx, r.Name, r.Holder, r.TTL)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			if w != nil {
				log.Warn("lease renewal failed; stopping controller work", "err", err)
			}
			w.stop()
			w = nil
		case ok && w == nil:
			log.Info("acquired lease; running controller work")
			w = startWorker(ctx, work)
		case !ok && w != nil:
			log.Warn("lost lease to another replica; stopping controller work")
			w.stop()
			w = nil
		}
		r.held.Store(w != nil)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// worker is the controller work running while the lease is held.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startWorker(ctx context.Context, work func(context.Context)) *worker {
	wctx, cancel := context.WithCancel(ctx)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		work(wctx)
	}()
	return w
}

// stop cancels the work and waits for it; a nil worker is a no-op.
func (w *worker) stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
}
