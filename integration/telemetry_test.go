package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// appendLines writes "line N" for each n in [from, to] to path, every third
// at level error.
func appendLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for n := from; n <= to; n++ {
		level := "info"
		if n%3 == 0 {
			level = "error"
		}
		fmt.Fprintf(f, "level=%s msg=\"line %d\" trace_id=t%d\n", level, n, n%5)
	}
}

// value queries root for expr, which must give one series, and returns
// its last value and its labels.
func (f *fleet) value(expr string) (float64, map[string]any, error) {
	items, err := f.json("metrics", "query", expr)
	if err != nil {
		return 0, nil, err
	}
	if len(items) != 1 {
		return 0, nil, fmt.Errorf("%s: %d series", expr, len(items))
	}
	pts, _ := items[0]["points"].([]any)
	if len(pts) == 0 {
		return 0, nil, fmt.Errorf("%s: no points: %v", expr, items[0])
	}
	v, err := strconv.ParseFloat(fmt.Sprint(pts[len(pts)-1].(map[string]any)["value"]), 64)
	labels, _ := items[0]["labels"].(map[string]any)
	return v, labels, err
}

func TestMetricsAndLogsEndToEnd(t *testing.T) {
	// A node has a few hundred system series: a query over all of them is
	// more than this cluster allows. The statistics controller runs every
	// second, so the daily counts of today follow the lines quickly.
	f := newFleet(t, "metrics: {max_series: 100}\nstats: {interval: 1s}\n")
	logFile := f.dir + "/app.log"
	appendLines(t, logFile, 1, 10)
	agent := f.agent("m1", "{}", fmt.Sprintf(`  metrics_interval: 1s
  checks:
    - name: perf
      spec: {command: [sh, -c, 'echo "OK - fine | used=42MB;100;200;0;1000 ratio=50%%"'], interval: 1s}
  logs:
    - {path: %s, app: demo, start_at: beginning}
`, logFile))

	// System metrics and check perfdata reach the cluster's TSDB and are
	// queryable through root, labelled with their cluster and node.
	testutil.Eventually(t, 60*time.Second, "system metrics", func() error {
		v, labels, err := f.value(`node_memory_MemTotal_bytes{node="m1"}`)
		if err != nil {
			return err
		}
		if v <= 0 || labels["cluster"] != "c1" || labels["node"] != "m1" {
			return fmt.Errorf("MemTotal %v %v", v, labels)
		}
		return nil
	})
	testutil.Eventually(t, 60*time.Second, "check perfdata in base units", func() error {
		v, _, err := f.value(`unyo_check_perfdata{node="m1",check="perf",label="used"}`)
		if err != nil {
			return err
		}
		if v != 42*1024*1024 {
			return fmt.Errorf("used = %v, want %v bytes", v, 42*1024*1024)
		}
		return nil
	})
	if series, err := f.json("metrics", "series", `{node="m1",__name__=~"node_load(1|5|15)"}`); err != nil || len(series) != 3 {
		t.Errorf("metrics series: %v %v, want the 3 load averages", series, err)
	}

	// Queries whose answer would be huge are refused with an error naming
	// the limit, through root, instead of an empty or partial answer.
	for _, tc := range []struct {
		args  []string
		limit string
	}{
		{[]string{"metrics", "query", `{node="m1"}`}, `too large: limit max series per query \(-search.maxUniqueTimeseries\) exceeded.* exceeds 100;`},
		{[]string{"metrics", "series", `{node="m1"}`}, `too large: limit max series per query \(-search.maxUniqueTimeseries\) exceeded`},
		{[]string{"metrics", "query", `node_load1`, "--start", "60d", "--step", "1s"}, `too large: limit metrics.max_points_per_series exceeded`},
		{[]string{"logs", "query", "--limit", "5000000"}, `too large: limit 5000000 exceeds the maximum of 100000`},
	} {
		out, err := f.cli(tc.args...)
		if err == nil || !strings.Contains(err.Error(), "cluster c1: ") || !regexp.MustCompile(tc.limit).MatchString(err.Error()) {
			t.Errorf("%v: err %v, output %q; want a refusal naming %q", tc.args, err, out, tc.limit)
		}
	}

	// Logs: appended, rotated (rename and create), the agent restarted in
	// the middle, then truncated: every line arrives exactly once.
	appendLines(t, logFile, 11, 20)
	waitLines(t, f, 20)
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	appendLines(t, logFile, 21, 30)
	waitLines(t, f, 30)
	agent.stop(syscall.SIGTERM, 10*time.Second)
	appendLines(t, logFile, 31, 40) // written while the agent is down
	agent.restart()
	waitLines(t, f, 40)
	if err := os.Truncate(logFile, 0); err != nil {
		t.Fatal(err)
	}
	appendLines(t, logFile, 41, 45)
	got := waitLines(t, f, 45)
	for n := 1; n <= 45; n++ {
		if got[n] != 1 {
			t.Errorf("line %d stored %d times", n, got[n])
		}
	}

	// Error rates per day, and one trace across the file.
	stats, err := f.json("logs", "stats", "--by", "level", "--interval", "24h", "--since", "2d", "--app", "demo")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]string{}
	for _, b := range stats {
		counts[str(b, "key")] = str(b, "count")
	}
	if counts["error"] != "15" || counts["info"] != "30" {
		t.Errorf("logs stats by level: %v, want error 15, info 30", stats)
	}
	// Every processed event is in the history with its outcome.
	hist, err := f.json("events", "history", "--node", "m1", "--check", "perf", "--limit", "5")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || !strings.HasPrefix(str(hist[0], "message"), "check=perf outcome=processed: OK - fine") {
		t.Errorf("events history: %v", hist)
	}
	if fields, _ := hist[0]["fields"].(map[string]any); fields["event_id"] == nil || fields["check"] != "perf" {
		t.Errorf("events history fields: %v", hist[0]["fields"])
	}
	// The statistics tier counts today's lines and events; the CLI prints
	// them as JSON and as a table with error rates.
	testutil.Eventually(t, 60*time.Second, "daily counts of today", func() error {
		items, err := f.json("stats", "logs", "--by", "app", "--since", "1d")
		if err != nil {
			return err
		}
		for _, c := range items {
			if str(c, "key") == "demo" && str(c, "count") == "45" && str(c, "errors") == "15" && str(c, "cluster") == "c1" {
				return nil
			}
		}
		return fmt.Errorf("stats logs by app: %v, want demo 45 lines, 15 errors in c1", items)
	})
	events, err := f.json("stats", "events", "--by", "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || str(events[len(events)-1], "key") == "" {
		t.Errorf("stats events by app (the check): %v", events)
	}
	table, err := f.cli("stats", "logs", "--by", "app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, "ERROR%") || !strings.Contains(table, "demo") || !strings.Contains(table, "33.3") {
		t.Errorf("stats logs table:\n%s", table)
	}
	trace, err := f.json("logs", "trace", "t0")
	if err != nil {
		t.Fatal(err)
	}
	if len(trace) != 9 { // lines 5, 10, ..., 45
		t.Errorf("trace t0 has %d lines, want 9", len(trace))
	}
}

// waitLines waits until the demo app's log has want distinct lines and
// returns how often each line number was stored.
func waitLines(t *testing.T, f *fleet, want int) map[int]int {
	t.Helper()
	var seen map[int]int
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d log lines", want), func() error {
		items, err := f.json("logs", "query", "--app", "demo", "--since", "1h", "--limit", "10000")
		if err != nil {
			return err
		}
		seen = map[int]int{}
		for _, e := range items {
			n, err := strconv.Atoi(strings.TrimPrefix(str(e, "message"), "line "))
			if err != nil {
				return fmt.Errorf("unexpected message %q", str(e, "message"))
			}
			seen[n]++
		}
		if len(seen) < want {
			return fmt.Errorf("%d distinct lines stored", len(seen))
		}
		return nil
	})
	return seen
}

// TestChecksPrintingMetrics: an agent runs script checks that print
// Prometheus text and Graphite lines; their samples are queried through
// root, the malformed lines are named in the result, and the status still
// comes from the exit code.
func TestChecksPrintingMetrics(t *testing.T) {
	f := newFleet(t, "")
	prom := writeFile(t, f.dir, "queues.sh", `#!/bin/sh
echo "WARNING - orders queue is long"
echo "# HELP mq_queue_messages Messages ready."
echo "# TYPE mq_queue_messages gauge"
echo 'mq_queue_messages{queue="orders"} 1200'
echo 'mq_queue_messages{queue="mails",node="spoofed"} 3'
echo 'mq_queue_messages{queue="broken} 1'
exit 1
`)
	if err := os.Chmod(prom, 0o755); err != nil {
		t.Fatal(err)
	}
	checks := writeFile(t, f.dir, "checks.yaml", fmt.Sprintf(`kind: Check
name: queues
spec: {command: [%s], interval: 1s, metrics_format: prometheus}
`, prom))
	if out, err := f.cli("apply", "-f", checks); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	f.agent("m2", "{}", `  checks:
    - name: backup
      spec: {command: [sh, -c, 'echo "backup.age_seconds 5400"; echo "backup.size_bytes 1.5e9"'], interval: 1s, metrics_format: graphite}
`)

	for _, tc := range []struct {
		expr   string
		want   float64
		labels map[string]string
	}{
		{`mq_queue_messages{queue="orders"}`, 1200, map[string]string{"node": "m2", "check": "queues", "cluster": "c1"}},
		// The script's own node label cannot claim another node.
		{`mq_queue_messages{queue="mails"}`, 3, map[string]string{"node": "m2", "exported_node": "spoofed"}},
		// Prometheus' instance and job, as on every agent series.
		{`backup_age_seconds`, 5400, map[string]string{"node": "m2", "check": "backup", "instance": "m2", "job": "unyo"}},
		{`backup_size_bytes{check="backup"}`, 1.5e9, nil},
	} {
		testutil.Eventually(t, 60*time.Second, tc.expr, func() error {
			v, labels, err := f.value(tc.expr)
			if err != nil {
				return err
			}
			if v != tc.want {
				return fmt.Errorf("%s = %v, want %v", tc.expr, v, tc.want)
			}
			for k, want := range tc.labels {
				if labels[k] != want {
					return fmt.Errorf("%s: label %s = %v, want %q (labels %v)", tc.expr, k, labels[k], want, labels)
				}
			}
			return nil
		})
	}

	testutil.Eventually(t, 30*time.Second, "the check's result", func() error {
		latest, err := f.latest()
		if err != nil {
			return err
		}
		e := latest["m2/queues"]
		if e == nil {
			return fmt.Errorf("no result yet")
		}
		long := str(e, "long_output")
		if str(e, "level") != "warning" || str(e, "output") != "WARNING - orders queue is long" ||
			!strings.Contains(long, `1 malformed prometheus lines ignored: line 6 "mq_queue_messages{queue=\"broken} 1"`) ||
			!strings.Contains(long, "2 samples (prometheus)") {
			return fmt.Errorf("result %v", e)
		}
		return nil
	})
}
