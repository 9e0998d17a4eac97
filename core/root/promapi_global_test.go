package root

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// globalSamples are the series of one cluster for the comparison with one
// server holding them all: node_exporter's CPU counters, load and uname
// info, and an API's request counters and latency histogram, with values
// that differ per cluster, node and series (no ties, so that topk is
// defined), every 15 s for 20 minutes up to end.
func globalSamples(end time.Time) func(ci int, name string) []tsdb.Sample {
	return func(ci int, name string) []tsdb.Sample {
		var out []tsdb.Sample
		add := func(metric string, labels map[string]string, v func(i int) float64) {
			for i := range 81 {
				out = append(out, tsdb.Sample{Name: metric, Labels: labels, Timestamp: end.Add(time.Duration(i-80) * 15 * time.Second), Value: v(i)})
			}
		}
		for n := range 2 {
			inst := fmt.Sprintf("%s-n%d", name, n)
			node := func(more ...string) map[string]string {
				l := map[string]string{"instance": inst, "node": inst, "job": "node"}
				for i := 0; i+1 < len(more); i += 2 {
					l[more[i]] = more[i+1]
				}
				return l
			}
			seed := float64(1 + 7*ci + 3*n)
			add("node_load1", node(), func(i int) float64 { return seed*1.1 + float64(i%7)*0.013*seed })
			add("node_uname_info", node("nodename", inst+".example", "release", fmt.Sprintf("6.1.%d", ci)), func(int) float64 { return 1 })
			for cpu := range 2 {
				for m, mode := range []string{"idle", "user", "system"} {
					inc := (seed + float64(cpu)*2.5 + float64(m)*0.37) * 15
					add("node_cpu_seconds_total", node("cpu", strconv.Itoa(cpu), "mode", mode), func(i int) float64 { return float64(i) * inc * (1 + float64(i%3)*0.01) })
				}
			}
			for _, method := range []string{"GET", "POST"} {
				api := func(more ...string) map[string]string {
					l := map[string]string{"instance": inst, "job": "api", "method": method}
					for i := 0; i+1 < len(more); i += 2 {
						l[more[i]] = more[i+1]
					}
					return l
				}
				// Cluster c2 is slower: its requests sit in higher buckets.
				total := 0.0
				for b, le := range []string{"0.05", "0.1", "0.25", "0.5", "1", "+Inf"} {
					share := []float64{5, 20, 30, 25, 15, 5}[b]
					if ci == 1 {
						share = []float64{1, 4, 10, 30, 40, 15}[b]
					}
					total += share * (seed + float64(len(method)))
					perStep := total
					add("http_request_duration_seconds_bucket", api("le", le), func(i int) float64 { return float64(i) * perStep * (1 + float64(i%4)*0.02) })
				}
				for c, code := range []string{"200", "500"} {
					perStep := (seed + float64(len(method))) * []float64{10, 0.7}[c]
					add("http_requests_total", api("code", code), func(i int) float64 { return float64(i) * perStep })
				}
			}
		}
		return out
	}
}

// globalQueries must answer at root as one server holding every
// cluster's series answers (issue 17): the functions root decomposes or
// evaluates itself, and a RED dashboard's panels.
var globalQueries = []string{
	// histogram_quantile over sum by (le): partial sums, quantile at root.
	`histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))`,
	`histogram_quantile(0.99, sum by (le, method) (rate(http_request_duration_seconds_bucket[5m])))`,
	`histogram_quantile(0.5, sum(rate(http_request_duration_seconds_bucket[5m])) by (le, job))`,
	`histogram_quantile(0.5, rate(http_request_duration_seconds_bucket{method="GET"}[5m]))`,
	// topk/bottomk: the clusters' top k, then root's.
	`topk(3, node_load1)`,
	`bottomk(2, rate(node_cpu_seconds_total{mode="idle"}[5m]))`,
	`topk by (mode) (2, rate(node_cpu_seconds_total[5m]))`,
	`topk(1, sum by (instance) (rate(http_requests_total[5m])))`,
	// quantile: root over the clusters' series.
	`quantile(0.75, node_load1)`,
	`quantile by (mode) (0.5, rate(node_cpu_seconds_total[5m]))`,
	// stddev/stdvar: count, avg and stdvar combined.
	`stddev(node_load1)`,
	`stdvar by (job) (node_load1)`,
	`stddev by (mode) (rate(node_cpu_seconds_total[5m]))`,
	// Nested aggregations and count_values.
	`count(count by (cpu) (node_cpu_seconds_total))`,
	`sum(max by (instance) (node_load1))`,
	`count_values("cpus", count by (instance) (node_cpu_seconds_total{mode="idle"}))`,
	`avg by (mode) (rate(node_cpu_seconds_total[5m]))`,
	// Vector matching across clusters, scalar() and functions at root.
	`sum by (instance) (irate(node_cpu_seconds_total{mode="system"}[5m])) / on(instance) group_left sum by (instance) (irate(node_cpu_seconds_total[5m]))`,
	`node_load1 * on(instance) group_left(nodename) node_uname_info`,
	`scalar(node_load1{instance="c1-n0"}) * 100 / count(count(node_cpu_seconds_total) by (cpu))`,
	`node_load1 and on(instance) node_uname_info{release="6.1.1"}`,
	`node_load1 unless on(instance) node_uname_info{release="6.1.1"}`,
	`sum by (instance) (node_load1) and on(instance) sum by (instance) (node_uname_info{release="6.1.0"})`,
	`clamp_max(sum(node_load1), 30)`,
	`abs(sum(rate(node_cpu_seconds_total[5m])) - 1000)`,
	`100 * (1 - avg(rate(node_cpu_seconds_total{mode="idle"}[1m])))`,
	// A RED dashboard: rate, errors, duration.
	`sum by (job) (rate(http_requests_total[5m]))`,
	`sum by (job) (rate(http_requests_total{code=~"5.."}[5m])) / sum by (job) (rate(http_requests_total[5m]))`,
	`sum by (instance) (rate(http_requests_total[5m])) > 5`,
	`histogram_quantile(0.95, sum by (le, job) (rate(http_request_duration_seconds_bucket[5m])))`,
}

// TestPrometheusAPIGlobalEqualsOneServer: every query of globalQueries,
// and every query of the Node Exporter Full list over every node, answers
// at root (instant and range) exactly as a single VictoriaMetrics holding
// both clusters' series with their cluster label.
func TestPrometheusAPIGlobalEqualsOneServer(t *testing.T) {
	end := time.Now().Add(-time.Minute).Truncate(time.Minute)
	f := startPromFleetWith(t, Options{}, true, globalSamples(end))
	queries := slices.Clone(globalQueries)
	for _, q := range readPromQueries(t, "../../integration/testdata/node-exporter-full.queries") {
		queries = append(queries, strings.ReplaceAll(q, `node="$node"`, `node=~".+"`))
	}
	endS := strconv.FormatInt(end.Unix(), 10)
	startS := strconv.FormatInt(end.Add(-10*time.Minute).Unix(), 10)
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			for _, c := range []struct {
				path string
				args url.Values
			}{
				{"/api/v1/query", url.Values{"query": {q}, "time": {endS}}},
				{"/api/v1/query_range", url.Values{"query": {q}, "start": {startS}, "end": {endS}, "step": {"60"}}},
			} {
				code, got := f.promGet(t, f.rootURL, c.path, c.args, true)
				if code != http.StatusOK {
					t.Fatalf("%s at root: %d %v", c.path, code, got)
				}
				_, want := f.promGet(t, f.refURL, c.path, c.args, false)
				if slices.Contains(globalQueries, q) && len(canonical(t, want)) == 0 {
					t.Fatalf("%s: the reference has no data: %v", c.path, want)
				}
				if diff := compareResults(canonical(t, got), canonical(t, want)); diff != "" {
					t.Errorf("%s: root differs from one server holding all series:\n%s", c.path, diff)
				}
			}
		})
	}
}

// readPromQueries reads one query a line, without blank lines and comments.
func readPromQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// canonical maps each series' labels (JSON) to its points "t=v".
func canonical(t *testing.T, out map[string]any) map[string][][2]float64 {
	t.Helper()
	data, _ := out["data"].(map[string]any)
	res, _ := data["result"].([]any)
	m := map[string][][2]float64{}
	for _, r := range res {
		s := r.(map[string]any)
		metric, _ := json.Marshal(s["metric"])
		var pts []any
		if v, ok := s["value"].([]any); ok {
			pts = []any{v}
		} else {
			pts, _ = s["values"].([]any)
		}
		for _, p := range pts {
			pair := p.([]any)
			ts, _ := pair[0].(float64)
			v, err := strconv.ParseFloat(pair[1].(string), 64)
			if err != nil {
				t.Fatalf("value %v: %v", pair[1], err)
			}
			m[string(metric)] = append(m[string(metric)], [2]float64{ts, v})
		}
	}
	return m
}

// compareResults reports the differences, values equal to 1e-9 relative
// (the order of additions differs).
func compareResults(got, want map[string][][2]float64) string {
	var b strings.Builder
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			fmt.Fprintf(&b, "missing %s %v\n", k, w)
			continue
		}
		if len(g) != len(w) {
			fmt.Fprintf(&b, "%s: %d points, want %d: %v, want %v\n", k, len(g), len(w), g, w)
			continue
		}
		for i := range w {
			if g[i][0] != w[i][0] || math.Abs(g[i][1]-w[i][1]) > 1e-9*math.Max(1, math.Abs(w[i][1])) {
				fmt.Fprintf(&b, "%s: point %v, want %v\n", k, g[i], w[i])
				break
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "extra %s %v\n", k, g)
		}
	}
	return b.String()
}

// TestPrometheusAPIGlobalLimitsAndPartial: a query root evaluates over more
// series than its limit allows is refused with 422 naming the limit, while
// partial aggregates stay within it; a cluster that does not answer leaves
// a partial answer with a warning naming it.
func TestPrometheusAPIGlobalLimitsAndPartial(t *testing.T) {
	f := startPromFleetWith(t, Options{PromLimits: promapi.Limits{MaxSeries: 20}}, false, globalSamples(time.Now().Add(-time.Minute).Truncate(time.Minute)))
	at := url.Values{"time": {strconv.FormatInt(time.Now().Add(-time.Minute).Truncate(time.Minute).Unix(), 10)}}
	query := func(q string) (int, map[string]any) {
		args := maps.Clone(at)
		args.Set("query", q)
		return f.promGet(t, f.rootURL, "/api/v1/query", args, true)
	}
	// quantile needs all 24 CPU series at root.
	code, out := query("quantile(0.5, rate(node_cpu_seconds_total[5m]))")
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["error"]), "root.query_max_series") {
		t.Errorf("quantile over 24 series with a limit of 20: %d %v", code, out)
	}
	// topk(1) brings one series per cluster.
	if code, out = query("topk(1, rate(node_cpu_seconds_total[5m]))"); code != http.StatusOK || len(vector(t, out)) != 1 {
		t.Errorf("topk(1): %d %v", code, out)
	}

	// A third cluster that does not answer.
	dead := "http://" + freeAddrRoot(t)
	if _, err := f.admin.Cluster.RegisterCluster(context.Background(), connect.NewRequest(&unyov1.RegisterClusterRequest{Name: "c3", Url: dead})); err != nil {
		t.Fatal(err)
	}
	code, out = query(`histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))`)
	if code != http.StatusOK || len(vector(t, out)) != 1 || !strings.Contains(fmt.Sprint(out["warnings"]), "cluster c3 did not answer") {
		t.Errorf("with c3 down: %d %v", code, out)
	}
}

// freeAddrRoot is a local address nothing listens on.
func freeAddrRoot(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// BenchmarkGlobalHistogramQuantile compares, over two clusters' real
// VictoriaMetrics, a 10-minute query_range (41 steps) of
// histogram_quantile(0.9, sum by (le) (rate(...))) evaluated with the
// sums pushed down (decomposed) against fetching every bucket series'
// rate and summing at root (raw, Promxy's way): wall time per query at
// root, and the series and points root receives.
func BenchmarkGlobalHistogramQuantile(b *testing.B) {
	const buckets = 10
	end := time.Now().Add(-time.Minute).Truncate(time.Minute)
	for _, perCluster := range []int{50, 500} {
		f := startPromFleetWith(b, Options{}, false, func(ci int, name string) []tsdb.Sample {
			var out []tsdb.Sample
			for n := range perCluster {
				inst := fmt.Sprintf("%s-i%d", name, n)
				total := 0.0
				for bk := range buckets {
					total += float64(1 + (n+bk+ci)%5)
					le := strconv.FormatFloat(0.01*math.Pow(2, float64(bk)), 'f', -1, 64)
					if bk == buckets-1 {
						le = "+Inf"
					}
					for i := range 81 {
						out = append(out, tsdb.Sample{Name: "http_request_duration_seconds_bucket",
							Labels:    map[string]string{"instance": inst, "job": "api", "le": le},
							Timestamp: end.Add(time.Duration(i-80) * 15 * time.Second), Value: float64(i) * total})
					}
				}
			}
			return out
		})
		q := tsdb.QueryRange{Expr: `histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))`,
			Start: end.Add(-10 * time.Minute), End: end, Step: 15 * time.Second}
		for _, c := range []struct {
			name string
			o    promapi.PlanOptions
		}{{"decomposed", promapi.PlanOptions{}}, {"raw", promapi.PlanOptions{NoPartials: true}}} {
			b.Run(fmt.Sprintf("series=%d/%s", 2*perCluster*buckets, c.name), func(b *testing.B) {
				plan, err := promapi.NewPlanWith(q.Expr, c.o)
				if err != nil {
					b.Fatal(err)
				}
				series, points := 0, 0
				for _, e := range plan.Remote {
					for _, db := range f.dbs {
						got, err := db.QueryRange(context.Background(), tsdb.QueryRange{Expr: e, Start: q.Start, End: q.End, Step: q.Step})
						if err != nil {
							b.Fatal(err)
						}
						series += len(got)
						for _, s := range got {
							points += len(s.Points)
						}
					}
				}
				be := promBackend{r: f.root, plan: c.o}
				var res []tsdb.Series
				for b.Loop() {
					if res, err = be.QueryRange(context.Background(), q); err != nil {
						b.Fatal(err)
					}
				}
				if len(res) != 1 {
					b.Fatalf("%d series, want 1", len(res))
				}
				b.ReportMetric(float64(series), "series/op")
				b.ReportMetric(float64(points), "points/op")
			})
		}
	}
}
