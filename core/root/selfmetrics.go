package root

import (
	"context"
	"io"
	"time"

	"github.com/unyo-ops/unyo/core/selfmon"
)

// registerSelfMetrics adds root's view of its clusters to /metrics at
// scrape time: how many are registered and how long ago each last
// heartbeated, read from root's store (timed, as the store's latency).
func (r *Root) registerSelfMetrics(reg *selfmon.Registry) {
	reg.Collect(func(w io.Writer) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		all, err := r.store.ListClusters(ctx)
		selfmon.Gauge(w, "unyo_store_health_read_seconds", time.Since(start).Seconds())
		if err != nil {
			selfmon.Gauge(w, "unyo_store_up", 0)
			return
		}
		selfmon.Gauge(w, "unyo_store_up", 1)
		selfmon.Gauge(w, "unyo_clusters", float64(len(all)))
		for _, c := range all {
			if c.GetLastSeen() != nil {
				selfmon.Gauge(w, "unyo_cluster_last_seen_age_seconds{cluster="+selfmon.Label(c.GetName())+"}", time.Since(c.GetLastSeen().AsTime()).Seconds())
			}
		}
	})
}
