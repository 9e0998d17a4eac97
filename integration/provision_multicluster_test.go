package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// startPGCluster starts cluster name as a process whose state store is its
// own PostgreSQL database, registered with root; it returns its URL.
func startPGCluster(t *testing.T, dir, name, dsn, rootURL string) string {
	t.Helper()
	addr := freeAddr(t)
	cfg := writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
store:
  driver: postgres
  dsn: %s
cluster:
  name: %s
  default_rules: false
  root_url: %s
  root_token: %s
  heartbeat_interval: 1s
%s`, dir, name, addr, adminToken, joinToken, dsn, name, rootURL, addClusterAt(t, rootURL, name), lightCluster))
	startUnyo(t, name, nil, "server", "--config", cfg)
	url := "http://" + addr
	testutil.Eventually(t, 30*time.Second, "cluster "+name+" to answer", func() error {
		_, err := cli(t, url, "--token", adminToken, "status")
		return err
	})
	return url
}

// TestRegionServiceTwoClustersPostgres (issue 14, end to end): root and
// two clusters, each on its own PostgreSQL database, with two provider-exec
// agents each. A service whose policy allows a split and keeps one replica
// per host is spread over both clusters; it scales down from the tail; a
// drain in the cluster with room moves its replica to the other node
// there; deleting the service leaves no replica, process or reservation.
func TestRegionServiceTwoClustersPostgres(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { stopServiceProcs(t, dir) })
	pg := testpg.New(t)
	plugin := buildPlugin(t, "../plugins/provider-exec", "unyo-provider-exec")
	sum := sha256File(t, plugin)
	_, rootURL := startRootProc(t, dir, "")
	admin := adminCLI{t, rootURL}
	clusters := map[string]string{}
	for _, name := range []string{"c1", "c2"} {
		clusters[name] = startPGCluster(t, dir, name, pg.CreateDatabase(t), rootURL)
	}
	admin.must("apply", "-f", writeFile(t, dir, "inventory.yaml", topologyInventory("r2")+`
---
kind: PhysicalResource
name: srv-c
spec: {kind: server, model: m2, serial: SC, rack: r1, unit: 5, height: 1}
---
kind: PhysicalResource
name: srv-d
spec: {kind: server, model: m2, serial: SD, rack: r2, unit: 7, height: 1}
---
kind: Cluster
name: c1
spec: {region: tokyo, weight: 1}
---
kind: Cluster
name: c2
spec: {region: tokyo, weight: 1}
`))
	nodeCluster := map[string]string{"node-a": "c1", "node-b": "c1", "node-c": "c2", "node-d": "c2"}
	for node, resource := range map[string]string{"node-a": "srv-a", "node-b": "srv-b", "node-c": "srv-c", "node-d": "srv-d"} {
		startExecAgent(t, dir, node, resource, clusters[nodeCluster[node]], plugin, sum, "")
	}
	var cpus float64
	testutil.Eventually(t, 60*time.Second, "four Ready nodes", func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "ls")
		if err != nil || len(items) != 4 {
			return fmt.Errorf("nodes: %d, %v", len(items), err)
		}
		capacity, _ := items[0]["capacity"].(map[string]any)
		cpus, _ = capacity["cpus"].(float64)
		return nil
	})
	// A replica takes a whole node (all its CPUs): a cluster of two nodes
	// holds two, so root's cluster stage splits four over both clusters
	// (allow_split), and the hostname anti-affinity holds in each.
	admin.must("apply", "-f", writeFile(t, dir, "catalog.yaml", strings.Replace(serviceCatalog, "kind: Region\nname: tokyo\nspec: {zones: [az1, az2, az3]}\n---\n", "", 1)+
		fmt.Sprintf("---\nkind: Flavor\nname: whole\nspec: {kind: container, vcpus: %d, memory: 64Mi, disk: 100Mi, price_per_hour: 1}\n", int(cpus))))
	svc := strings.Replace(webService(4), "      anti_affinity: [{key: topology.unyo.dev/hostname}]",
		"      anti_affinity: [{key: topology.unyo.dev/hostname}]\n      allow_split: true", 1)
	svc = strings.Replace(svc, "flavor: small", "flavor: whole", 1)
	admin.must("apply", "-f", writeFile(t, dir, "web.yaml", svc))

	// converged waits until the service has n Active replicas, one
	// process each, and returns root's view: name -> phase, cluster, node.
	converged := func(what string, n int, check func(map[string][]string) error) map[string][]string {
		t.Helper()
		var got map[string][]string
		testutil.Eventually(t, 120*time.Second, what, func() error {
			var err error
			if got, err = rootComputes(t, rootURL); err != nil {
				return err
			}
			active := 0
			for _, p := range got {
				if p[0] == "Active" {
					active++
				}
			}
			if active != n || len(got) != n {
				return fmt.Errorf("computes: %v", got)
			}
			if k := len(serviceProcs()); k != n {
				return fmt.Errorf("%d replica processes, want %d", k, n)
			}
			if check != nil {
				return check(got)
			}
			return nil
		})
		return got
	}
	perCluster := func(got map[string][]string) map[string]int {
		m := map[string]int{}
		for _, p := range got {
			m[p[1]]++
		}
		return m
	}
	oneNodeEach := func(got map[string][]string) error {
		seen := map[string]bool{}
		for name, p := range got {
			if nodeCluster[p[2]] != p[1] || seen[p[2]] {
				return fmt.Errorf("%s on node %s of cluster %s: %v", name, p[2], p[1], got)
			}
			seen[p[2]] = true
		}
		return nil
	}
	got := converged("web spread over both clusters", 4, oneNodeEach)
	if m := perCluster(got); m["c1"] != 2 || m["c2"] != 2 {
		t.Fatalf("replicas per cluster: %v, want 2 and 2", m)
	}

	// Scale down: web-3 goes, wherever it ran.
	admin.must("services", "scale", "web", "3")
	got = converged("web scaled to 3", 3, oneNodeEach)
	if _, ok := got["web-3"]; ok {
		t.Fatalf("scale-down kept the tail: %v", got)
	}

	// Drain the busy node of the cluster that has room: its replica moves
	// to the other node there.
	var cl, busy, free string
	for c, k := range perCluster(got) {
		if k == 1 {
			cl = c
		}
	}
	var moved string
	for name, p := range got {
		if p[1] == cl {
			moved, busy = name, p[2]
		}
	}
	for node, c := range nodeCluster {
		if c == cl && node != busy {
			free = node
		}
	}
	if out := (adminCLI{t, clusters[cl]}).must("nodes", "drain", busy, "--deadline", "5m"); !strings.Contains(out, "draining") {
		t.Errorf("nodes drain: %s", out)
	}
	converged(fmt.Sprintf("%s moved from %s to %s", moved, busy, free), 3, func(got map[string][]string) error {
		if p := got[moved]; p[1] != cl || p[2] != free {
			return fmt.Errorf("%s: %v", moved, p)
		}
		return oneNodeEach(got)
	})

	// Delete: nothing is left at root, in either cluster or on any node.
	gone := func(svc string) {
		t.Helper()
		admin.must("services", "delete", svc)
		testutil.Eventually(t, 120*time.Second, svc+" gone", func() error {
			got, err := rootComputes(t, rootURL)
			if err != nil || len(got) != 0 {
				return fmt.Errorf("computes: %v, %v", got, err)
			}
			if k := len(serviceProcs()); k != 0 {
				return fmt.Errorf("%d replica processes left", k)
			}
			for c, url := range clusters {
				items, err := cliJSON(t, url, "--token", adminToken, "nodes", "ls")
				if err != nil {
					return err
				}
				for _, it := range items {
					if r, _ := it["reserved"].(map[string]any); len(r) > 0 {
						return fmt.Errorf("cluster %s node %v still reserves %v", c, it["name"], r)
					}
				}
			}
			return nil
		})
	}
	gone("web")
	admin.must("nodes", "uncordon", busy)

	// Four one-per-host replicas of a flavor every node holds many of
	// (session 9): by capacity c1 ranks first and holds them all, but
	// its two nodes take two under the anti-affinity, so root's cluster
	// stage splits the set over both clusters rather than sending c1 four
	// replicas it must refuse.
	admin.must("apply", "-f", writeFile(t, dir, "web-small.yaml", strings.Replace(webService(4), "      anti_affinity: [{key: topology.unyo.dev/hostname}]",
		"      anti_affinity: [{key: topology.unyo.dev/hostname}]\n      allow_split: true", 1)))
	got = converged("small replicas one per host over both clusters", 4, oneNodeEach)
	if m := perCluster(got); m["c1"] != 2 || m["c2"] != 2 {
		t.Fatalf("replicas per cluster: %v, want 2 and 2", m)
	}
	gone("web")

	// The same set that may not be split fits no cluster's hosts: every
	// replica fails at once with root's per-cluster reason.
	admin.must("apply", "-f", writeFile(t, dir, "web-nosplit.yaml", webService(4)))
	testutil.Eventually(t, 60*time.Second, "four replicas Failed at the cluster stage", func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
		if err != nil || len(items) != 4 {
			return fmt.Errorf("computes: %v, %v", items, err)
		}
		for _, it := range items {
			st, _ := it["status"].(map[string]any)
			msg := fmt.Sprint(st["message"])
			if st["phase"] != "Failed" || st["reason"] != "Unsatisfiable" || (it["cluster"] != nil && it["cluster"] != "") ||
				!strings.Contains(msg, "c1 fits 2 (0/2 nodes fit: 2 anti-affinity on hostname") {
				return fmt.Errorf("%v: cluster %v, status %v", it["name"], it["cluster"], st)
			}
		}
		return nil
	})
	gone("web")
}
