// Package selfmon is unyo's self-monitoring: the metrics each process (root,
// cluster, agent) exposes on GET /metrics in Prometheus' text exposition
// format, for a Prometheus (or unyo itself) to scrape.
//
// The metrics live in a VictoriaMetrics/metrics Set per process, not in
// that library's default set, so that two servers in one process (unyo
// dev, tests) keep apart; the embedded VictoriaMetrics' own vm_* metrics
// stay out. Every process adds the Go runtime and process metrics (go_*,
// process_*).
package selfmon

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Registry is one process's metrics.
type Registry struct {
	set *metrics.Set
}

// New returns an empty registry carrying unyo_build_info for version.
func New(version string) *Registry {
	r := &Registry{set: metrics.NewSet()}
	r.set.NewGauge(`unyo_build_info{version="`+escape(version)+`"}`, func() float64 { return 1 })
	return r
}

// Set is where the process's parts register their metrics.
func (r *Registry) Set() *metrics.Set { return r.set }

// Counter returns the counter of that name and labels (created on first
// use): name{label="value",...}.
func (r *Registry) Counter(name string) *metrics.Counter { return r.set.GetOrCreateCounter(name) }

// Histogram returns a Prometheus histogram of seconds with buckets from
// 5 ms to 10 s (created on first use).
func (r *Registry) Histogram(name string) *metrics.PrometheusHistogram {
	return r.set.GetOrCreatePrometheusHistogramExt(name, latencyBuckets)
}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Since records the seconds since start in h.
func Since(h *metrics.PrometheusHistogram, start time.Time) { h.Update(time.Since(start).Seconds()) }

// Collect registers f to write metrics computed at scrape time (depths,
// ages, lease holders) with the helpers below.
func (r *Registry) Collect(f func(w io.Writer)) { r.set.RegisterMetricsWriter(f) }

// Gauge writes one gauge line; the name may carry labels.
func Gauge(w io.Writer, name string, v float64) { metrics.WriteGaugeFloat64(w, name, v) }

// Handler answers GET /metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b bytes.Buffer
		r.set.WritePrometheus(&b)
		metrics.WriteProcessMetrics(&b)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(b.Bytes())
	})
}

// Label quotes a label value for a metric name built by hand.
func Label(v string) string { return `"` + escape(v) + `"` }

func escape(v string) string {
	var b bytes.Buffer
	for _, c := range v {
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
