package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to find a table's pages in the cluster's database

	"github.com/unyo-ops/unyo/core/spool"
	"github.com/unyo-ops/unyo/core/testutil"
)

// The fault matrix: each test injects one fault into real processes and
// counts results produced against results stored (none lost unless the
// fault made it unavoidable and says so, none doubled), and checks that
// the fault is named in the logs.

// sqliteCluster starts one cluster on SQLite, without root; operator
// commands go to it directly.
func sqliteCluster(t *testing.T) *fleet {
	t.Helper()
	return sqliteClusterEnv(t, nil)
}

// sqliteClusterEnv is sqliteCluster with env added to the cluster's
// environment.
func sqliteClusterEnv(t *testing.T, env []string) *fleet {
	t.Helper()
	return sqliteClusterLiveness(t, env, 5*time.Second)
}

// sqliteClusterLiveness is sqliteClusterEnv with nodes turning Stale after
// staleAfter (under a minute: Down stays at its default 90s).
func sqliteClusterLiveness(t *testing.T, env []string, staleAfter time.Duration) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir(), agents: map[string]*proc{}}
	addr := freeAddr(t)
	f.clURL = "http://" + addr
	f.api = f.clURL
	cfg := writeFile(t, f.dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
store:
  driver: sqlite
  history_per_check: 100000
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  heartbeat_interval: 1s
  stale_after: %s
  lease_ttl: 3s
metrics: {store: none}
logs: {store: none}
`, f.dir, addr, adminToken, joinToken, staleAfter))
	f.cluster = startUnyo(t, "cluster", env, "server", "--config", cfg)
	if env == nil {
		f.waitClusterUp()
	}
	return f
}

func (f *fleet) waitClusterUp() {
	f.t.Helper()
	testutil.Eventually(f.t, 30*time.Second, "the cluster to answer", func() error {
		_, err := f.cli("nodes", "ls")
		return err
	})
}

func (f *fleet) dbPath() string { return filepath.Join(f.dir, "cluster", "state.db") }

// faultAgent starts an agent with env added to its environment, a fixed
// status address (reachable while the cluster is down) and extra YAML
// under agent:. It returns the status URL.
func (f *fleet) faultAgent(name string, env []string, extra string) (*proc, string) {
	f.t.Helper()
	status := freeAddr(f.t)
	cfg := writeFile(f.t, f.dir, name+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  token: %s
  flush_interval: 100ms
  status_listen: %s
  metrics_interval: 0s
%s`, f.dir, name, name, f.clURL, joinToken, status, extra))
	p := startUnyo(f.t, name, env, "agent", "--config", cfg)
	f.agents[name] = p
	return p, "http://" + status + "/status"
}

// paddedCounterCheck is counterCheck with 1.5 KB of long output per run,
// so that a few runs fill a page of a small disk.
func paddedCounterCheck(state string) string {
	return fmt.Sprintf(`  checks:
    - name: counter
      spec:
        command: [sh, -c, 'n=$(( $(cat %s 2>/dev/null || echo 0) + 1 )); echo $n > %s; echo "OK - run $n"; head -c 1500 /dev/zero | tr "\\0" x']
        interval: 1s
`, state, state)
}

func counterRuns(t *testing.T, state string) int {
	t.Helper()
	b, _ := os.ReadFile(state)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// storedRuns maps each stored run number of node's counter check to how
// many times it is stored.
func (f *fleet) storedRuns(node string) map[int]int {
	f.t.Helper()
	seen := map[int]int{}
	for _, e := range f.history(node, "counter") {
		n, err := strconv.Atoi(strings.TrimPrefix(str(e, "output"), "OK - run "))
		if err != nil {
			f.t.Fatalf("unexpected output %q", str(e, "output"))
		}
		seen[n]++
	}
	return seen
}

func readStatus(url string) (map[string]any, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st map[string]any
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func num(m map[string]any, path ...string) float64 {
	for _, k := range path[:len(path)-1] {
		m, _ = m[k].(map[string]any)
	}
	v, _ := m[path[len(path)-1]].(float64)
	return v
}

func logOf(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFaultAgentKilledMidWrite: the agent dies by SIGKILL in the middle of
// writing its 4th result to the spool (the spool-append-mid failpoint).
// After a restart it says the previous run ended mid-write and what it
// replays; the torn result is the only one missing, nothing is doubled.
func TestFaultAgentKilledMidWrite(t *testing.T) {
	f := sqliteCluster(t)
	state := f.dir + "/counter"
	p, _ := f.faultAgent("a1", []string{spool.FailpointEnv + "=spool-append-mid:4"}, counterCheck(state))
	testutil.Eventually(t, 30*time.Second, "the agent to kill itself mid-write", func() error {
		if !p.exited() {
			return fmt.Errorf("still running after %d runs", counterRuns(t, state))
		}
		return nil
	})
	p.env = nil
	p.restart()
	testutil.Eventually(t, 30*time.Second, "the agent to name the interrupted write", func() error {
		l := logOf(t, p)
		for _, want := range []string{"the previous run ended in the middle of writing to the spool", "torn_tail_bytes="} {
			if !strings.Contains(l, want) {
				return fmt.Errorf("log does not say %q yet", want)
			}
		}
		return nil
	})
	var last int
	testutil.Eventually(t, 60*time.Second, "the runs after the restart to be stored", func() error {
		last = counterRuns(t, state)
		seen := f.storedRuns("a1")
		if last < 8 {
			return fmt.Errorf("%d runs", last)
		}
		for n := 1; n < last; n++ { // the last run may still be in flight
			if n != 4 && seen[n] == 0 {
				return fmt.Errorf("run %d of %d not stored yet", n, last)
			}
		}
		return nil
	})
	seen := f.storedRuns("a1")
	for n, k := range seen {
		if k != 1 {
			t.Errorf("run %d stored %d times", n, k)
		}
	}
	if seen[4] != 0 {
		t.Errorf("run 4, torn by the kill, is stored")
	}
	t.Logf("%d runs, %d stored; run 4 torn by the kill", last, len(seen))
}

// TestFaultDamagedSpoolRecord: one result in the middle of the agent's
// spool segment is damaged while the agent is stopped. After the restart
// exactly that result is missing, the ones after it are delivered, and the
// agent's log names the segment file and the record's offset.
func TestFaultDamagedSpoolRecord(t *testing.T) {
	f := sqliteCluster(t)
	f.cluster.stop(syscall.SIGTERM, 10*time.Second) // results pile up in the spool
	state := f.dir + "/counter"
	p, _ := f.faultAgent("a1", nil, counterCheck(state))
	testutil.Eventually(t, 30*time.Second, "six spooled runs", func() error {
		if n := counterRuns(t, state); n < 6 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	p.stop(syscall.SIGTERM, 10*time.Second)
	runs := counterRuns(t, state)

	segs, err := filepath.Glob(filepath.Join(f.dir, "a1", "spool", "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("spool segments: %v, %v", segs, err)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Records start with the spool's record marker (recordMarker in
	// core/spool/format.go): damage the payload of the third (run 3).
	marker := "\xf7RE\xc5"
	at := 0
	for range 3 {
		i := strings.Index(string(data[at+1:]), marker)
		if i < 0 {
			t.Fatalf("fewer than 3 records in %s", segs[0])
		}
		at += 1 + i
	}
	data[at+30] ^= 0x40
	if err := os.WriteFile(segs[0], data, 0o600); err != nil {
		t.Fatal(err)
	}

	f.cluster.restart()
	f.waitClusterUp()
	p.restart()
	testutil.Eventually(t, 60*time.Second, "the intact spooled runs to be stored", func() error {
		seen := f.storedRuns("a1")
		for n := 1; n <= runs; n++ {
			if n != 3 && seen[n] == 0 {
				return fmt.Errorf("run %d of %d not stored yet", n, runs)
			}
		}
		return nil
	})
	for n, k := range f.storedRuns("a1") {
		if k != 1 || n == 3 {
			t.Errorf("run %d stored %d times", n, k)
		}
	}
	l := logOf(t, p)
	for _, want := range []string{"skipped it and resumed at the next intact record", "file=" + segs[0],
		fmt.Sprintf("offset=%d", at), `found="checksum mismatch"`} {
		if !strings.Contains(l, want) {
			t.Errorf("the agent's log does not say %q", want)
		}
	}
}

// smallDisk mounts a tmpfs of size on a new directory and unmounts it when
// the test ends. It needs root: it skips otherwise, unless CI=true.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "mounting a small disk needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.Unavailable(t, fmt.Sprintf("mount a tmpfs: %v: %s", err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes dir/filler until the disk is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	fl, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := fl.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// TestFaultSpoolDiskFullClusterDown: the spool's disk is full while the
// cluster is down. Results wait in the agent's memory buffer (5 here); the
// oldest beyond it are dropped, counted in /status and reported as an
// agent-spool event once the cluster is back. Every run is either stored
// once or counted as dropped.
func TestFaultSpoolDiskFullClusterDown(t *testing.T) {
	disk := smallDisk(t, "64k")
	f := sqliteCluster(t)
	state := f.dir + "/counter"
	p, status := f.faultAgent("a1", nil, paddedCounterCheck(state)+fmt.Sprintf("  spool_dir: %s/spool\n  result_buffer_records: 5\n", disk))
	testutil.Eventually(t, 30*time.Second, "the first results", func() error {
		if n := len(f.storedRuns("a1")); n < 2 {
			return fmt.Errorf("%d stored", n)
		}
		return nil
	})

	f.cluster.stop(syscall.SIGTERM, 10*time.Second)
	filler := fillDisk(t, disk)
	testutil.Eventually(t, 90*time.Second, "results to be dropped from the full memory buffer", func() error {
		st, err := readStatus(status)
		if err != nil {
			return err
		}
		if d := num(st, "result_buffer", "dropped_records"); d < 3 {
			return fmt.Errorf("%v dropped, buffer %v", d, st["result_buffer"])
		}
		return nil
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.cluster.restart()
	f.waitClusterUp()

	var dropped float64
	testutil.Eventually(t, 60*time.Second, "the buffer and the spool to drain and the drops to be reported", func() error {
		st, err := readStatus(status)
		if err != nil {
			return err
		}
		if n := num(st, "result_buffer", "records") + num(st, "spool", "PendingRecords"); n != 0 {
			return fmt.Errorf("%v results waiting", n)
		}
		dropped = num(st, "result_buffer", "dropped_records")
		if len(f.history("a1", "agent-spool")) == 0 {
			return errors.New("no agent-spool event yet")
		}
		return nil
	})
	// Every run before the last stored one is stored once or was dropped.
	seen := f.storedRuns("a1")
	maxRun, missing := 0, 0
	for n, k := range seen {
		maxRun = max(maxRun, n)
		if k != 1 {
			t.Errorf("run %d stored %d times", n, k)
		}
	}
	for n := 1; n < maxRun; n++ {
		if seen[n] == 0 {
			missing++
		}
	}
	if float64(missing) != dropped {
		t.Errorf("%d runs missing, %v counted as dropped", missing, dropped)
	}
	reported := 0
	re := regexp.MustCompile(`dropped (\d+) check results`)
	for _, e := range f.history("a1", "agent-spool") {
		m := re.FindStringSubmatch(str(e, "output"))
		if m == nil || !strings.Contains(str(e, "output"), "no space left on device") || str(e, "level") != "critical" {
			t.Errorf("agent-spool event: %v", e)
			continue
		}
		k, _ := strconv.Atoi(m[1])
		reported += k
	}
	if float64(reported) != dropped {
		t.Errorf("agent-spool events report %d dropped, /status %v", reported, dropped)
	}
	if l := logOf(t, p); !strings.Contains(l, "cannot write a check result to the spool") || !strings.Contains(l, "dropped the oldest results") {
		t.Errorf("the agent's log does not name the fault")
	}
	t.Logf("runs up to %d: %d stored, %d dropped and reported", maxRun, len(seen), missing)
}

// loadUntil reports results with a load generator until n are acknowledged,
// and returns it.
func (f *fleet) loadUntil(n int) *loadgen {
	f.t.Helper()
	return f.loadMore(&loadgen{node: "loadgen", url: f.clURL, ids: map[string]bool{}}, n)
}

// loadMore runs load until n of its results in all are acknowledged.
func (f *fleet) loadMore(load *loadgen, n int) *loadgen {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); load.run(ctx, f.t) }()
	testutil.Eventually(f.t, 60*time.Second, "acknowledged load", func() error {
		if a := load.acked(); a < n {
			return fmt.Errorf("%d acknowledged", a)
		}
		return nil
	})
	cancel()
	wg.Wait()
	return load
}

// TestFaultDamagedSQLitePage: a damaged page in the cluster's SQLite file
// makes the cluster refuse to start, naming the file and what to do.
func TestFaultDamagedSQLitePage(t *testing.T) {
	f := sqliteCluster(t)
	f.loadUntil(1000)
	f.cluster.stop(syscall.SIGTERM, 10*time.Second)

	db, err := sql.Open("sqlite", "file:"+f.dbPath()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var page int64
	err = db.QueryRow("SELECT rootpage FROM sqlite_master WHERE name = 'events'").Scan(&page)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	fl, err := os.OpenFile(f.dbPath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", 1024)), (page-1)*4096); err != nil {
		t.Fatal(err)
	}
	fl.Close()

	f.cluster.restart()
	testutil.Eventually(t, 30*time.Second, "the cluster to refuse the damaged store", func() error {
		if !f.cluster.exited() {
			return errors.New("still running")
		}
		return nil
	})
	l := logOf(t, f.cluster)
	for _, want := range []string{f.dbPath(), "the database file is damaged", "quick_check", "does not serve from a damaged store", "restore the last backup"} {
		if !strings.Contains(l, want) {
			t.Errorf("the cluster's log does not say %q", want)
		}
	}
}

// TestFaultZeroedWALHeader: the cluster is killed and its SQLite WAL header
// zeroed, which silently drops every commit in the WAL. At the restart the
// cluster compares its acknowledged-events mark with the store and says
// loudly how many acknowledged events are missing, in an ERROR log and a
// cluster-store event.
func TestFaultZeroedWALHeader(t *testing.T) {
	f := sqliteCluster(t)
	// A clean stop checkpoints the first events into the database file;
	// the later ones are only in the WAL when the cluster is killed.
	load := f.loadUntil(500)
	f.cluster.stop(syscall.SIGTERM, 10*time.Second)
	f.cluster.restart()
	f.waitClusterUp()
	f.loadMore(load, 1000)
	f.cluster.kill()
	wal := f.dbPath() + "-wal"
	fl, err := os.OpenFile(wal, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.WriteAt(make([]byte, 32), 0); err != nil {
		t.Fatal(err)
	}
	fl.Close()

	f.cluster.restart()
	f.waitClusterUp()
	stored := 0
	for _, e := range f.history("loadgen", "load") {
		if load.ids[str(e, "id")] {
			stored++
		}
	}
	lost := load.acked() - stored
	if lost == 0 || stored == 0 {
		t.Fatalf("%d of %d acknowledged events stored after zeroing the WAL header; the test did not inject its fault as meant", stored, load.acked())
	}
	l := logOf(t, f.cluster)
	m := regexp.MustCompile(`level=ERROR msg="the store lost events it had acknowledged to agents" .*?missing=(\d+)`).FindStringSubmatch(l)
	if m == nil {
		t.Fatalf("no ERROR about the lost acknowledged events in the cluster's log")
	}
	if missing, _ := strconv.Atoi(m[1]); missing < lost {
		t.Errorf("the log says %d acknowledged events are missing; %d of the load generator's alone are", missing, lost)
	}
	ev := f.history("c1", "cluster-store")
	if len(ev) != 1 || str(ev[0], "level") != "critical" || !strings.Contains(str(ev[0], "output"), "lost up to") {
		t.Fatalf("cluster-store events: %v", ev)
	}
	t.Logf("%d acknowledged, %d stored after the fault, reported: %s", load.acked(), stored, m[0])
}

// TestFaultClusterKilledAtWritePoints: the cluster dies by SIGKILL while it
// takes a report from an agent, just before storing it and just after
// storing it (before the agent hears so). The agent keeps its results and
// sends them again to the restarted cluster: none is lost, none doubled
// (the second case is what the results' idempotency keys are for), and the
// restarted cluster finds every acknowledged result in its store.
func TestFaultClusterKilledAtWritePoints(t *testing.T) {
	for _, point := range []string{"ingest-before-commit", "ingest-after-commit"} {
		t.Run(point, func(t *testing.T) {
			f := sqliteClusterEnv(t, []string{"UNYO_FAILPOINT=" + point + ":3"})
			state := f.dir + "/counter"
			f.faultAgent("a1", nil, counterCheck(state))
			testutil.Eventually(t, 60*time.Second, "the cluster to die at "+point, func() error {
				if !f.cluster.exited() {
					return fmt.Errorf("still running after %d runs", counterRuns(t, state))
				}
				return nil
			})
			killedAt := counterRuns(t, state)
			f.cluster.env = nil
			f.cluster.restart()
			f.waitClusterUp()
			var last int
			testutil.Eventually(t, 60*time.Second, "every run to be stored", func() error {
				last = counterRuns(t, state)
				if last < killedAt+3 {
					return fmt.Errorf("%d runs", last)
				}
				seen := f.storedRuns("a1")
				for n := 1; n < last; n++ { // the last run may still be in flight
					if seen[n] == 0 {
						return fmt.Errorf("run %d of %d not stored yet", n, last)
					}
				}
				return nil
			})
			for n, k := range f.storedRuns("a1") {
				if k != 1 {
					t.Errorf("run %d stored %d times", n, k)
				}
			}
			// The log holds both runs: the first start's check, and the
			// restarted one's after the kill.
			if n := strings.Count(logOf(t, f.cluster), "the store holds every event acknowledged to agents"); n != 2 {
				t.Errorf("the cluster checked its store against what it acknowledged %d times, want once per start (2)", n)
			}
			t.Logf("killed at %s after %d runs; %d runs, each stored once", point, killedAt, last)
		})
	}
}
