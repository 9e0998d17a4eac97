package root

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmremote"
	"github.com/unyo-ops/unyo/core/tsdb/vmtest"
)

const viewerToken = "prom-admin-token"

// promFleet is root with two clusters c1 and c2, each with its own
// VictoriaMetrics holding node_load1 and a counter of two nodes.
type promFleet struct {
	rootURL string
	c1URL   string
	viewer  string // a token with the viewer role, as Grafana would hold
	ref     *vmremote.Store
	refURL  string // ref's own Prometheus API
	admin   *client.Clients
	root    *Root
	dbs     []*vmremote.Store // the clusters'
}

func startPromFleet(t *testing.T) promFleet {
	t.Helper()
	now := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	return startPromFleetWith(t, Options{}, false, func(ci int, name string) []tsdb.Sample {
		var samples []tsdb.Sample
		for n := range 2 {
			node := fmt.Sprintf("%s-n%d", name, n)
			// c1: 1 and 2; c2: 10 and 20.
			load := float64((n + 1) * []int{1, 10}[ci])
			for i := range 5 {
				at := now.Add(time.Duration(i-4) * 15 * time.Second)
				samples = append(samples,
					tsdb.Sample{Name: "node_load1", Labels: map[string]string{"node": node, "job": "node"}, Timestamp: at, Value: load},
					tsdb.Sample{Name: "unyo_events_total", Labels: map[string]string{"node": node}, Timestamp: at, Value: float64(i) * load * 15})
			}
		}
		return samples
	})
}

// startPromFleetWith starts root (with opts) and the clusters c1 and c2,
// each with its own VictoriaMetrics holding samples(i, name); with ref, a
// third VictoriaMetrics (promFleet.ref) holds every cluster's samples with
// their cluster label: what one server holding all series would answer.
func startPromFleetWith(t testing.TB, opts Options, ref bool, samples func(i int, name string) []tsdb.Sample) promFleet {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	var f promFleet
	var lastURL string
	open := func() *vmremote.Store {
		vm := vmtest.Start(t, vmtest.Config{})
		lastURL = vm.URL
		db, err := vmremote.Open(vmremote.Options{URL: vm.URL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	write := func(db *vmremote.Store, s []tsdb.Sample) {
		if err := db.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ref {
		f.ref = open()
		f.refURL = lastURL
	}
	urls := map[string]string{}
	for ci, name := range []string{"c1", "c2"} {
		db := open()
		f.dbs = append(f.dbs, db)
		s := samples(ci, name)
		write(db, s)
		if ref {
			labelled := make([]tsdb.Sample, len(s))
			for i, x := range s {
				x.Labels = maps.Clone(x.Labels)
				x.Labels["cluster"] = name
				labelled[i] = x
			}
			write(f.ref, labelled)
		}
		cl := cluster.New(openStore(t, name+".db"), cluster.Options{Name: name, Replica: "r1", Logger: log, Metrics: db})
		// The clusters trust anyone here; root is the door under test.
		urls[name] = startServer(t, server.New(server.Options{Listen: "127.0.0.1:0", Logger: log}), cl.Register, cl.Run)
	}
	f.c1URL = urls["c1"]
	if opts.Version == "" {
		opts.Version = "v9.8.7"
	}
	opts.Logger = log
	r := New(openStore(t, "root.db"), opts)
	f.root = r
	f.rootURL = serveAuth(t, log, r.Register, func(ctx context.Context) { <-ctx.Done() })
	rc, err := client.New(client.Options{URL: f.rootURL, Token: viewerToken})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c1", "c2"} {
		if _, err := rc.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: name, Url: urls[name]})); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := rc.Tokens.CreateToken(ctx, connect.NewRequest(&unyov1.CreateTokenRequest{Name: "grafana", Role: "viewer"}))
	if err != nil {
		t.Fatal(err)
	}
	f.viewer = tok.Msg.GetSecret()
	f.admin = rc
	return f
}

// serveAuth is serve with the admin token required.
func serveAuth(t testing.TB, log *slog.Logger, register func(*server.Server), run func(context.Context)) string {
	t.Helper()
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: log, Auth: server.Auth{AdminTokens: []string{viewerToken}}})
	return startServer(t, srv, register, run)
}

// promGet calls the Prometheus API as Grafana does (bearer token; GET
// query string, or POST form when form is set) and decodes the answer.
func (f promFleet) promGet(t *testing.T, base, path string, args url.Values, post bool) (int, map[string]any) {
	t.Helper()
	var (
		req *http.Request
		err error
	)
	if post {
		req, err = http.NewRequest(http.MethodPost, base+path, strings.NewReader(args.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequest(http.MethodGet, base+path+"?"+args.Encode(), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: not JSON: %v", path, err)
	}
	return resp.StatusCode, out
}

// vector returns "labels => value" lines of an instant answer, sorted.
func vector(t *testing.T, out map[string]any) []string {
	t.Helper()
	data, _ := out["data"].(map[string]any)
	res, _ := data["result"].([]any)
	var lines []string
	for _, r := range res {
		m := r.(map[string]any)
		metric, _ := json.Marshal(m["metric"])
		var v any
		if val, ok := m["value"].([]any); ok {
			v = val[1]
		} else if vals, ok := m["values"].([]any); ok && len(vals) > 0 {
			v = vals[len(vals)-1].([]any)[1]
		}
		lines = append(lines, fmt.Sprintf("%s => %v", metric, v))
	}
	sort.Strings(lines)
	return lines
}

// TestPrometheusAPIGlobal: root's /api/v1 evaluates aggregations over
// every cluster's series, not one answer per cluster (issue 17); the
// requests are the shapes Grafana's Prometheus data source sends.
func TestPrometheusAPIGlobal(t *testing.T) {
	f := startPromFleet(t)
	now := fmt.Sprint(time.Now().Unix())
	instant := func(q string) url.Values { return url.Values{"query": {q}, "time": {now}} }

	tests := []struct {
		name string
		q    string
		want []string
	}{
		{"sum across clusters", "sum(node_load1)", []string{`{} => 33`}},
		{"sum by job", "sum by (job) (node_load1)", []string{`{"job":"node"} => 33`}},
		{"sum by cluster", "sum by (cluster) (node_load1)", []string{`{"cluster":"c1"} => 3`, `{"cluster":"c2"} => 30`}},
		{"max", "max(node_load1)", []string{`{} => 20`}},
		{"min", "min(node_load1)", []string{`{} => 1`}},
		{"count", "count(node_load1)", []string{`{} => 4`}},
		{"avg", "avg(node_load1)", []string{`{} => 8.25`}},
		{"ratio of sums", "100 * sum(node_load1{node=~\".*n0\"}) / sum(node_load1)", []string{`{} => 33.333333333333336`}},
		{"rate summed", "sum(rate(unyo_events_total[1m]))", []string{`{} => 33`}},
		{"selector, labelled with the cluster", `node_load1{node="c2-n1"}`, []string{`{"__name__":"node_load1","cluster":"c2","job":"node","node":"c2-n1"} => 20`}},
		{"health check", "1+1", []string{`{} => 2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := f.promGet(t, f.rootURL, "/api/v1/query", instant(tt.q), true)
			if code != http.StatusOK || out["status"] != "success" {
				t.Fatalf("%d %v", code, out)
			}
			if got := vector(t, out); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}

	// A dashboard panel: query_range as Grafana POSTs it.
	start := fmt.Sprint(time.Now().Add(-2 * time.Minute).Unix())
	code, out := f.promGet(t, f.rootURL, "/api/v1/query_range", url.Values{"query": {"sum(node_load1)"}, "start": {start}, "end": {now}, "step": {"15"}}, true)
	if code != http.StatusOK || out["data"].(map[string]any)["resultType"] != "matrix" {
		t.Fatalf("query_range: %d %v", code, out)
	}
	if got := vector(t, out); len(got) != 1 || got[0] != `{} => 33` {
		t.Errorf("query_range sum: %v", got)
	}

	// What root cannot evaluate globally is refused, not answered per
	// cluster; one cluster's endpoint at root evaluates it.
	subquery := "max_over_time(sum(node_load1)[1m:15s])"
	code, out = f.promGet(t, f.rootURL, "/api/v1/query", instant(subquery), false)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["error"]), "cannot be evaluated across clusters") {
		t.Errorf("subquery at root: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/clusters/c1/api/v1/query", instant(subquery), false)
	if got := vector(t, out); code != http.StatusOK || len(got) != 1 || got[0] != `{"cluster":"c1"} => 3` {
		t.Errorf("subquery at /clusters/c1: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/api/v1/query", instant("topk(1, node_load1)"), false)
	if got := vector(t, out); code != http.StatusOK || len(got) != 1 || !strings.Contains(got[0], `"node":"c2-n1"`) {
		t.Errorf("topk at root: %d %v", code, out)
	}

	// Grafana's metric browser and variables.
	code, out = f.promGet(t, f.rootURL, "/api/v1/label/__name__/values", url.Values{"start": {start}, "end": {now}}, false)
	if code != http.StatusOK || fmt.Sprint(out["data"]) != "[node_load1 unyo_events_total]" {
		t.Errorf("label values: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/api/v1/label/cluster/values", url.Values{"match[]": {"node_load1"}}, false)
	if code != http.StatusOK || fmt.Sprint(out["data"]) != "[c1 c2]" {
		t.Errorf("cluster values: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/api/v1/labels", url.Values{"start": {start}, "end": {now}}, true)
	if code != http.StatusOK || fmt.Sprint(out["data"]) != "[__name__ cluster job node]" {
		t.Errorf("labels: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/api/v1/series", url.Values{"match[]": {`node_load1{node="c1-n0"}`}, "start": {start}, "end": {now}}, false)
	if code != http.StatusOK || fmt.Sprint(out["data"]) != "[map[__name__:node_load1 cluster:c1 job:node node:c1-n0]]" {
		t.Errorf("series: %d %v", code, out)
	}
	code, out = f.promGet(t, f.rootURL, "/api/v1/status/buildinfo", nil, false)
	if code != http.StatusOK || out["data"].(map[string]any)["unyoVersion"] != "v9.8.7" {
		t.Errorf("buildinfo: %d %v", code, out)
	}
	if code, out = f.promGet(t, f.rootURL, "/api/v1/metadata", nil, false); code != http.StatusOK {
		t.Errorf("metadata: %d %v", code, out)
	}

	// A cluster answers for its own series, without the cluster label.
	code, out = f.promGet(t, f.c1URL, "/api/v1/query", instant("sum(node_load1)"), false)
	if got := vector(t, out); code != http.StatusOK || strings.Join(got, ",") != `{} => 3` {
		t.Errorf("cluster c1: %d %v", code, out)
	}

	// The API needs the same credential as the rest.
	resp, err := http.Get(f.rootURL + "/api/v1/query?query=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", resp.StatusCode)
	}
}
