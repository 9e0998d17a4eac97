package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

const (
	adminToken = "admin-secret-for-tests"
	joinToken  = "join-secret-for-tests"
)

// fleet is a root, one cluster on PostgreSQL and any number of agents, each
// a separate unyo process.
type fleet struct {
	t       *testing.T
	dir     string
	pg      *testpg.Server
	rootURL string
	// api is where operator commands go: root, unless a test talks to a
	// cluster replica directly.
	api     string
	cluster *proc
	clURL   string
	// clusterToken is cluster c1's credential at root.
	clusterToken string
	agents       map[string]*proc
}

// sharedStores is the fleet's cluster YAML for replicas that may share the
// database: no metrics or logs in process (a second replica with embedded
// stores refuses to start).
const sharedStores = "metrics: {store: none}\nlogs: {store: none}\n"

func newFleet(t *testing.T, clusterExtra string) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir(), pg: testpg.New(t), agents: map[string]*proc{}}
	rootAddr, clAddr := freeAddr(t), freeAddr(t)
	f.rootURL, f.clURL = "http://"+rootAddr, "http://"+clAddr
	f.api = f.rootURL
	rootCfg := writeFile(t, f.dir, "root.yaml", fmt.Sprintf(`
role: root
data_dir: %s/root
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
`, f.dir, rootAddr, adminToken, joinToken))
	startUnyo(t, "root", nil, "server", "--config", rootCfg)
	// The cluster registers with the credential an admin issued for it.
	clusterToken := f.addCluster("c1")
	f.clusterToken = clusterToken
	clCfg := writeFile(t, f.dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
store:
  driver: postgres
  dsn: %s
  history_per_check: 100000
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  root_url: %s
  # A join token may no longer register a cluster; until clusters have
  # their own credentials, the cluster registers with root's admin token.
  root_token: %s
  heartbeat_interval: 1s
  stale_after: 5s
  lease_ttl: 3s
  api_hook: {allow: [127.0.0.1/32]} # the tests' hook receivers
%s`, f.dir, clAddr, adminToken, joinToken, f.pg.DSN(), f.rootURL, clusterToken, clusterExtra))
	f.cluster = startUnyo(t, "cluster", nil, "server", "--config", clCfg)
	testutil.Eventually(t, 30*time.Second, "the cluster to register at root", func() error {
		out, err := f.cli("clusters", "ls")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "c1") || !strings.Contains(out, "yes") {
			return fmt.Errorf("clusters ls: %s", out)
		}
		return nil
	})
	return f
}

// agent starts an agent with labels and extra YAML under `agent:`.
func (f *fleet) agent(name, labels, extra string) *proc {
	f.t.Helper()
	cfg := writeFile(f.t, f.dir, name+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  token: %s
  labels: %s
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
%s`, f.dir, name, name, f.clURL, joinToken, labels, extra))
	p := startUnyo(f.t, name, nil, "agent", "--config", cfg)
	f.agents[name] = p
	return p
}

func (f *fleet) cli(args ...string) (string, error) {
	return cli(f.t, f.api, append([]string{"--token", adminToken}, args...)...)
}

func (f *fleet) json(args ...string) ([]map[string]any, error) {
	return cliJSON(f.t, f.api, append([]string{"--token", adminToken}, args...)...)
}

// latest returns the latest event per "node/check".
func (f *fleet) latest() (map[string]map[string]any, error) {
	items, err := f.json("events", "ls")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, e := range items {
		out[fmt.Sprint(e["node"], "/", e["check"])] = e
	}
	return out, nil
}

// agentStatus reads an agent's status endpoint, found through its node's address.
func (f *fleet) agentStatus(node string) (map[string]any, error) {
	nodes, err := f.json("nodes", "get", node)
	if err != nil {
		return nil, err
	}
	if len(nodes) != 1 {
		return nil, fmt.Errorf("nodes get %s: %d answers", node, len(nodes))
	}
	resp, err := http.Get("http://" + fmt.Sprint(nodes[0]["address"]) + "/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st map[string]any
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func str(m map[string]any, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

func TestEndToEnd(t *testing.T) {
	f := newFleet(t, "")
	f.agent("web1", "{role: web}", "")
	f.agent("db1", "{role: db}", `  checks:
    - name: local-only
      spec:
        command: [check_dummy, "0", "db1 local check"]
        interval: 1s
`)
	testutil.Eventually(t, 30*time.Second, "both nodes Ready", func() error {
		nodes, err := f.json("nodes", "ls")
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if str(n, "state") == "ready" && str(n, "cluster") == "c1" {
				ready++
			}
		}
		if ready != 2 {
			return fmt.Errorf("%d of 2 nodes ready: %v", ready, nodes)
		}
		return nil
	})

	checks := writeFile(t, f.dir, "checks.yaml", `
kind: Check
name: load
spec:
  command: [check_load, -r, -w, "100,100,100", -c, "200,200,200"]
  interval: 1s
---
kind: Check
name: disk
spec:
  command: [check_disk, -w, "0%", -c, "0%", -p, /]
  interval: 1s
---
kind: Check
name: procs
spec:
  command: [check_procs, -w, "100000", -c, "200000"]
  interval: 1s
---
kind: Check
name: script
spec:
  command: [sh, -c, 'echo "WARNING - from a script | things=3;2;5;0;10"; exit 1']
  interval: 1s
---
kind: Check
name: web-only
spec:
  command: [check_dummy, "1", "web warn v1"]
  interval: 1s
  node_selector: {role: web}
`)
	out, err := f.cli("apply", "-f", checks)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Check/web-only (c1) created") {
		t.Fatalf("apply output: %s", out)
	}

	testutil.Eventually(t, 30*time.Second, "results of every check from the nodes they select", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		for _, k := range []string{"web1/load", "web1/disk", "web1/procs", "web1/script", "web1/web-only", "db1/load", "db1/disk", "db1/procs", "db1/script", "db1/local-only"} {
			if ev[k] == nil {
				return fmt.Errorf("no event for %s yet (have %d)", k, len(ev))
			}
		}
		return nil
	})
	ev, _ := f.latest()
	if ev["db1/web-only"] != nil {
		t.Errorf("the web-only check ran on db1, whose labels it does not select: %v", ev["db1/web-only"])
	}
	if ev["web1/local-only"] != nil {
		t.Errorf("db1's local check ran on web1")
	}
	for _, k := range []string{"web1/load", "db1/disk", "db1/procs"} {
		if lv := str(ev[k], "level"); lv != "success" {
			t.Errorf("%s: level %s, want success (output %q)", k, lv, str(ev[k], "output"))
		}
	}
	if w := ev["web1/web-only"]; str(w, "level") != "warning" || str(w, "output") != "WARNING: web warn v1" {
		t.Errorf("web-only on web1: %v", w)
	}
	script := ev["db1/script"]
	if str(script, "level") != "warning" || str(script, "output") != "WARNING - from a script" {
		t.Errorf("script check: %v", script)
	}
	if pd, _ := script["perfdata"].([]any); len(pd) != 1 || str(pd[0].(map[string]any), "label") != "things" {
		t.Errorf("script perfdata: %v", script["perfdata"])
	}
	if !strings.Contains(str(ev["web1/load"], "output"), "load average") {
		t.Errorf("check_load output: %q", str(ev["web1/load"], "output"))
	}

	// Filters on the CLI.
	warn, err := f.json("events", "ls", "--level", "warning", "--node", "web1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range warn {
		if str(e, "level") != "warning" || str(e, "node") != "web1" {
			t.Errorf("--level warning --node web1 returned %v", e)
		}
	}
	if len(warn) != 2 { // script and web-only
		t.Errorf("--level warning --node web1: %d events, want 2", len(warn))
	}

	// Change the check while it runs: the new command reaches the agent.
	changed := strings.Replace(readFile(t, checks), `[check_dummy, "1", "web warn v1"]`, `[check_dummy, "2", "web crit v2"]`, 1)
	writeFile(t, f.dir, "checks.yaml", changed)
	out, err = f.cli("apply", "-f", checks)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Check/web-only (c1) configured") || !strings.Contains(out, "Check/load (c1) unchanged") {
		t.Fatalf("re-apply output: %s", out)
	}
	testutil.Eventually(t, 30*time.Second, "the changed check's results", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if w := ev["web1/web-only"]; str(w, "output") != "CRITICAL: web crit v2" || str(w, "level") != "critical" {
			return fmt.Errorf("web1/web-only: %v", w)
		}
		return nil
	})

	// Delete it: the agent stops running it, without a restart.
	if _, err := f.cli("delete", "check", "web-only"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "web1 to drop the deleted check", func() error {
		st, err := f.agentStatus("web1")
		if err != nil {
			return err
		}
		names, _ := st["checks"].([]any)
		for _, n := range names {
			if n == "web-only" {
				return fmt.Errorf("web1 still runs web-only: %v", names)
			}
		}
		if len(names) != 4 {
			return fmt.Errorf("web1 runs %v, want the 4 remaining central checks", names)
		}
		return nil
	})
	// Once dropped, no new result appears: wait until every spooled result
	// is delivered, then three intervals more, and count again.
	count := func() int {
		h, err := f.json("events", "ls", "--history", "--node", "web1", "--check", "web-only", "--limit", "10000")
		if err != nil {
			t.Fatal(err)
		}
		return len(h)
	}
	waitSpoolEmpty(t, f, "web1")
	before := count()
	time.Sleep(3 * time.Second) // three intervals of the deleted check: a run would show
	waitSpoolEmpty(t, f, "web1")
	if after := count(); after != before {
		t.Errorf("the deleted check produced %d more results", after-before)
	}

	// get -o yaml of a check can be applied again unchanged.
	y, err := f.cli("get", "check", "load", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	again := writeFile(t, f.dir, "again.yaml", y)
	if out, err := f.cli("apply", "-f", again); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("re-applying get -o yaml: %v %s", err, out)
	}

	// Without a token the server refuses, with a clear one-line error.
	if _, err := cli(t, f.rootURL, "nodes", "ls"); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("nodes ls without a token: %v", err)
	}
	// A join token may not act as an operator.
	if _, err := cli(t, f.rootURL, "--token", joinToken, "nodes", "ls"); err == nil || !strings.Contains(err.Error(), "needs the viewer role") {
		t.Errorf("nodes ls with a join token: %v", err)
	}
}

// waitSpoolEmpty waits until the agent has delivered everything it spooled.
func waitSpoolEmpty(t *testing.T, f *fleet, node string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, node+"'s spool to drain", func() error {
		st, err := f.agentStatus(node)
		if err != nil {
			return err
		}
		sp, _ := st["spool"].(map[string]any)
		if n, _ := sp["PendingRecords"].(float64); n != 0 || sp == nil {
			return fmt.Errorf("%v records pending", sp["PendingRecords"])
		}
		return nil
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
