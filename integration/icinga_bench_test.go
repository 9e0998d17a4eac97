package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// BenchmarkCheckRunsBesideIcinga: the CPU one check run costs, unyo's agent
// beside Debian's Icinga 2 (icinga2-bin) in the same window, both running
// the same 20 check_dummy checks at the same interval: every 10 s (2 runs a
// second, where the agent's fixed costs weigh: system metrics, heartbeats,
// one delivery a second) and every 1 s (20 runs a second). Each is
// measured over the same 40 s, after 12 s of start-up, as the CPU time of
// its whole process tree (the check_dummy processes included) over the
// check runs it finished in that window. The agent's runs are the results
// the cluster stored with a start time inside the window; Icinga's are
// the lines its PerfdataWriter wrote for results inside the window, read
// after it stopped (the writer buffers). The *-own-* figures are
// the CPU of the agent's and Icinga's processes without their checks'.
// Besides the agent's defaults (system metrics every 10 s, heartbeats),
// each run is spooled durably and delivered to a cluster; Icinga keeps
// its results in memory and writes them to its perfdata file.
func BenchmarkCheckRunsBesideIcinga(b *testing.B) {
	icinga := testutil.NeedTool(b, "icinga2", "apt-get install -y icinga2-bin", "/usr/sbin/icinga2", "icinga2")
	dummy := testutil.NeedTool(b, "check_dummy", "apt-get install -y monitoring-plugins-basic", "/usr/lib/nagios/plugins/check_dummy")
	_, url := startClusterProcess(b)
	for _, interval := range []time.Duration{10 * time.Second, time.Second} {
		b.Run("interval="+interval.String(), func(b *testing.B) {
			node := fmt.Sprintf("icinga-beside-%s", interval)
			var checks strings.Builder
			for i := range 20 {
				fmt.Fprintf(&checks, "    - {name: c%02d, spec: {command: [check_dummy, \"0\", \"fine %d\"], interval: %s}}\n", i, i, interval)
			}
			dir := b.TempDir()
			cfg := writeFile(b, dir, "agent.yaml", fmt.Sprintf(`
role: agent
data_dir: %s
log: {level: warn}
agent:
  node_name: %s
  cluster_url: %s
  status_listen: 127.0.0.1:0
  checks:
%s`, dir, node, url, checks.String()))
			agent := startUnyoBin(b, installedCopy(b, unyoAgentBin), node, nil, "--config", cfg)
			ic := startIcinga(b, icinga, dummy, 20, interval)
			b.ResetTimer()
			time.Sleep(12 * time.Second) // start-up: every check has run
			t0 := nextSecond()
			agent0, agentOwn0 := treeCPUSplit(b, agent.pid())
			ic0, icOwn0 := treeCPUSplit(b, ic.pid())
			time.Sleep(time.Until(t0.Add(40 * time.Second)))
			t1 := time.Now()
			agent1, agentOwn1 := treeCPUSplit(b, agent.pid())
			ic1, icOwn1 := treeCPUSplit(b, ic.pid())
			b.StopTimer()
			// Whole seconds, as Icinga's perfdata lines carry them.
			from, to := t0.Unix(), t1.Truncate(time.Second).Unix()
			// The cluster stores what the agent sends within a second.
			var agentRuns int
			testutil.Eventually(b, 20*time.Second, "the agent's results up to the window's end to reach the cluster", func() error {
				runs, err := cliJSON(b, url, "events", "ls", "--node", node, "--history", "--limit", "10000")
				if err != nil {
					return err
				}
				agentRuns = 0
				newest := int64(0)
				for _, r := range runs {
					at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["started_at"]))
					if err != nil {
						return fmt.Errorf("result %v: %w", r["id"], err)
					}
					newest = max(newest, at.Unix())
					if at.Unix() >= from && at.Unix() < to {
						agentRuns++
					}
				}
				if newest < to {
					return fmt.Errorf("newest result started at %d, window ends at %d", newest, to)
				}
				return nil
			})
			ic.stop(syscall.SIGTERM, 20*time.Second) // flushes its perfdata file
			icRuns := icingaRuns(b, ic.perfdata, from, to)
			// 20 checks over 40 s: anything far from it is a broken run, not a figure.
			want := 20 * 40 / int(interval/time.Second)
			for name, n := range map[string]int{"unyo agent": agentRuns, "icinga2": icRuns} {
				if n < want*8/10 || n > want*12/10 {
					b.Fatalf("%s finished %d check runs in the window, want about %d", name, n, want)
				}
			}
			perRun := func(cpu float64, runs int) float64 { return cpu * 1000 / float64(runs) }
			unyo, icin := perRun(agent1-agent0, agentRuns), perRun(ic1-ic0, icRuns)
			b.ReportMetric(unyo, "unyo-CPU-ms/check-run")
			b.ReportMetric(perRun(agentOwn1-agentOwn0, agentRuns), "unyo-agent-own-CPU-ms/check-run")
			b.ReportMetric(icin, "icinga2-CPU-ms/check-run")
			b.ReportMetric(perRun(icOwn1-icOwn0, icRuns), "icinga2-own-CPU-ms/check-run")
			b.ReportMetric(unyo/icin, "unyo/icinga2")
			b.ReportMetric(float64(agentRuns), "unyo-runs")
			b.ReportMetric(float64(icRuns), "icinga2-runs")
		})
	}
}

// nextSecond sleeps until the next whole second and returns it.
func nextSecond() time.Time {
	t := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(t))
	return t
}

// icingaProc is an Icinga 2 daemon a benchmark started.
type icingaProc struct {
	*proc
	perfdata string // its PerfdataWriter's file of service results
}

// startIcinga starts Icinga 2 in the foreground on a configuration of its
// own in a temporary directory: n services on one host, each running
// check_dummy every interval, and a PerfdataWriter to count their results.
// It runs as the current user with every path under that directory.
func startIcinga(tb testing.TB, icinga, dummy string, n int, interval time.Duration) *icingaProc {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range []string{"lib", "log", "cache", "spool", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	perfdata := filepath.Join(dir, "spool", "service-perfdata")
	conf := writeFile(tb, dir, "icinga2.conf", fmt.Sprintf(`
object CheckCommand "bench-dummy" {
  command = [ %[1]q, "0", "fine $service.name$" ]
}
object CheckerComponent "checker" { }
object PerfdataWriter "perfdata" {
  service_temp_path = %[2]q
  service_perfdata_path = %[2]q
  host_temp_path = %[3]q
  host_perfdata_path = %[3]q
  rotation_interval = 1h
}
object Host "bench" { check_command = "bench-dummy"; enable_active_checks = false }
for (i in range(%[4]d)) {
  object Service "c" + i {
    host_name = "bench"
    check_command = "bench-dummy"
    check_interval = %[5]ds
    retry_interval = %[5]ds
  }
}
`, dummy, perfdata, filepath.Join(dir, "spool", "host-perfdata"), n, int(interval/time.Second)))
	user, group := "root", "root"
	if os.Getuid() != 0 {
		user, group = strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	}
	args := []string{"daemon", "-c", conf, "-x", "warning",
		"-DConfigDir=" + dir, "-DDataDir=" + filepath.Join(dir, "lib"), "-DLogDir=" + filepath.Join(dir, "log"),
		"-DCacheDir=" + filepath.Join(dir, "cache"), "-DSpoolDir=" + filepath.Join(dir, "spool"),
		"-DInitRunDir=" + filepath.Join(dir, "run"), "-DRunAsUser=" + user, "-DRunAsGroup=" + group}
	p := startUnyoBin(tb, icinga, "icinga2", nil, args...)
	testutil.Eventually(tb, 30*time.Second, "icinga2 to write its first check results", func() error {
		if p.exited() {
			data, _ := os.ReadFile(p.log)
			tb.Fatalf("icinga2 exited: %s", data)
		}
		_, err := os.Stat(perfdata)
		return err
	})
	return &icingaProc{proc: p, perfdata: perfdata}
}

// icingaRuns counts the service results in Icinga's perfdata files (the
// one it writes and those it rotated at shutdown: PATH.TIMESTAMP) whose
// time (TIMET::, whole seconds) is in [from, to).
func icingaRuns(tb testing.TB, path string, from, to int64) int {
	tb.Helper()
	files, err := filepath.Glob(path + "*")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no perfdata file %s*: %v", path, err)
	}
	n := 0
	for _, file := range files {
		n += icingaRunsIn(tb, file, from, to)
	}
	return n
}

func icingaRunsIn(tb testing.TB, path string, from, to int64) int {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, field := range strings.Split(sc.Text(), "\t") {
			if v, ok := strings.CutPrefix(field, "TIMET::"); ok {
				at, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					tb.Fatalf("%s: %q: %v", path, sc.Text(), err)
				}
				if at >= from && at < to {
					n++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}
