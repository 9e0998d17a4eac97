package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// heartbeats collects heartbeat times so that thousands of agents cost one
// write a second instead of one each. It runs on every replica: each
// writes the heartbeats it received.
type heartbeats struct {
	store store.Store
	log   *slog.Logger

	mu   sync.Mutex
	seen map[string]time.Time
}

func (h *heartbeats) add(node string, at time.Time) {
	h.mu.Lock()
	h.seen[node] = at
	h.mu.Unlock()
}

func (h *heartbeats) take() map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return nil
	}
	s := h.seen
	h.seen = make(map[string]time.Time, len(s))
	return s
}

// Run writes the collected heartbeats every second, and once more when ctx
// ends so that none received is lost.
func (h *heartbeats) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.write(context.WithoutCancel(ctx))
			return
		case <-t.C:
			h.write(ctx)
		}
	}
}

func (h *heartbeats) write(ctx context.Context) {
	seen := h.take()
	if seen == nil {
		return
	}
	if err := h.store.TouchNodes(ctx, seen); err != nil {
		h.log.Warn("recording heartbeats failed; will retry", "nodes", len(seen), "err", err)
		h.mu.Lock()
		for n, at := range seen { // keep them for the next flush unless newer ones came in
			if cur, ok := h.seen[n]; !ok || cur.Before(at) {
				h.seen[n] = at
			}
		}
		h.mu.Unlock()
	}
}
