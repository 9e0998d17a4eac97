package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/store"
)

// historyPruner keeps the state store's event history to the newest keep
// events of each node and check (the log store keeps the long history).
type historyPruner struct {
	store store.Store
	keep  int
	log   *slog.Logger
}

func (p *historyPruner) Run(ctx context.Context) { every(ctx, 30*time.Second, p.prune) }

func (p *historyPruner) prune(ctx context.Context) {
	n, err := p.store.PruneEvents(ctx, p.keep)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("pruning event history failed", "err", err)
		}
		return
	}
	if n > 0 {
		p.log.Debug("pruned event history", "removed", n, "keep_per_check", p.keep)
	}
}

// logPruner drops log days past the retention (the stores do not expire
// them themselves), the positions of files not written for as long, and
// audit records past audit.retention.
type logPruner struct {
	store          store.Store
	logs           logstore.Store // nil: the cluster keeps no logs
	retention      time.Duration
	auditRetention time.Duration
	now            func() time.Time
	log            *slog.Logger
}

func (c *Cluster) newLogPruner() *logPruner {
	return &logPruner{store: c.store, logs: c.opts.Logs, retention: c.opts.LogRetention, auditRetention: c.opts.AuditRetention, now: c.opts.Now, log: c.log}
}

func (p *logPruner) Run(ctx context.Context) { every(ctx, time.Hour, p.prune) }

func (p *logPruner) prune(ctx context.Context) {
	cutoff := p.now().Add(-p.retention)
	if p.logs != nil {
		if err := p.logs.DropBefore(ctx, cutoff); err != nil && ctx.Err() == nil {
			p.log.Warn("dropping old log days failed", "before", cutoff, "err", err)
		}
	}
	if _, err := p.store.PruneLogPositions(ctx, cutoff); err != nil && ctx.Err() == nil {
		p.log.Warn("pruning log positions failed", "err", err)
	}
	rbac.Prune(ctx, p.store, p.auditRetention, p.now(), p.log)
}
