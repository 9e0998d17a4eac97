package web

import (
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// ranges are the explorer's time ranges.
var ranges = []string{"15m", "1h", "6h", "24h", "7d"}

type legend struct {
	Name, Color, Last string
}

// metricsPage is the metrics explorer: a MetricsQL expression over every
// cluster's TSDB, drawn as a graph over a time range.
func (c *Console) metricsPage(w http.ResponseWriter, r *http.Request, q *request) {
	v := r.URL.Query()
	expr, rng, cluster := v.Get("q"), v.Get("range"), v.Get("cluster")
	if rng == "" {
		rng = "1h"
	}
	d := map[string]any{"Q": expr, "Range": rng, "Ranges": ranges, "Cluster": cluster}
	var errs []string
	span, err := parseSpan(rng)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if expr != "" && err == nil {
		end := time.Now()
		step := max(span/240, 15*time.Second)
		resp, err := q.api.metrics.QueryRange(r.Context(), connect.NewRequest(&unyov1.QueryRangeRequest{Cluster: cluster, Expr: expr,
			Start: timestamppb.New(end.Add(-span)), End: timestamppb.New(end), Step: durationpb.New(step)}))
		if connectCodeIsAuth(err) {
			c.apiFailed(w, r, q, err)
			return
		}
		if err != nil {
			errs = append(errs, message(err))
		} else {
			errs = append(errs, clusterErrors(resp.Msg.GetClusterErrors())...)
			series := resp.Msg.GetSeries()
			if len(series) > len(chartColors)*4 {
				errs = append(errs, "showing the first 32 of the series; narrow the expression")
				series = series[:len(chartColors)*4]
			}
			d["Chart"] = lineChart(series, 900, 320)
			var ls []legend
			for i, s := range series {
				l := legend{Name: seriesName(s), Color: chartColors[i%len(chartColors)]}
				if p := s.GetPoints(); len(p) > 0 {
					l.Last = formatValue(p[len(p)-1].GetValue(), "")
				}
				ls = append(ls, l)
			}
			d["Legend"] = ls
		}
	}
	c.render(w, r, q, "metrics.html", "Metrics", "graph", d, errs)
}

func parseSpan(s string) (time.Duration, error) {
	if s == "7d" {
		return 7 * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func connectCodeIsAuth(err error) bool {
	return err != nil && connect.CodeOf(err) == connect.CodeUnauthenticated
}
