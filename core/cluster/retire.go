package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// retire is what deleting a check or a node does to its state: its active
// alerts are resolved (signed by who deleted it, with reason) and its
// latest events removed, so that neither `alerts ls` nor `events ls` keeps
// showing something that no longer exists. History stays.
//
// Results already run or spooled when the check was deleted may still
// arrive: an agent learns of the deletion at its next heartbeat, and
// delivers what it spooled before. So retire runs once more staleAfter
// later (three heartbeats by default, by when every live agent has
// heartbeat and flushed); an error of the first pass is returned, one of
// the second is logged.
func (c *Cluster) retire(ctx context.Context, f store.ForgetFilter, by, reason string) error {
	pass := func(ctx context.Context) error {
		resolved, err := c.store.ForgetEvents(ctx, f, by, reason, time.Now())
		if err != nil {
			return err
		}
		for _, a := range resolved {
			c.log.Info("alert resolved", "alert", a.GetId(), "key", a.GetKey(), "by", by, "reason", reason)
		}
		return nil
	}
	time.AfterFunc(c.opts.StaleAfter, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pass(ctx); err != nil {
			c.log.Warn("clearing the alerts and latest events of what was deleted failed", "node", f.Node, "check", f.Check, "err", err)
		}
	})
	if err := pass(ctx); err != nil {
		return fmt.Errorf("%s, but its alerts and latest events were not cleared (the cluster tries again in %s): %w", reason, c.opts.StaleAfter, err)
	}
	return nil
}
