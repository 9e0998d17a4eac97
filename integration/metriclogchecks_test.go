package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestMetricAndLogChecks: a metric check on a system metric, evaluated by
// the cluster, and a log check on a tailed file, evaluated by the agent,
// both raise alerts through the default rules; the log check's alert stays
// open after the lines stop, because no recovery event ever comes.
func TestMetricAndLogChecks(t *testing.T) {
	f := newFleet(t, "")
	rules, err := os.ReadFile("../configs/resources/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checks := `---
kind: Check
name: mem-total
spec:
  interval: 1s
  metric:
    expr: 'node_memory_MemTotal_bytes{node="m1"}'
    critical: "~:1"     # any memory at all is "too much"
    for: 2s
    no_data: ok         # before the first samples arrive
---
kind: Check
name: db-down
spec:
  interval: 2s
  log: {app: demo, pattern: "db (down|gone)"}
`
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "checks.yaml", string(rules)+checks)); err != nil {
		t.Fatal(err)
	}
	logFile := f.dir + "/app.log"
	appendLines(t, logFile, 1, 3)
	f.agent("m1", "{}", fmt.Sprintf(`  metrics_interval: 1s
  logs:
    - {path: %s, app: demo, start_at: beginning}
`, logFile))

	// The metric check runs in the cluster, never on the agent.
	testutil.Eventually(t, 30*time.Second, "the agent to take the log check only", func() error {
		st, err := f.agentStatus("m1")
		if err != nil {
			return err
		}
		if got := fmt.Sprint(st["checks"]); got != "[db-down]" {
			return fmt.Errorf("agent runs %s, want [db-down]", got)
		}
		return nil
	})
	testutil.Eventually(t, 60*time.Second, "an alert from the metric check", func() error {
		as := f.alertsWhere("m1", "mem-total")
		if len(as) != 1 || str(as[0], "state") != "open" || !strings.Contains(str(as[0], "summary"), "(critical above 1)") {
			return fmt.Errorf("alerts: %v", as)
		}
		return nil
	})

	f2, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		fmt.Fprintf(f2, "level=error msg=\"db down (attempt %d)\"\n", i)
	}
	f2.Close()
	testutil.Eventually(t, 30*time.Second, "an alert from the log check", func() error {
		as := f.alertsWhere("m1", "db-down")
		if len(as) != 1 || str(as[0], "state") != "open" || !strings.Contains(str(as[0], "summary"), `"db down (attempt 0)"`) {
			return fmt.Errorf("alerts: %v", as)
		}
		return nil
	})

	// The lines stop (other lines go on) for several of the check's
	// intervals: no recovery event, and the alert stays open.
	appendLines(t, logFile, 4, 10)
	time.Sleep(8 * time.Second)
	appendLines(t, logFile, 11, 20)
	time.Sleep(2 * time.Second)
	as := f.alertsWhere("m1", "db-down")
	if len(as) != 1 || str(as[0], "state") != "open" {
		t.Errorf("after the lines stopped the log check's alert is %v, want it open", as)
	}
	hist, err := f.json("events", "ls", "--history", "--node", "m1", "--check", "db-down")
	if err != nil {
		t.Fatal(err)
	}
	// 50 lines make a few events (at most one per 2s interval) that
	// together count every line.
	total := 0
	var outputs []string
	for _, e := range hist {
		if str(e, "level") != "critical" {
			t.Errorf("log check event at level %s: %v", str(e, "level"), e)
		}
		var n int
		if _, err := fmt.Sscanf(str(e, "output"), "%d log line", &n); err != nil {
			t.Errorf("output %q does not start with a count", str(e, "output"))
		}
		total += n
		outputs = append(outputs, str(e, "output"))
	}
	if len(hist) == 0 || len(hist) > 5 || total != 50 {
		t.Errorf("%d events counting %d lines, want 1 to 5 counting 50: %q", len(hist), total, outputs)
	}
}
