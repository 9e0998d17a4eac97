package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/unyo-ops/unyo/core/selfmon"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// registerSelfMetrics adds the cluster's metrics to its server's /metrics:
// counters where things happen (results, samples, action outcomes) and,
// at scrape time, the health its watchers judge it by (pipeline backlog and
// lag, ingest age, lease holder) and how long reading it from the store took.
func (c *Cluster) registerSelfMetrics(reg *selfmon.Registry) {
	c.self = reg
	reg.Collect(func(w io.Writer) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		h := c.health(ctx)
		selfmon.Gauge(w, "unyo_store_health_read_seconds", time.Since(start).Seconds())
		up := 1.0
		if h.GetError() != "" {
			up = 0
		}
		selfmon.Gauge(w, "unyo_store_up", up)
		selfmon.Gauge(w, "unyo_pipeline_behind_events", float64(h.GetPipelineBehind()))
		selfmon.Gauge(w, "unyo_pipeline_lag_seconds", h.GetPipelineLag().AsDuration().Seconds())
		if h.GetIngestAge() != nil {
			selfmon.Gauge(w, "unyo_ingest_age_seconds", h.GetIngestAge().AsDuration().Seconds())
		}
		selfmon.Gauge(w, "unyo_nodes", float64(h.GetNodes()))
		selfmon.Gauge(w, "unyo_checks", float64(h.GetChecks()))
		held := 0.0
		if c.lease.Held() {
			held = 1
		}
		selfmon.Gauge(w, fmt.Sprintf(`unyo_lease_held{lease=%s}`, selfmon.Label(c.lease.Name)), held)
		if h.GetLeaseHolder() != "" {
			selfmon.Gauge(w, fmt.Sprintf(`unyo_lease_holder{lease=%s,holder=%s}`, selfmon.Label(c.lease.Name), selfmon.Label(h.GetLeaseHolder())), 1)
		}
		if sr, ok := c.opts.Metrics.(tsdb.StatsReporter); ok {
			st := sr.WriteStats()
			selfmon.Gauge(w, "unyo_tsdb_samples_written_total", float64(st.Written))
			selfmon.Gauge(w, `unyo_tsdb_samples_dropped_total{reason="too_old"}`, float64(st.DroppedTooOld))
			selfmon.Gauge(w, `unyo_tsdb_samples_dropped_total{reason="future"}`, float64(st.DroppedFuture))
		}
	})
}

// count adds n to a counter of the cluster's /metrics (none before
// Register, as in tests that run a cluster without a server).
func (c *Cluster) count(name string, n int) {
	if c.self != nil && n > 0 {
		c.self.Counter(name).Add(n)
	}
}
