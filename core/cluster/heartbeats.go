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
//
// A heartbeat costs one map lookup here; a flush walks only the nodes with
// unwritten beats, and the written beats are swept out every sweepEvery
// rather than at every flush (at 10,000 nodes that sweep was most of the
// tracker's CPU).
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
	// nodes holds each node's beats heard here; dirty the nodes whose
	// last is newer than written, each once.
	nodes map[string]*nodeBeats
	dirty []*nodeBeats
	// swept is when written beats were last swept out.
	swept time.Time
}

// nodeBeats is one node's newest heartbeat heard here and the beat last
// written to the store.
type nodeBeats struct {
	name          string
	last, written time.Time
	// isDirty says the node is in heartbeats.dirty; gone that forget
	// dropped it.
	isDirty, gone bool
}

// sweepEvery is how often written beats older than forgetAfter are
// forgotten.
const sweepEvery = 10 * time.Second

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
		nodes:       map[string]*nodeBeats{},
	}
}

func (h *heartbeats) add(node string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.nodes[node]
	if b == nil {
		b = &nodeBeats{name: node}
		h.nodes[node] = b
	}
	if at.After(b.last) {
		b.last = at
		h.markDirty(b)
	}
}

// markDirty puts b on the dirty list, once (h.mu held).
func (h *heartbeats) markDirty(b *nodeBeats) {
	if !b.isDirty {
		b.isDirty = true
		h.dirty = append(h.dirty, b)
	}
}

// forget drops a deleted node, so that no heartbeat of it is written.
func (h *heartbeats) forget(node string) {
	h.mu.Lock()
	if b := h.nodes[node]; b != nil {
		b.gone = true // the dirty list may still hold it
		delete(h.nodes, node)
	}
	h.mu.Unlock()
}

// lastBeat is the newest heartbeat of node this replica heard, zero for none.
func (h *heartbeats) lastBeat(node string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.nodes[node]; b != nil {
		return b.last
	}
	return time.Time{}
}

// due takes the beats to write now: all unwritten ones when all is set
// (the last flush), otherwise those of nodes not written for writeEvery.
// Every sweepEvery it also forgets written beats older than forgetAfter.
func (h *heartbeats) due(all bool) map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	var out map[string]time.Time
	keep := h.dirty[:0]
	for _, b := range h.dirty {
		switch {
		case b.gone:
			b.isDirty = false
		case !all && !b.written.IsZero() && now.Sub(b.written) < h.writeEvery:
			keep = append(keep, b)
		default:
			if out == nil {
				out = map[string]time.Time{}
			}
			out[b.name] = b.last
			b.written, b.isDirty = now, false
		}
	}
	clear(h.dirty[len(keep):]) // no pointers kept past the list's end
	h.dirty = keep
	if now.Sub(h.swept) >= sweepEvery || all {
		h.swept = now
		for n, b := range h.nodes {
			if !b.isDirty && now.Sub(b.last) > h.forgetAfter && now.Sub(b.written) > h.forgetAfter {
				b.gone = true
				delete(h.nodes, n)
			}
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
			if b := h.nodes[n]; b != nil {
				b.written = time.Time{}
				h.markDirty(b)
			}
		}
		h.mu.Unlock()
	}
}
