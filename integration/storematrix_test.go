package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore/chtest"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/tsdb/vmtest"
)

// TestEveryStoreCombination starts a cluster with each metrics store
// (embedded, remote, none) beside each log store (embedded, clickhouse,
// none), lets the statistics controller run, and queries metrics, logs,
// log statistics and event history: each answers with data, or with an
// error naming the store that is off. A remote metrics store once made the
// embedded log store panic on its first query (VictoriaLogs' memory limits
// were set up only on the embedded VictoriaMetrics path).
func TestEveryStoreCombination(t *testing.T) {
	vm := vmtest.Start(t, vmtest.Config{})
	ch := chtest.Start(t)
	metricsStores := map[string]string{
		"embedded": "metrics: {store: embedded}\n",
		"remote":   fmt.Sprintf("metrics: {store: remote, url: %s}\n", vm.URL),
		"none":     "metrics: {store: none}\n",
	}
	logStores := map[string]string{
		"embedded":   "logs: {store: embedded}\n",
		"clickhouse": "logs: {store: clickhouse, clickhouse: {addr: " + ch.Addr + ", database: matrix_%s}}\n",
		"none":       "logs: {store: none}\n",
	}
	for _, m := range []string{"embedded", "remote", "none"} {
		for _, l := range []string{"embedded", "clickhouse", "none"} {
			t.Run("metrics_"+m+"_logs_"+l, func(t *testing.T) {
				// The remote stores are shared: names keep each case's data apart.
				node := "n-" + m + "-" + l
				f := newFleet(t, metricsStores[m]+strings.ReplaceAll(logStores[l], "%s", m)+"stats: {interval: 1s}\n")
				logFile := f.dir + "/app.log"
				appendLines(t, logFile, 1, 3)
				f.agent(node, "{}", fmt.Sprintf(`  metrics_interval: 1s
  checks:
    - name: clock
      spec: {command: [sh, -c, 'echo "OK | t=1"'], interval: 1s}
  logs:
    - {path: %s, app: demo, start_at: beginning}
`, logFile))
				queries := []struct {
					store, off string
					args       []string
				}{
					{m, "metrics.store is none", []string{"metrics", "query", `unyo_check_perfdata{node="` + node + `",check="clock"}`}},
					{l, "logs.store is none", []string{"logs", "query", "--app", "demo", "--host", node}},
					{l, "logs.store is none", []string{"logs", "stats", "--by", "level"}},
					{l, "logs.store is none", []string{"events", "history", "--check", "clock", "--node", node}},
				}
				for _, q := range queries {
					what := strings.Join(q.args, " ")
					testutil.Eventually(t, 60*time.Second, what, func() error {
						out, err := f.cli(q.args...)
						if q.store == "none" {
							if err == nil || !strings.Contains(err.Error(), q.off) {
								return fmt.Errorf("want an error saying %q, got %v (%s)", q.off, err, out)
							}
							return nil
						}
						if err != nil {
							return err
						}
						if strings.Count(strings.TrimSpace(out), "\n") < 1 {
							return fmt.Errorf("no rows yet: %q", out)
						}
						return nil
					})
				}
				// The statistics controller has run (every second) over
				// every store; the cluster is still up and answering.
				if f.cluster.exited() {
					t.Fatal("the cluster exited")
				}
				if _, err := f.cli("nodes", "ls"); err != nil {
					t.Fatalf("the cluster stopped answering: %v", err)
				}
			})
		}
	}
}
