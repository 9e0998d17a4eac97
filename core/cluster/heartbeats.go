package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// heartbeats is the replica's heartbeat tracker: it keeps every node's
// newest heartbeat in memory, where the liveness judge reads it, and writes
// heartbeats to the store lazily, in one batch a second, so that 50,000
// agents cost a few writes a second rather than 5,000.
//
// A node's heartbeat is written when this replica first hears from it
// (after a restart too), and after that at most every writeEvery; a beat
// not yet written is written once writeEvery has passed since the node's
// previous write, even if the node fell silent. The store therefore lags a
// node's newest heartbeat by at most writeEvery plus one flush. writeEvery
// is chosen (newHeartbeats) so that this lag plus a heartbeat interval stays
// under stale_after: a judge on another replica, which sees only the store,
// never finds a node that keeps heartbeating late enough to be Stale.
type heartbeats struct {
	store store.Store
	log   *slog.Logger
	// writeEvery is the least time between two writes of one node's beat.
	writeEvery time.Duration
	// forgetAfter is how long a written beat is kept in memory; after it
	// the store's copy is the same, so dropping it loses nothing.
	forgetAfter time.Duration
	now         func() time.Time

	mu sync.Mutex
	// last is each node's newest heartbeat heard here; written is the beat
	// last written to the store; dirty holds nodes whose last is newer
	// than written.
	last, written map[string]time.Time
	dirty         map[string]struct{}
}

// newHeartbeats returns a tracker for heartbeats sent every interval to a
// cluster that judges a node Stale after staleAfter. Half of stale_after,
// less a flush's second, leaves a node heartbeating on time at least
// staleAfter/2 - interval of margin in the store (5 s at the defaults, 10 s
// and 30 s); with a stale_after under 2 s every beat is written at the
// next flush, as before.
func newHeartbeats(st store.Store, log *slog.Logger, staleAfter time.Duration) *heartbeats {
	return &heartbeats{
		store: st, log: log, now: time.Now,
		writeEvery:  max(staleAfter/2-time.Second, 0),
		forgetAfter: staleAfter,
		last:        map[string]time.Time{},
		written:     map[string]time.Time{},
		dirty:       map[string]struct{}{},
	}
}

func (h *heartbeats) add(node string, at time.Time) {
	h.mu.Lock()
	if at.After(h.last[node]) {
		h.last[node] = at
		h.dirty[node] = struct{}{}
	}
	h.mu.Unlock()
}

// forget drops a deleted node, so that no heartbeat of it is written.
func (h *heartbeats) forget(node string) {
	h.mu.Lock()
	delete(h.last, node)
	delete(h.written, node)
	delete(h.dirty, node)
	h.mu.Unlock()
}

// lastBeat is the newest heartbeat of node this replica heard, zero for none.
func (h *heartbeats) lastBeat(node string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[node]
}

// due takes the beats to write now: all unwritten ones when all is set
// (the last flush), otherwise those of nodes not written for writeEvery.
// It also forgets written beats older than forgetAfter.
func (h *heartbeats) due(all bool) map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	var out map[string]time.Time
	for n := range h.dirty {
		w, ok := h.written[n]
		if !all && ok && now.Sub(w) < h.writeEvery {
			continue
		}
		if out == nil {
			out = map[string]time.Time{}
		}
		out[n] = h.last[n]
		h.written[n] = now
		delete(h.dirty, n)
	}
	for n, at := range h.last {
		if _, d := h.dirty[n]; !d && now.Sub(at) > h.forgetAfter && now.Sub(h.written[n]) > h.forgetAfter {
			delete(h.last, n)
			delete(h.written, n)
		}
	}
	return out
}

// Run writes the due heartbeats every second, and all unwritten ones when
// ctx ends so that none received is lost.
func (h *heartbeats) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.write(context.WithoutCancel(ctx), true)
			return
		case <-t.C:
			h.write(ctx, false)
		}
	}
}

func (h *heartbeats) write(ctx context.Context, all bool) {
	beats := h.due(all)
	if beats == nil {
		return
	}
	if err := h.store.TouchNodes(ctx, beats); err != nil {
		h.log.Warn("recording heartbeats failed; will retry", "nodes", len(beats), "err", err)
		h.mu.Lock()
		for n := range beats { // write them with the next flush
			delete(h.written, n)
			h.dirty[n] = struct{}{}
		}
		h.mu.Unlock()
	}
}
