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
// A pass looks only at the pairs that got events since the previous one;
// every fullEvery-th pass (and the first) looks at all of them, which also
// collects explanations that incremental passes leave behind.
type historyPruner struct {
	store store.Store
	keep  int
	log   *slog.Logger
	// through is the pipeline cursor the last pass pruned up to; passes
	// counts passes since the last full one.
	through int64
	passes  int
}

const (
	pruneEvery = 30 * time.Second
	fullEvery  = 20 // 10 minutes
)

func (p *historyPruner) Run(ctx context.Context) { every(ctx, pruneEvery, p.prune) }

func (p *historyPruner) prune(ctx context.Context) {
	after := p.through
	if p.passes%fullEvery == 0 {
		after = 0
	}
	n, through, err := p.store.PruneEvents(ctx, p.keep, after)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("pruning event history failed", "err", err)
		}
		return
	}
	p.through = through
	p.passes++
	if n > 0 {
		p.log.Debug("pruned event history", "removed", n, "keep_per_check", p.keep, "full", after == 0)
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
