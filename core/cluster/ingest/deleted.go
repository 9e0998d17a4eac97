package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// deletedCache holds the checks deleted and not applied again (the store's
// tombstones), re-read at most once a second when the checks revision
// moved, like filterCache.
type deletedCache struct {
	st  Store
	now func() time.Time

	mu      sync.Mutex
	at      time.Time
	rev     int64
	loaded  bool
	deleted map[string]time.Time
}

func (c *deletedCache) get(ctx context.Context) (map[string]time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && c.now().Sub(c.at) < time.Second {
		return c.deleted, nil
	}
	rev, err := c.st.ChecksRevision(ctx)
	if err != nil {
		return nil, err
	}
	c.at = c.now()
	if c.loaded && rev == c.rev {
		return c.deleted, nil
	}
	deleted, err := c.st.DeletedChecks(ctx)
	if err != nil {
		return nil, err
	}
	c.deleted, c.rev, c.loaded = deleted, rev, true
	return c.deleted, nil
}

// ChecksChanged tells the ingester that checks were deleted or applied, so
// that the next batch reads the deleted checks again instead of waiting
// out the cache's second: an agent's in-flight result may arrive within it.
func (in *Ingester) ChecksChanged() {
	in.deleted.mu.Lock()
	in.deleted.loaded = false
	in.deleted.mu.Unlock()
}

// dropDeleted drops agents' results of checks that were deleted and not
// applied again, run before the deletion or within grace after it: results
// an agent spooled, or ran before it heard of the deletion at its next
// heartbeat. Stored, such a result would open the alert the deletion just
// resolved again, or a new one after it was closed. A check applied again
// under the same name has no tombstone, so its results are kept.
func (in *Ingester) dropDeleted(ctx context.Context, events []*unyov1.Event) ([]*unyov1.Event, int, error) {
	if len(events) == 0 {
		return events, 0, nil
	}
	deleted, err := in.deleted.get(ctx)
	if err != nil || len(deleted) == 0 {
		return events, 0, err
	}
	kept := events[:0]
	dropped := map[string]int{}
	for _, e := range events {
		if at, ok := deleted[e.GetCheck()]; ok && e.GetStartedAt().AsTime().Before(at.Add(in.deletedGrace)) {
			dropped[e.GetCheck()]++
			continue
		}
		kept = append(kept, e)
	}
	for check, n := range dropped {
		in.log.Info("dropped results of a deleted check", "check", check, "deleted_at", deleted[check], "count", n)
	}
	return kept, len(events) - len(kept), nil
}
