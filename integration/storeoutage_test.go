package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore/chtest"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/tsdb/vmtest"
)

// TestTelemetryStoresGoAway: a cluster writing to a VictoriaMetrics server
// and a ClickHouse server loses both for a while. Agents keep their samples
// and log lines in their spools and deliver them when the stores return:
// every log line arrives exactly once and the samples taken during the
// outage are queryable afterwards.
func TestTelemetryStoresGoAway(t *testing.T) {
	vm := vmtest.Start(t, vmtest.Config{})
	ch := chtest.Start(t)
	f := newFleet(t, fmt.Sprintf(`metrics:
  store: remote
  url: %s
logs:
  store: clickhouse
  clickhouse: {addr: %s, database: unyo}
`, vm.URL, ch.Addr))
	logFile := f.dir + "/app.log"
	appendLines(t, logFile, 1, 10)
	f.agent("m1", "{}", fmt.Sprintf(`  metrics_interval: 1s
  checks:
    - name: clock
      spec: {command: [sh, -c, 'echo "OK | t=$(date +%%s)"'], interval: 1s}
  logs:
    - {path: %s, app: demo, start_at: beginning}
`, logFile))
	waitLines(t, f, 10)

	// Both stores go away; the agent keeps checking and tailing.
	ch.Kill()
	vm.Stop()
	outageStart := time.Now()
	appendLines(t, logFile, 11, 30)
	testutil.Eventually(t, 60*time.Second, "metrics and logs to pile up in m1's spools", func() error {
		st, err := f.agentStatus("m1")
		if err != nil {
			return err
		}
		spools, _ := st["telemetry_spools"].(map[string]any)
		for _, name := range []string{"metrics", "logs"} {
			sp, _ := spools[name].(map[string]any)
			if n, _ := sp["PendingRecords"].(float64); n == 0 {
				return fmt.Errorf("%s spool: %v", name, sp)
			}
		}
		// Long enough that several check runs happen inside the outage.
		if time.Since(outageStart) < 8*time.Second {
			return fmt.Errorf("outage lasted %s", time.Since(outageStart))
		}
		return nil
	})
	if _, err := f.cli("logs", "query", "--app", "demo"); err == nil {
		t.Error("logs query succeeded while ClickHouse was down")
	}
	outageEnd := time.Now()

	ch.Restart(t)
	vm.Restart(t)
	got := waitLines(t, f, 30)
	for n := 1; n <= 30; n++ {
		if got[n] != 1 {
			t.Errorf("line %d stored %d times", n, got[n])
		}
	}
	// The perfdata value is the time of the run: samples taken in both halves
	// of the outage must be there, so nothing spooled was dropped.
	mid := outageStart.Add(outageEnd.Sub(outageStart) / 2)
	for _, half := range []struct{ from, to time.Time }{{outageStart, mid}, {mid, outageEnd}} {
		window := half.to.Sub(half.from).Truncate(time.Second)
		expr := fmt.Sprintf(`count_over_time(unyo_check_perfdata{node="m1",check="clock",label="t"}[%ds])`, int(window.Seconds()))
		testutil.Eventually(t, 60*time.Second, "samples from the outage", func() error {
			items, err := f.json("metrics", "query", expr, "--time", half.to.UTC().Format(time.RFC3339))
			if err != nil {
				return err
			}
			if len(items) != 1 {
				return fmt.Errorf("%s: %d series", expr, len(items))
			}
			pts, _ := items[0]["points"].([]any)
			if len(pts) != 1 {
				return fmt.Errorf("%s: points %v", expr, pts)
			}
			n, err := strconv.ParseFloat(fmt.Sprint(pts[0].(map[string]any)["value"]), 64)
			if err != nil {
				return err
			}
			// One run a second; at least half of them survives scheduling
			// jitter on a busy machine, none may be lost to the outage.
			if want := window.Seconds() / 2; n < want {
				return fmt.Errorf("%s = %v samples, want at least %v", expr, n, want)
			}
			return nil
		})
	}
}
