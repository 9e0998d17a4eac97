package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
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
	var sum float64
	for todo := []int{pid}; len(todo) > 0; todo = todo[1:] {
		f, err := procStat(todo[0])
		if err != nil {
			if todo[0] == pid {
				tb.Fatal(err)
			}
			continue // ended since: its time is in its parent's now
		}
		for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			sum += statSeconds(f[i])
		}
		todo = append(todo, children[todo[0]]...)
	}
	return sum
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
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	tb.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// startClusterProcess starts a cluster process on the embedded store; env
// (UNYO_* variables) may change its configuration, tokens and store
// included.
func startClusterProcess(tb testing.TB, env ...string) (*proc, string) {
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
	p := startUnyo(tb, "cluster", env, "server", "--config", cfg)
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
	const nodes, interval, window = 10000, 10 * time.Second, 20 * time.Second
	p, url := startClusterProcess(b)
	c, err := client.New(client.Options{URL: url, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	names := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				n := &unyov1.Node{Name: fmt.Sprintf("sim-%05d", i), Labels: map[string]string{"sim": "yes"}, Capacity: &unyov1.Capacity{Cpus: 8, MemoryBytes: 32 << 30}}
				if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
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
	rate := time.Duration(int64(interval) / nodes) // one heartbeat every 1 ms
	cpu0, t0 := cpuSeconds(b, p.pid()), time.Now()
	jobs := make(chan int, 1024)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				_, err := c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: fmt.Sprintf("sim-%05d", i)}))
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
	b.ReportMetric((cpuSeconds(b, p.pid())-cpu0)/elapsed, "cores")
	b.ReportMetric(float64(sent.Load())/elapsed, "heartbeats/s")
	b.ReportMetric(float64(failed.Load()), "failed")
}

// BenchmarkAgentRSS20Checks: an agent running 20 command checks every 10 s;
// reports its peak resident memory over a minute.
func BenchmarkAgentRSS20Checks(b *testing.B) {
	_, url := startClusterProcess(b)
	var checks strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&checks, "    - {name: c%02d, spec: {command: [check_dummy, \"0\", \"fine %d\"], interval: 10s}}\n", i, i)
	}
	dir := b.TempDir()
	cfg := writeFile(b, dir, "agent.yaml", fmt.Sprintf(`
role: agent
data_dir: %s
log: {level: warn}
agent:
  node_name: rss
  cluster_url: %s
  status_listen: 127.0.0.1:0
  checks:
%s`, dir, url, checks.String()))
	a := startUnyo(b, "agent", nil, "agent", "--config", cfg)
	b.ResetTimer()
	var peak int64
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		peak = max(peak, rssBytes(b, a.pid()))
		time.Sleep(500 * time.Millisecond)
	}
	events, err := cliJSON(b, url, "events", "ls", "--node", "rss")
	if err != nil {
		b.Fatal(err)
	}
	if len(events) != 20 {
		b.Errorf("%d checks reported, want 20", len(events))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}
