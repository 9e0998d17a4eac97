package launch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/lease"
	"github.com/unyo-ops/unyo/core/store"
)

// Leases a cluster's replicas use to find out about each other at start.
const (
	controllerLease = "cluster-controller" // held by the replica running the controller loops
	embeddedLease   = "embedded-stores"    // held for its life by a replica keeping metrics or logs in process
)

// guardReplicas refuses to start a cluster replica whose metrics or logs
// would split from its peers': embedded stores live in one process, so a
// second replica on the same database would keep its own, and after a
// failover the data would be in a store nobody queries. A replica with an
// embedded store holds the embedded-stores lease for its life and starts
// only when no other replica is running; any replica refuses while another
// holds that lease. A holder that is gone (killed) is waited out for one
// lease TTL. The returned stop releases what was taken.
func guardReplicas(ctx context.Context, c *config.Config, st store.Leases, log *slog.Logger) (stop func(), err error) {
	embedded := c.Metrics.Store == "embedded" || c.Logs.Store == "embedded"
	holder, ttl := c.Cluster.Replica, c.Cluster.LeaseTTL
	why := func(lease string) error {
		stores := fmt.Sprintf("metrics.store: %s, logs.store: %s", c.Metrics.Store, c.Logs.Store)
		if lease == controllerLease {
			return fmt.Errorf("another replica of cluster %q is running on this database, and this one keeps metrics or logs in process (%s): "+
				"replicas must share them (metrics.store: remote with a VictoriaMetrics server, logs.store: clickhouse, or none), "+
				"or the history written before a failover lands in a store nobody queries", c.Cluster.Name, stores)
		}
		return fmt.Errorf("another replica of cluster %q on this database keeps its metrics or logs in process (embedded), so replicas would split them: "+
			"give every replica shared stores (metrics.store: remote, logs.store: clickhouse, or none) and restart that one first", c.Cluster.Name)
	}
	// free takes name for a moment (or for good, when keep) once any other
	// holder's lease has expired.
	free := func(name string, keep bool) error {
		deadline := time.Now().Add(ttl + time.Second)
		for {
			ok, err := st.TryAcquireLease(ctx, name, holder, ttl)
			if err != nil {
				return fmt.Errorf("read lease %s: %w", name, err)
			}
			if ok {
				if !keep {
					return st.ReleaseLease(ctx, name, holder)
				}
				return nil
			}
			if time.Now().After(deadline) {
				return why(name)
			}
			log.Info("another replica holds a lease; waiting one lease TTL to see whether it is alive", "lease", name, "ttl", ttl)
			if !ctxwait.Sleep(ctx, ttl/5) {
				return ctx.Err()
			}
		}
	}
	if !embedded {
		return func() {}, free(embeddedLease, false)
	}
	if err := free(controllerLease, false); err != nil {
		return nil, err
	}
	if err := free(embeddedLease, true); err != nil {
		return nil, err
	}
	// Keep it: renewed in the background for as long as this replica runs.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r := &lease.Runner{Leases: st, Name: embeddedLease, Holder: holder, TTL: ttl, Logger: log}
	go func() { defer close(done); r.Run(rctx, func(ctx context.Context) { <-ctx.Done() }) }()
	return func() { cancel(); <-done }, nil
}
