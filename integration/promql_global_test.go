package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestPrometheusAPIAcrossClusters: root with two clusters (each its own
// process and embedded VictoriaMetrics) and an agent on each answers the
// Node Exporter Full queries and a RED panel set through /api/v1/query
// without a 422 (issue 17), and histogram_quantile over sum by (le)
// combines the clusters' buckets before taking the quantile: c1's requests
// all take under 0.1 s, c2's between 0.1 and 0.5 s, so the global 0.9
// quantile is 0.42 s, which neither cluster alone gives (0.09 and 0.46).
func TestPrometheusAPIAcrossClusters(t *testing.T) {
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, fmt.Sprintf("  join_tokens: [%s]\nroot:\n  cluster_token: %s\n", joinToken, adminToken))
	clURL := map[string]string{}
	for _, name := range []string{"c1", "c2"} {
		cred := addClusterAt(t, rootURL, name)
		addr := freeAddr(t)
		clURL[name] = "http://" + addr
		startUnyo(t, name, nil, "server", "--config", writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: %s
  default_rules: false
  root_url: %s
  root_token: %s
logs: {store: none}
stats: {enabled: false}
`, dir, name, addr, adminToken, joinToken, name, rootURL, cred)))
	}
	testutil.Eventually(t, 30*time.Second, "both clusters to register", func() error {
		out, err := cli(t, rootURL, "--token", adminToken, "clusters", "ls")
		if err != nil || strings.Count(out, "yes") != 2 {
			return fmt.Errorf("clusters ls: %s %v", out, err)
		}
		return nil
	})
	for node, cl := range map[string]string{"n1": "c1", "n2": "c2"} {
		startUnyo(t, node, nil, "agent", "--config", writeFile(t, dir, node+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  token: %s
  labels: {}
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
  metrics_interval: 1s
`, dir, node, node, clURL[cl], joinToken)))
	}

	// An API's latency histogram and request counters, written into each
	// cluster for the last 10 minutes: 10 requests a second everywhere.
	now := time.Now().Truncate(time.Second)
	for ci, name := range []string{"c1", "c2"} {
		c, err := client.New(client.Options{URL: clURL[name], Token: adminToken})
		if err != nil {
			t.Fatal(err)
		}
		// Written as the cluster's agent's node, which must be registered.
		req := &unyov1.WriteMetricsRequest{Node: map[string]string{"c1": "n1", "c2": "n2"}[name]}
		for i := range 41 {
			at := now.Add(time.Duration(i-40) * 15 * time.Second).UnixMilli()
			n := float64(i) * 150
			// c1: every request under 0.1 s; c2: every one in (0.1, 0.5].
			for _, b := range []struct {
				le string
				v  float64
			}{{"0.1", []float64{n, 0}[ci]}, {"0.5", n}, {"+Inf", n}} {
				req.Samples = append(req.Samples, &unyov1.Sample{Name: "http_request_duration_seconds_bucket", Labels: map[string]string{"job": "api", "le": b.le}, Value: b.v, TimeMs: at})
			}
			for _, code := range []string{"200", "500"} {
				v := n * 0.9
				if code == "500" {
					v = n * 0.1
				}
				req.Samples = append(req.Samples, &unyov1.Sample{Name: "http_requests_total", Labels: map[string]string{"job": "api", "code": code}, Value: v, TimeMs: at})
			}
		}
		testutil.Eventually(t, 60*time.Second, "the API's series written to "+name, func() error {
			_, err := c.Metrics.WriteMetrics(context.Background(), connect.NewRequest(req))
			return err
		})
	}

	query := func(q string, at time.Time) (int, map[string]any) {
		args := url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}
		req, err := http.NewRequest(http.MethodPost, rootURL+"/api/v1/query", strings.NewReader(args.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return resp.StatusCode, out
	}
	values := func(out map[string]any) []float64 {
		data, _ := out["data"].(map[string]any)
		res, _ := data["result"].([]any)
		var vs []float64
		for _, r := range res {
			pair := r.(map[string]any)["value"].([]any)
			v, _ := strconv.ParseFloat(pair[1].(string), 64)
			vs = append(vs, v)
		}
		return vs
	}

	red := []string{
		`sum by (job) (rate(http_requests_total[5m]))`,
		`sum by (job) (rate(http_requests_total{code=~"5.."}[5m])) / sum by (job) (rate(http_requests_total[5m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))`,
		`histogram_quantile(0.99, sum by (le, job) (rate(http_request_duration_seconds_bucket[5m])))`,
		`topk(5, sum by (cluster) (rate(http_requests_total[5m])))`,
	}
	nef := readQueries(t, "testdata/node-exporter-full.queries", map[string]string{"$node": "n1"})
	for i, q := range append(red, nef...) {
		testutil.Eventually(t, 60*time.Second, "data at root for "+q, func() error {
			at := now // the API's series end now; the agents' go on
			if i >= len(red) {
				at = time.Now()
			}
			code, out := query(q, at)
			if code != http.StatusOK {
				return fmt.Errorf("%d %v", code, out)
			}
			if len(values(out)) == 0 {
				return fmt.Errorf("no series: %v", out)
			}
			return nil
		})
	}
	checks := []struct {
		q    string
		at   time.Time
		want []float64
	}{
		{`histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))`, now, []float64{0.42}},
		{`sum(rate(http_requests_total[5m]))`, now, []float64{20}},
		{`count(count by (node) (node_load1))`, time.Now(), []float64{2}},
	}
	// Written samples become searchable within a second or so.
	for _, c := range checks {
		testutil.Eventually(t, 30*time.Second, c.q, func() error {
			code, out := query(c.q, c.at)
			got := values(out)
			if code != http.StatusOK || len(got) != len(c.want) || math.Abs(got[0]-c.want[0]) > 1e-9 {
				return fmt.Errorf("%d %v, want %v", code, out, c.want)
			}
			return nil
		})
	}
}
