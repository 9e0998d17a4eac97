package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// promQuery asks a Prometheus-API server for expr and returns the answer's
// data.result.
func promQuery(base, expr string) ([]map[string]any, error) {
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {expr}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, out.Error)
	}
	return out.Data.Result, nil
}

// TestSelfMonitoringScrapedByPrometheus: Debian's Prometheus scrapes
// /metrics of a real `unyo dev` (root, cluster and agent), finds every
// target up with the metrics the README lists, and loads unyo's default
// rule set; promtool lints each exposition; and promtool, a real client of
// the query API, queries root's Prometheus API (issue 17 items 1 and 3).
func TestSelfMonitoringScrapedByPrometheus(t *testing.T) {
	prom := testutil.NeedTool(t, "Prometheus", "apt-get install -y prometheus", "/usr/bin/prometheus")
	promtool := testutil.NeedTool(t, "promtool", "apt-get install -y prometheus", "/usr/bin/promtool")
	host, p := freePortRun(t, 3)
	addr := net.JoinHostPort(host, strconv.Itoa(p))
	rootURL := "http://" + addr
	targets := map[string]string{
		"root":    addr,
		"cluster": net.JoinHostPort(host, strconv.Itoa(p+1)),
		"agent":   net.JoinHostPort(host, strconv.Itoa(p+2)),
	}
	startUnyo(t, "dev", nil, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	testutil.Eventually(t, 60*time.Second, "unyo dev's cluster to register at its root", func() error {
		out, err := cli(t, rootURL, "clusters", "ls")
		if err == nil && !strings.Contains(out, "yes") {
			err = fmt.Errorf("clusters ls: %s", out)
		}
		return err
	})

	// The official parser accepts every exposition.
	for role, a := range targets {
		resp, err := http.Get("http://" + a + "/metrics")
		if err != nil {
			t.Fatalf("%s /metrics: %v", role, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") || !strings.Contains(string(body), "unyo_build_info{") {
			t.Fatalf("%s /metrics: %d\n%.2000s", role, resp.StatusCode, body)
		}
		lint := exec.Command(promtool, "check", "metrics")
		lint.Stdin = strings.NewReader(string(body))
		// Lint findings (no HELP text) are printed with exit status 3;
		// a parse error exits 1 with "error while linting".
		out, err := lint.CombinedOutput()
		if strings.Contains(string(out), "error while linting") || (err != nil && lint.ProcessState.ExitCode() != 3) {
			t.Errorf("%s: promtool check metrics: %v\n%s", role, err, out)
		}
	}

	rules, err := filepath.Abs("../configs/prometheus/unyo-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "prometheus.yml", fmt.Sprintf(`
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%s]
scrape_configs:
  - job_name: unyo
    static_configs: [{targets: [%s, %s]}]
  - job_name: unyo-agent
    static_configs: [{targets: [%s]}]
`, rules, targets["root"], targets["cluster"], targets["agent"]))
	promAddr := freeAddr(t)
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	promURL := "http://" + promAddr

	// Each expression must give at least one series with a value > 0
	// (or present, for those that may be 0).
	for _, expr := range []string{
		`sum(up{job=~"unyo|unyo-agent"}) == 3`,
		`count(unyo_build_info) == 3`,
		`unyo_store_up{instance="` + targets["cluster"] + `"} == 1`,
		`unyo_lease_held{lease="cluster-controller"} == 1`,
		`unyo_lease_holder{lease="cluster-controller"}`,
		`unyo_pipeline_behind_events`,
		`unyo_pipeline_lag_seconds`,
		`unyo_pipeline_events_total > 0`,
		`unyo_ingest_results_total{outcome="stored"} > 0`,
		`unyo_metrics_samples_received_total > 0`,
		`unyo_clusters{instance="` + targets["root"] + `"} == 1`,
		`unyo_cluster_last_seen_age_seconds{cluster="local"}`,
		`unyo_agent_spool_pending_records{spool="results"}`,
		`unyo_agent_registered == 1`,
		`sum(rate(unyo_api_requests_total[1m])) > 0`,
		`unyo_api_request_duration_seconds_bucket`,
		`go_goroutines{job="unyo-agent"}`,
		`process_resident_memory_bytes`,
	} {
		testutil.Eventually(t, 90*time.Second, expr, func() error {
			res, err := promQuery(promURL, expr)
			if err == nil && len(res) == 0 {
				err = fmt.Errorf("%s: no series", expr)
			}
			return err
		})
	}
	resp, err := http.Get(promURL + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"UnyoPipelineLagging"`) || !strings.Contains(string(body), `"health":"ok"`) || strings.Contains(string(body), `"health":"err"`) {
		t.Errorf("rules: %.3000s", body)
	}

	// promtool, Prometheus' own client, queries root's Prometheus API:
	// the agent's node_load1 summed over the clusters.
	testutil.Eventually(t, 60*time.Second, "promtool query against root", func() error {
		out, err := exec.Command(promtool, "query", "instant", rootURL, `count(node_load1)`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "{} => 1 @") {
			return fmt.Errorf("promtool query: %v: %s", err, out)
		}
		return nil
	})
	out, err := exec.Command(promtool, "query", "labels", rootURL, "cluster").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "local" {
		t.Errorf("promtool query labels cluster: %v: %s", err, out)
	}
}
