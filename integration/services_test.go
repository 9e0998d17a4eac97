package integration

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// serviceCatalog is a region, a flavor, an image and a network for the
// services of these tests.
const serviceCatalog = `
kind: Region
name: tokyo
spec: {zones: [az1, az2, az3]}
---
kind: Flavor
name: small
spec: {kind: container, vcpus: 1, memory: 64Mi, disk: 100Mi, price_per_hour: 3600, model_prices: {m2: 7200}}
---
kind: Image
name: sleeper
spec: {kind: container, source: /bin/sleep}
---
kind: Network
name: svcnet
spec: {cidr: 10.200.0.0/24, gateway: 10.200.0.1, scope: region, region: tokyo}
`

// webService is the RegionService "web" of n replicas on provider exec.
// serviceMarker tells the replicas' processes of these tests apart from
// every other process: sleep MARKER.
const serviceMarker = "31536018"

// serviceProcs returns the pids of running replica processes.
func serviceProcs() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.Equal(cmd, []byte("sleep\x00"+serviceMarker+"\x00")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopServiceProcs kills provider-exec's shims whose state is under dir
// and then every replica process, and waits until they are gone: a shim
// writes exit.json when its command dies, which would race the removal of
// the test's directory.
func stopServiceProcs(t *testing.T, dir string) {
	t.Helper()
	shims := func() []int {
		var pids []int
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
			args := strings.Split(string(cmd), "\x00")
			if err != nil || len(args) < 3 || args[1] != "shim-run" || !strings.HasPrefix(args[2], dir+"/") {
				continue
			}
			if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	alive := func() []int {
		var live []int
		for _, pid := range append(shims(), serviceProcs()...) {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			// A zombie has nothing left to write; init reaps it.
			if err == nil && !bytes.Contains(stat, []byte(") Z ")) {
				live = append(live, pid)
			}
		}
		return live
	}
	testutil.Eventually(t, 30*time.Second, "the replicas' shims and processes gone", func() error {
		for _, pid := range shims() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range serviceProcs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if live := alive(); len(live) > 0 {
			return fmt.Errorf("still running: %v", live)
		}
		return nil
	})
}

func webService(n int) string {
	return fmt.Sprintf(`
kind: RegionService
name: web
spec:
  region: tokyo
  compute:
    flavor: small
    image: sleeper
    network: svcnet
    provider: exec
    replicas: %d
    command: [sleep, "`+serviceMarker+`"]
    schedule:
      anti_affinity: [{key: topology.unyo.dev/hostname}]
`, n)
}

// RegionServices at root as a process (issue 14, items 1 and 11): the
// kind's validation names the field, computes cannot be applied, root
// keeps one Compute per replica and scales them (scale-down from the
// tail, a replica deleted by name keeps the others' names, zero deletes
// the service), a referenced flavor cannot be deleted, and a service
// deleted goes with its computes. No cluster is registered, so every
// replica is Blocked at the cluster stage with root's reason.
func TestRegionServicesAtRoot(t *testing.T) {
	dir := t.TempDir()
	url := startRootServer(t, dir, "")
	a := adminCLI{t, url}
	run, must, wantErr := a.run, a.must, a.wantErr
	// computes lists "NAME PHASE" of root's records, in name order.
	computes := func() (string, error) {
		items, err := cliJSON(t, url, "--token", adminToken, "computes", "ls")
		if err != nil {
			return "", err
		}
		var parts []string
		for _, it := range items {
			st, _ := it["status"].(map[string]any)
			parts = append(parts, fmt.Sprintf("%v %v", it["name"], st["phase"]))
		}
		return strings.Join(parts, ", "), nil
	}
	waitComputes := func(want string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, "computes "+want, func() error {
			got, err := computes()
			if err == nil && got != want {
				err = fmt.Errorf("computes are %q", got)
			}
			return err
		})
	}
	testutil.Eventually(t, 30*time.Second, "root to answer", func() error { _, err := run("status"); return err })
	must("apply", "-f", writeFile(t, dir, "catalog.yaml", serviceCatalog))

	for _, tc := range []struct{ name, change, want string }{
		{"replicas", "replicas: 3", "spec.compute.replicas: must not be negative, got -2"},
		{"provider", "provider: exec", `spec.compute.provider: "vmware" is not a known provider`},
		{"operator", "anti_affinity: [{key: topology.unyo.dev/hostname}]", `spec.compute.schedule.node_labels[0].operator: "Has" is not one of In, NotIn, Exists, DoesNotExist`},
		{"replace_after", "replicas: 3", `spec.compute.replace_after: "soon" is neither a positive duration`},
		{"flavor", "flavor: small", `spec.compute.flavor: no Flavor "huge"`},
	} {
		bad := map[string]string{
			"replicas":      "replicas: -2",
			"provider":      "provider: vmware",
			"operator":      "node_labels: [{key: disk, operator: Has}]",
			"replace_after": "replicas: 3\n    replace_after: soon",
			"flavor":        "flavor: huge",
		}[tc.name]
		doc := strings.Replace(webService(3), tc.change, bad, 1)
		wantErr(tc.want, "apply", "-f", writeFile(t, dir, "bad-"+tc.name+".yaml", doc))
	}
	wantErr("not found", "services", "get", "web")
	wantErr("computes are created through their RegionService", "apply", "-f", writeFile(t, dir, "compute.yaml", "kind: Compute\nname: web-0\nspec: {flavor: small}\n"))

	must("apply", "-f", writeFile(t, dir, "web.yaml", webService(3)))
	waitComputes("web-0 Blocked, web-1 Blocked, web-2 Blocked")
	out := must("services", "get", "web")
	for _, want := range []string{"NoCapacity", "0/0 clusters fit 3 replicas: no clusters", "0/3", "Blocked"} {
		if !strings.Contains(out, want) {
			t.Errorf("services get web lacks %q:\n%s", want, out)
		}
	}
	if out := must("computes", "get", "web-1"); !strings.Contains(out, "web-1") || !strings.Contains(out, "0/0 clusters fit") {
		t.Errorf("computes get web-1:\n%s", out)
	}
	// The plan shows the same reason, and reserves nothing.
	if out := must("services", "plan", "-f", writeFile(t, dir, "web5.yaml", webService(5))); !strings.Contains(out, "web-4") || !strings.Contains(out, "0/0 clusters fit 5 replicas") {
		t.Errorf("services plan:\n%s", out)
	}
	wantErr(`Flavor "small" is used by RegionService "web"`, "delete", "flavor", "small")

	// Scale up and down; the tail goes.
	must("apply", "-f", writeFile(t, dir, "web5.yaml", webService(5)))
	waitComputes("web-0 Blocked, web-1 Blocked, web-2 Blocked, web-3 Blocked, web-4 Blocked")
	must("services", "scale", "web", "2")
	waitComputes("web-0 Blocked, web-1 Blocked")
	// A replica deleted by name: one fewer, the other keeps its name.
	if out := must("computes", "delete", "web-0"); !strings.Contains(out, "Compute/web-0 deleting") {
		t.Errorf("computes delete: %s", out)
	}
	waitComputes("web-1 Blocked")
	items, err := cliJSON(t, url, "--token", adminToken, "services", "get", "web")
	if err != nil {
		t.Fatal(err)
	}
	if spec := items[0]["spec"].(map[string]any)["compute"].(map[string]any); fmt.Sprint(spec["replicas"]) != "1" {
		t.Errorf("after deleting web-0 the service wants %v replicas, want 1", spec["replicas"])
	}
	// Scaling up fills the lowest free index again.
	must("services", "scale", "web", "2")
	waitComputes("web-0 Blocked, web-1 Blocked")

	// Deleting the service deletes its computes, then the service.
	if out := must("services", "delete", "web"); !strings.Contains(out, "RegionService/web deleting") {
		t.Errorf("services delete: %s", out)
	}
	waitComputes("")
	testutil.Eventually(t, 30*time.Second, "the service to be gone", func() error {
		if _, err := run("services", "get", "web"); err == nil {
			return fmt.Errorf("service web is still there")
		}
		return nil
	})
	// At zero the service goes too.
	must("apply", "-f", writeFile(t, dir, "web1.yaml", webService(1)))
	waitComputes("web-0 Blocked")
	must("computes", "delete", "web-0")
	waitComputes("")
	testutil.Eventually(t, 30*time.Second, "the service scaled to zero to be gone", func() error {
		if _, err := run("services", "get", "web"); err == nil {
			return fmt.Errorf("service web is still there")
		}
		return nil
	})
	must("delete", "flavor", "small")
}

// A RegionService end to end (issue 14): root, a cluster and three agents
// on separate nodes of the inventory run provider-exec; the service's
// three replicas are placed on three nodes (hard anti-affinity on the
// hostname) and become Active at root; scaling down removes the tail from
// its node; deleting the service removes every replica.
func TestRegionServiceEndToEnd(t *testing.T) {
	dir := t.TempDir()
	rootURL, _ := startServiceFleet(t, dir, lightCluster)
	a := adminCLI{t, rootURL}
	op, must := a.run, a.must
	applied := time.Now()
	must("apply", "-f", writeFile(t, dir, "web.yaml", webService(3)))

	placed := func() (map[string][]string, error) { return rootComputes(t, rootURL) }
	testutil.Eventually(t, 60*time.Second, "web Active 3/3", func() error {
		out, err := op("services", "get", "web")
		if err == nil && (!strings.Contains(out, "Active") || !strings.Contains(out, "3/3")) {
			err = fmt.Errorf("services get web:\n%s", out)
		}
		return err
	})
	got, err := placed()
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for name, p := range got {
		if p[0] != "Active" || p[1] != "c1" || p[2] == "" {
			t.Errorf("%s: %v, want Active in c1 on a node", name, p)
		}
		nodes[p[2]] = true
	}
	if len(nodes) != 3 {
		t.Errorf("replicas on %d nodes, want 3 (anti-affinity on the hostname): %v", len(nodes), got)
	}
	if pids := serviceProcs(); len(pids) != 3 {
		t.Errorf("%d replica processes run, want 3: %v", len(pids), pids)
	}
	active := time.Now()
	spans := map[string]*reservedSpan{}
	for name := range got {
		spans[name] = &reservedSpan{began: [2]time.Time{applied, active}}
	}
	addrs := checkAddresses(t, rootURL, netip.MustParsePrefix("10.200.0.0/24"))
	time.Sleep(2 * time.Second) // let the replicas run a while
	scaled := time.Now()
	must("services", "scale", "web", "2")
	testutil.Eventually(t, 60*time.Second, "web-2 gone", func() error {
		got, err := placed()
		if err == nil && (len(got) != 2 || got["web-2"] != nil) {
			err = fmt.Errorf("computes: %v", got)
		}
		return err
	})
	spans["web-2"].ended = [2]time.Time{scaled, time.Now()}
	deleted := time.Now()
	must("services", "delete", "web")
	testutil.Eventually(t, 60*time.Second, "web gone with its computes", func() error {
		got, err := placed()
		if err == nil && len(got) > 0 {
			err = fmt.Errorf("computes: %v", got)
		}
		if _, gerr := op("services", "get", "web"); gerr == nil {
			err = fmt.Errorf("service web is still there")
		}
		if pids := serviceProcs(); err == nil && len(pids) > 0 {
			err = fmt.Errorf("replica processes still run: %v", pids)
		}
		return err
	})
	for _, name := range []string{"web-0", "web-1"} {
		spans[name].ended = [2]time.Time{deleted, time.Now()}
	}
	checkReleased(t, rootURL, "svcnet", addrs)
	price := map[string]float64{}
	final := map[string]reservedSpan{}
	for name, p := range got {
		price[p[2]] = 3600
		if p[2] == "node-c" { // srv-c is a model m2
			price[p[2]] = 7200
		}
		final[name] = *spans[name]
	}
	checkBilling(t, rootURL, "web", final, price, applied.Add(-time.Minute))
}

// startServiceFleet starts root, cluster c1 (telemetry is its metrics, logs
// and stats configuration) and agents on nodes node-a, node-b and node-c of
// the inventory running provider-exec, waits for the three nodes to be
// Ready and applies the service catalog; it returns root's and the
// cluster's URLs.
func startServiceFleet(t *testing.T, dir, telemetry string) (rootURL, clusterURL string) {
	t.Helper()
	_, rootURL, clusterURL = startServiceFleetRoot(t, dir, telemetry)
	return rootURL, clusterURL
}

// startServiceFleetRoot is startServiceFleet that also returns root's
// process (to kill it).
func startServiceFleetRoot(t *testing.T, dir, telemetry string) (root *proc, rootURL, clusterURL string) {
	t.Helper()
	return startServiceFleetPlugins(t, dir, telemetry, nil)
}

// startServiceFleetPlugins is startServiceFleetRoot whose agents also run
// the plugins extra(node, pluginDir) lists (lines of agent.plugins.enabled;
// their binaries go to pluginDir, beside provider-exec's).
func startServiceFleetPlugins(t *testing.T, dir, telemetry string, extra func(node, pluginDir string) string) (root *proc, rootURL, clusterURL string) {
	t.Helper()
	// The replicas' processes outlive a killed agent; none outlives the test.
	t.Cleanup(func() { stopServiceProcs(t, dir) })
	plugin := buildPlugin(t, "../plugins/provider-exec", "unyo-provider-exec")
	sum := sha256File(t, plugin)
	root, rootURL = startRootProc(t, dir, "")
	must := adminCLI{t, rootURL}.must
	clusterURL = startLoneCluster(t, dir, fmt.Sprintf("  root_url: %s\n  root_token: %s\n  heartbeat_interval: 1s\n%s",
		rootURL, addClusterAt(t, rootURL, "c1"), telemetry))
	inventory := topologyInventory("r2") + `
---
kind: PhysicalResource
name: srv-c
spec: {kind: server, model: m2, serial: SC, rack: r2, unit: 5, height: 1}
---
kind: Cluster
name: c1
spec: {region: tokyo, weight: 1}
`
	must("apply", "-f", writeFile(t, dir, "inventory.yaml", inventory))
	for _, n := range []struct{ node, resource string }{{"node-a", "srv-a"}, {"node-b", "srv-b"}, {"node-c", "srv-c"}} {
		more := ""
		if extra != nil {
			more = extra(n.node, filepath.Dir(plugin))
		}
		startExecAgent(t, dir, n.node, n.resource, clusterURL, plugin, sum, more)
	}
	// The model label (from the inventory's PhysicalResource) prices a
	// node's reservations: wait for root to have pushed it.
	testutil.Eventually(t, 60*time.Second, "three Ready nodes with their machine models", func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "ls")
		if err != nil || len(items) != 3 {
			return fmt.Errorf("nodes: %v, %v", len(items), err)
		}
		for _, it := range items {
			if labels, _ := it["topology_labels"].(map[string]any); labels["topology.unyo.dev/model"] == nil {
				return fmt.Errorf("node %v has no model label yet: %v", it["name"], it["topology_labels"])
			}
		}
		return nil
	})
	must("apply", "-f", writeFile(t, dir, "catalog.yaml", strings.Replace(serviceCatalog, "kind: Region\nname: tokyo\nspec: {zones: [az1, az2, az3]}\n---\n", "", 1)))
	return root, rootURL, clusterURL
}

// startExecAgent starts node's agent for cluster clusterURL, as the
// inventory's resource, with provider-exec (the plugin binary and its
// sha256) keeping its state under dir.
func startExecAgent(t *testing.T, dir, node, resource, clusterURL, plugin, sum, more string) *proc {
	t.Helper()
	return startUnyo(t, node, nil, "agent", "--config", writeFile(t, dir, node+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  token: %s
  resource: %s
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
  plugins:
    dirs: [%s]
    enabled:
      - {kind: provider, name: exec, sha256: %s, config: {state_dir: %s/%s-exec}}
%s`, dir, node, node, clusterURL, joinToken, resource, filepath.Dir(plugin), sum, dir, node, more)))
}

// adminCLI runs unyo commands at url with the admin token: run returns
// what the command printed and its error, must fails the test on an error,
// wantErr expects an error that says want.
type adminCLI struct {
	t   *testing.T
	url string
}

func (a adminCLI) run(args ...string) (string, error) {
	return cli(a.t, a.url, append([]string{"--token", adminToken}, args...)...)
}

func (a adminCLI) must(args ...string) string {
	a.t.Helper()
	out, err := a.run(args...)
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

func (a adminCLI) wantErr(want string, args ...string) {
	a.t.Helper()
	_, err := a.run(args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		a.t.Errorf("unyo %s: error %v, want one saying %q", strings.Join(args, " "), err, want)
	}
}

// rootComputes lists "PHASE CLUSTER NODE" of root's compute records by
// name.
func rootComputes(t *testing.T, rootURL string) (map[string][]string, error) {
	items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, it := range items {
		st, _ := it["status"].(map[string]any)
		out[fmt.Sprint(it["name"])] = []string{fmt.Sprint(st["phase"]), fmt.Sprint(it["cluster"]), fmt.Sprint(st["node"])}
	}
	return out, nil
}
