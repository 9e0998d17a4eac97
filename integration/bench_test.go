package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// cpuSeconds reads a process's user+system CPU time from /proc.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	f, err := procStat(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return statSeconds(f[11]) + statSeconds(f[12]) // utime, stime
}

// treeCPUSeconds is the CPU time of a process and all its descendants,
// those that ended included (the kernel adds a reaped child's time to its
// parent's cutime and cstime): a server that works in child processes, as
// PostgreSQL does, is measured whole.
func treeCPUSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	total, _ := treeCPUSplit(tb, pid)
	return total
}

// treeCPUSplit is treeCPUSeconds, and of it the time of the processes of
// the tree alive now, without what their ended children used: for an
// agent or a monitoring daemon, its own CPU without its checks'.
func treeCPUSplit(tb testing.TB, pid int) (total, own float64) {
	tb.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	children := map[int][]int{}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if f, err := procStat(child); err == nil {
			parent, _ := strconv.Atoi(f[1])
			children[parent] = append(children[parent], child)
		}
	}
	for todo := []int{pid}; len(todo) > 0; todo = todo[1:] {
		f, err := procStat(todo[0])
		if err != nil {
			if todo[0] == pid {
				tb.Fatal(err)
			}
			continue // ended since: its time is in its parent's now
		}
		self := statSeconds(f[11]) + statSeconds(f[12])  // utime, stime
		ended := statSeconds(f[13]) + statSeconds(f[14]) // cutime, cstime
		total += self + ended
		own += self
		todo = append(todo, children[todo[0]]...)
	}
	return total, own
}

// procStat returns the fields of /proc/PID/stat after the command name,
// which is in parentheses and may hold spaces: f[0] is field 3 (state).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:]), nil
}

// statSeconds converts clock ticks of /proc/PID/stat to seconds.
func statSeconds(ticks string) float64 {
	v, _ := strconv.ParseFloat(ticks, 64)
	return v / 100 // USER_HZ is 100 on Linux
}

// rssBytes reads a process's resident set size.
func rssBytes(tb testing.TB, pid int) int64 {
	tb.Helper()
	return statusBytes(tb, pid, "VmRSS:")
}

// statusBytes reads a size field (VmRSS:, VmHWM:, ...) of /proc/PID/status.
func statusBytes(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	tb.Fatalf("no %s for pid %d", field, pid)
	return 0
}

// startClusterProcess starts a cluster process on the embedded store; env
// (UNYO_* variables) may change its configuration, tokens and store
// included.
func startClusterProcess(tb testing.TB, env ...string) (*proc, string) {
	return startClusterProcessBin(tb, unyoBin, env...)
}

// startClusterProcessBin is startClusterProcess running the unyo binary at
// bin (a baseline build, in before/after benchmarks).
func startClusterProcessBin(tb testing.TB, bin string, env ...string) (*proc, string) {
	dir := tb.TempDir()
	addr := freeAddr(tb)
	cfg := writeFile(tb, dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s
log: {level: warn}
server:
  listen: %s
cluster:
  name: bench
  default_rules: false # the rules this test applies, and no others
  heartbeat_interval: 10s
  stale_after: 30s
`, dir, addr))
	p := startUnyoBin(tb, bin, "cluster", env, "server", "--config", cfg)
	url := "http://" + addr
	testutil.Eventually(tb, 20*time.Second, "the cluster to answer", func() error {
		// A server without tokens ignores the admin token.
		_, err := cli(tb, url, "--token", adminToken, "status")
		return err
	})
	return p, url
}

// BenchmarkHeartbeats10kAgents: 10,000 nodes heartbeating every 10 s is
// 1,000 heartbeats a second; this reports the cluster process's CPU use
// (cores) while it holds that rate for 20 s on the embedded store.
func BenchmarkHeartbeats10kAgents(b *testing.B) {
	heartbeatBench(b, 10000, 20*time.Second)
}

// BenchmarkHeartbeats50kAgents: 50,000 nodes at a 10 s heartbeat, 5,000
// heartbeats a second, the size where Nomad spreads heartbeat TTLs, for
// 45 s: longer than stale_after (30 s), so a heartbeat handled too late
// would turn its node Stale; "stale" counts those.
func BenchmarkHeartbeats50kAgents(b *testing.B) {
	heartbeatBench(b, 50000, 45*time.Second)
}

// heartbeatBench runs heartbeatLoad on this tree's cluster; with
// UNYO_BENCH_BASELINE naming another unyo binary (one built from main, say)
// it runs it on that one first and then on this one, as sub-benchmarks
// baseline and this, so that one run on a shared machine compares the two.
// With UNYO_BENCH_PERF naming a directory, each cluster is recorded with
// `perf record -g` over the window, into DIR/<benchmark>.perf.data.
func heartbeatBench(b *testing.B, nodes int, window time.Duration) {
	base := os.Getenv("UNYO_BENCH_BASELINE")
	if base == "" {
		heartbeatLoad(b, unyoBin, nodes, window)
		return
	}
	b.Run("baseline", func(b *testing.B) { heartbeatLoad(b, base, nodes, window) })
	b.Run("this", func(b *testing.B) { heartbeatLoad(b, unyoBin, nodes, window) })
}

// perfRecord records pid's profile with perf into UNYO_BENCH_PERF, when it
// is set, until the returned function is called.
func perfRecord(b *testing.B, pid int) (stop func()) {
	dir := os.Getenv("UNYO_BENCH_PERF")
	if dir == "" {
		return func() {}
	}
	out := filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".perf.data")
	cmd := exec.Command("perf", "record", "-g", "-o", out, "-p", strconv.Itoa(pid))
	if err := cmd.Start(); err != nil {
		b.Fatalf("perf record: %v", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
}

// heartbeatLoad registers nodes simulated agents (each sending its first
// heartbeat at once, as an agent does), then sends each node a heartbeat
// every 10 s for window. As agents do, each enrols with the join token and
// then presents its node's own credential, which the cluster verifies on
// every call. It reports the cluster process's CPU (cores; per
// heartbeat; and at the full rate, which a loaded machine's senders may
// not hold), the rate held, failures, and the nodes that turned Stale during the window
// from a late heartbeat: a Stale event stamped after stale_after (30 s)
// into the window can only come from a silence that began inside it, not
// from the registration before.
func heartbeatLoad(b *testing.B, bin string, nodes int, window time.Duration) {
	const interval, staleAfter = 10 * time.Second, 30 * time.Second
	p, url := startClusterProcessBin(b, bin, "UNYO_SERVER_ADMIN_TOKENS="+adminToken, "UNYO_SERVER_JOIN_TOKENS="+joinToken)
	// Agents hold a connection each; a client keeps 16 idle, so the
	// senders share several clients rather than reconnecting. Each sender
	// waits for its answer: 256 of them hold 5,000/s with calls of up to
	// 50 ms on a loaded machine. Registrations (a write each) go 64 at a
	// time: 256 made them time out on a loaded machine.
	const senders, registrars, perClient = 256, 64, 16
	clients := make([]*client.Clients, senders/perClient)
	for i := range clients {
		c, err := client.New(client.Options{URL: url, Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	name := func(i int) string { return fmt.Sprintf("sim-%05d", i) }
	tokens := make([]string, nodes) // each node's own credential
	ctx := context.Background()
	var wg sync.WaitGroup
	names := make(chan int)
	for w := 0; w < registrars; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w/perClient]
			for i := range names {
				n := &unyov1.Node{Name: name(i), Labels: map[string]string{"sim": "yes"}, Capacity: &unyov1.Capacity{Cpus: 8, MemoryBytes: 32 << 30}}
				// An agent retries until it is registered; so do these, on
				// a machine loaded enough for a call to time out.
				var err error
				for range 5 {
					reg := connect.NewRequest(&unyov1.RegisterRequest{Node: n})
					reg.Header().Set("Authorization", "Bearer "+joinToken)
					var resp *connect.Response[unyov1.RegisterResponse]
					if resp, err = c.Agent.Register(ctx, reg); err == nil {
						tokens[i] = resp.Msg.GetNodeToken()
						beat := connect.NewRequest(&unyov1.HeartbeatRequest{Node: name(i)})
						beat.Header().Set("Authorization", "Bearer "+tokens[i])
						_, err = c.Agent.Heartbeat(ctx, beat)
					}
					if err == nil {
						break
					}
				}
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < nodes; i++ {
		names <- i
	}
	close(names)
	wg.Wait()

	b.ResetTimer()
	var sent, failed atomic.Int64
	rate := time.Duration(int64(interval) / int64(nodes)) // between two heartbeats
	stopPerf := perfRecord(b, p.pid())
	cpu0, t0 := cpuSeconds(b, p.pid()), time.Now()
	jobs := make(chan int, 4096)
	for w := 0; w < senders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w/perClient]
			for i := range jobs {
				// As an agent's after its first: plugins and providers
				// unchanged.
				beat := connect.NewRequest(&unyov1.HeartbeatRequest{Node: name(i), PluginsUnchanged: true, ProvidersUnchanged: true})
				beat.Header().Set("Authorization", "Bearer "+tokens[i])
				_, err := c.Agent.Heartbeat(ctx, beat)
				if err != nil {
					failed.Add(1)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	// Every 10 ms, send the heartbeats that are due by then, so the rate
	// holds even when a tick comes late.
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; time.Since(t0) < window; {
		<-tick.C
		for due := int(time.Since(t0) / rate); i < due; i++ {
			jobs <- i % nodes
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	elapsed := time.Since(t0).Seconds()
	cpu := cpuSeconds(b, p.pid()) - cpu0
	b.StopTimer()
	stopPerf()

	// On a loaded machine the senders may not hold the rate: the CPU per
	// heartbeat, and the cores it makes at the full rate, still compare.
	perBeat := cpu / float64(max(sent.Load(), 1))
	b.ReportMetric(cpu/elapsed, "cores")
	b.ReportMetric(perBeat*1e6, "CPU-µs/heartbeat")
	b.ReportMetric(perBeat*float64(nodes)/interval.Seconds(), "cores-at-full-rate")
	b.ReportMetric(float64(sent.Load())/elapsed, "heartbeats/s")
	b.ReportMetric(float64(failed.Load()), "failed")

	// The newest 10,000 liveness events (the most one request returns).
	list := connect.NewRequest(&unyov1.ListEventsRequest{Check: "node-liveness", History: true, Limit: 10000})
	list.Header().Set("Authorization", "Bearer "+adminToken)
	resp, err := clients[0].Events.ListEvents(ctx, list)
	if err != nil {
		b.Fatal(err)
	}
	stale := 0
	for _, e := range resp.Msg.GetEvents() {
		// The judge runs every second: 2 s of slack past stale_after.
		if e.GetStatus() == unyov1.CheckStatus_CHECK_STATUS_WARNING && e.GetStartedAt().AsTime().After(t0.Add(staleAfter+2*time.Second)) {
			stale++
		}
	}
	b.ReportMetric(float64(stale), "stale")
}

// benchAgent is an agent process a footprint benchmark watches, and what
// it has seen of it so far.
type benchAgent struct {
	node   string
	p      *proc
	cpu0   float64 // the process tree's CPU seconds when measuring began
	self0  float64 // of those, the agent process's own
	cpu10  float64 // the same 10 s later, after start-up
	self10 float64
	runs10 int   // check results stored by then
	peak   int64 // RSS over the whole measurement
	steady int64 // RSS from 10 s on
}

// startBenchAgents starts the agent of configuration cfg (with $NODE for
// the node name and $DATA_DIR for its data directory) twice, from installed copies:
// as the agent's own binary, unyo-agent (node NODE, which is what the
// Debian package's unyo-agent.service runs), and as `unyo agent` of the
// one binary (node NODE-one), so that one run shows both.
func startBenchAgents(b *testing.B, node, cfg string) (own, one *benchAgent) {
	b.Helper()
	start := func(node, bin string, args ...string) *benchAgent {
		dir := b.TempDir()
		file := writeFile(b, dir, "agent.yaml", strings.NewReplacer("$NODE", node, "$DATA_DIR", dir).Replace(cfg))
		return &benchAgent{node: node, p: startUnyoBin(b, installedCopy(b, bin), node, nil, append(args, "--config", file)...)}
	}
	return start(node, unyoAgentBin), start(node+"-one", unyoBin, "agent")
}

// begin marks the start of the measurement.
func (a *benchAgent) begin(b *testing.B) {
	a.cpu0, a.self0 = treeCPUSeconds(b, a.p.pid()), cpuSeconds(b, a.p.pid())
}

// sample records the agent's RSS; steady says whether start-up is over.
func (a *benchAgent) sample(b *testing.B, steady bool) {
	rss := rssBytes(b, a.p.pid())
	a.peak = max(a.peak, rss)
	if steady {
		a.steady = max(a.steady, rss)
	}
}

// BenchmarkAgentRSS20Checks: an agent running 20 command checks every 10 s,
// system metrics every 10 s and one tailed log file (a line a second);
// reports its peak resident memory over a minute, sampled every 500 ms,
// and beside it that of Debian's prometheus-node-exporter scraped every
// 10 s in the same minute; steady-* is the peak from 10 s on, after
// start-up. The *-HWM figures are the kernel's high-water marks. The
// agent measured is unyo-agent, the agent's own binary, which the Debian
// package's unit runs on a node; the same agent run as `unyo agent` of
// the one binary is measured in the same minute (one-binary-*). Each runs
// from its own copy of its binary, written to disk, as it is installed on
// a node: sharing the cluster's would share the cluster's page cache.
// CPU per check run is the agent's CPU, its checks' processes, metrics,
// log tailing and heartbeats included, over the check results it stored:
// over the whole minute, start-up included (CPU-ms/check-run), and from
// 10 s on (steady-*), split into the agent process's own
// (steady-agent-*) and its checks' processes' (steady-checks-*: the
// check_dummy processes, from fork to exit).
func BenchmarkAgentRSS20Checks(b *testing.B) {
	exporter := testutil.NeedTool(b, "prometheus-node-exporter", "apt-get install -y prometheus-node-exporter",
		"/usr/bin/prometheus-node-exporter", "prometheus-node-exporter", "node_exporter")
	_, url := startClusterProcess(b)
	var checks strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&checks, "    - {name: c%02d, spec: {command: [check_dummy, \"0\", \"fine %d\"], interval: 10s}}\n", i, i)
	}
	logFile := writeFile(b, b.TempDir(), "app.log", "")
	cfg := fmt.Sprintf(`
role: agent
data_dir: $DATA_DIR
log: {level: warn}
agent:
  node_name: $NODE
  cluster_url: %s
  status_listen: 127.0.0.1:0
  metrics_interval: 10s
  logs:
    - {path: %s, app: bench}
  checks:
%s`, url, logFile, checks.String())
	ne := startNodeExporter(b, exporter)
	own, one := startBenchAgents(b, "rss", cfg)
	agents := []*benchAgent{own, one}
	b.ResetTimer()
	for _, a := range agents {
		a.begin(b)
	}
	var nePeak, neSteady int64
	history := func(a *benchAgent) int {
		runs, err := cliJSON(b, url, "events", "ls", "--node", a.node, "--history", "--limit", "10000")
		if err != nil {
			b.Fatal(err)
		}
		return len(runs)
	}
	log, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	start := time.Now()
	for i := 0; time.Since(start) < time.Minute; i++ {
		steady := time.Since(start) >= 10*time.Second
		for _, a := range agents {
			if steady && a.steady == 0 {
				a.cpu10, a.self10, a.runs10 = treeCPUSeconds(b, a.p.pid()), cpuSeconds(b, a.p.pid()), history(a)
			}
			a.sample(b, steady)
		}
		neRSS := rssBytes(b, ne.pid)
		nePeak = max(nePeak, neRSS)
		if steady {
			neSteady = max(neSteady, neRSS)
		}
		if i%2 == 0 {
			fmt.Fprintf(log, "level=info msg=\"request served\" n=%d\n", i)
		}
		if i%20 == 0 {
			ne.scrape(b)
		}
		time.Sleep(500 * time.Millisecond)
	}
	cpu := make([]float64, len(agents))
	self := make([]float64, len(agents))
	hwm := make([]int64, len(agents))
	for i, a := range agents {
		cpu[i], self[i] = treeCPUSeconds(b, a.p.pid()), cpuSeconds(b, a.p.pid())
		hwm[i] = statusBytes(b, a.p.pid(), "VmHWM:")
	}
	neHWM := statusBytes(b, ne.pid, "VmHWM:")
	b.StopTimer()
	runs := make([]int, len(agents))
	for i, a := range agents {
		events, err := cliJSON(b, url, "events", "ls", "--node", a.node)
		if err != nil {
			b.Fatal(err)
		}
		if len(events) != 20 {
			b.Errorf("%s: %d checks reported, want 20", a.node, len(events))
		}
		runs[i] = history(a)
		if runs[i] <= a.runs10 {
			b.Fatalf("%s: no check results after the first 10 s (%d, then %d)", a.node, a.runs10, runs[i])
		}
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mib(own.peak), "peak-RSS-MiB")
	b.ReportMetric(mib(nePeak), "node-exporter-peak-RSS-MiB")
	b.ReportMetric(float64(own.peak)/float64(nePeak), "RSS-ratio")
	b.ReportMetric(mib(own.steady), "steady-peak-RSS-MiB")
	b.ReportMetric(mib(neSteady), "node-exporter-steady-peak-RSS-MiB")
	b.ReportMetric(float64(own.steady)/float64(neSteady), "steady-RSS-ratio")
	b.ReportMetric(mib(hwm[0]), "HWM-MiB")
	b.ReportMetric(mib(neHWM), "node-exporter-HWM-MiB")
	b.ReportMetric(mib(one.peak), "one-binary-peak-RSS-MiB")
	b.ReportMetric(mib(one.steady), "one-binary-steady-peak-RSS-MiB")
	b.ReportMetric(mib(hwm[1]), "one-binary-HWM-MiB")
	perRun := func(i int, cpu, cpu0 float64, runs0 int) float64 {
		return (cpu - cpu0) * 1000 / float64(runs[i]-runs0)
	}
	b.ReportMetric(perRun(0, cpu[0], own.cpu0, 0), "CPU-ms/check-run")
	b.ReportMetric(perRun(0, cpu[0], own.cpu10, own.runs10), "steady-CPU-ms/check-run")
	b.ReportMetric(perRun(0, self[0], own.self10, own.runs10), "steady-agent-CPU-ms/check-run")
	b.ReportMetric(perRun(0, cpu[0]-self[0], own.cpu10-own.self10, own.runs10), "steady-checks-CPU-ms/check-run")
	b.ReportMetric(perRun(1, cpu[1], one.cpu0, 0), "one-binary-CPU-ms/check-run")
	b.ReportMetric(perRun(1, cpu[1], one.cpu10, one.runs10), "one-binary-steady-CPU-ms/check-run")
}

// BenchmarkAgentIdleCPU: an agent with no checks (system metrics on, as
// by default) for a minute after it started; reports its own CPU time
// over the minute as a percentage of one core: unyo-agent's, and in the
// same minute that of `unyo agent` of the one binary.
func BenchmarkAgentIdleCPU(b *testing.B) {
	_, url := startClusterProcess(b)
	own, one := startBenchAgents(b, "idle", fmt.Sprintf(`
role: agent
data_dir: $DATA_DIR
log: {level: warn}
agent:
  node_name: $NODE
  cluster_url: %s
  status_listen: 127.0.0.1:0
`, url))
	for _, a := range []*benchAgent{own, one} {
		testutil.Eventually(b, 30*time.Second, "the agent to register", func() error {
			_, err := cli(b, url, "nodes", "get", a.node)
			return err
		})
	}
	b.ResetTimer()
	own.begin(b)
	one.begin(b)
	t0 := time.Now()
	time.Sleep(time.Minute)
	pct := func(a *benchAgent) float64 {
		return (cpuSeconds(b, a.p.pid()) - a.self0) / time.Since(t0).Seconds() * 100
	}
	b.ReportMetric(pct(own), "idle-CPU-%")
	b.ReportMetric(pct(one), "one-binary-idle-CPU-%")
}

// installedCopy copies bin (unyoBin or unyoAgentBin) to a file of its own,
// synced to disk, as a package installs it on a node.
func installedCopy(tb testing.TB, bin string) string {
	tb.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), filepath.Base(bin))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		tb.Fatal(err)
	}
	return path
}

// nodeExporter is a prometheus-node-exporter process started by a benchmark.
type nodeExporter struct {
	pid int
	url string
}

// startNodeExporter starts Debian's node exporter with its default
// collectors on a free port, and stops it when the benchmark ends.
func startNodeExporter(tb testing.TB, bin string) *nodeExporter {
	tb.Helper()
	addr := freeAddr(tb)
	cmd := exec.Command(bin, "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ne := &nodeExporter{pid: cmd.Process.Pid, url: "http://" + addr + "/metrics"}
	testutil.Eventually(tb, 20*time.Second, "node exporter to answer", func() error {
		return ne.get()
	})
	return ne
}

func (ne *nodeExporter) get() error {
	resp, err := http.Get(ne.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node exporter: %s", resp.Status)
	}
	return nil
}

func (ne *nodeExporter) scrape(tb testing.TB) {
	tb.Helper()
	if err := ne.get(); err != nil {
		tb.Fatal(err)
	}
}
