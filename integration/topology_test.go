package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// topologyInventory is a region with one datacenter, one floor and two
// racks; srv-a stands in r1, srv-b in rackOfB.
func topologyInventory(rackOfB string) string {
	return fmt.Sprintf(`
kind: Region
name: tokyo
spec: {zones: [az1, az2, az3]}
---
kind: Datacenter
name: dc1
spec: {region: tokyo}
---
kind: Floor
name: floor-1-1-1
spec: {datacenter: dc1, building: 1, level: 1, number: 1}
---
kind: Rack
name: r1
spec: {floor: floor-1-1-1, position: {row: A, column: 1}, units: 42, power_zone: p1, network_zone: n1, zone: az1}
---
kind: Rack
name: r2
spec: {floor: floor-1-1-1, position: {row: A, column: 2}, units: 42, power_zone: p2, network_zone: n2, zone: az2}
---
kind: PhysicalResource
name: srv-a
spec: {kind: server, model: m1, serial: SA, rack: r1, unit: 1, height: 1}
---
kind: PhysicalResource
name: srv-b
spec: {kind: server, model: m1, serial: SB, rack: %s, unit: 3, height: 1}
`, rackOfB)
}

// Node topology (issue 13, item 2), root and a cluster as separate
// processes: root derives where each node sits from its inventory and
// records it in the node's cluster; a check selecting a rack runs only on
// the nodes in it, and follows a node moved to the rack; a node whose
// resource is deleted is listed without an inventory entry.
func TestNodeTopology(t *testing.T) {
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, "")
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	clURL := startLoneCluster(t, dir, fmt.Sprintf("  root_url: %s\n  root_token: %s\n  heartbeat_interval: 1s\n%s",
		rootURL, addClusterAt(t, rootURL, "c1"), lightCluster))
	// Both agents run on this machine, so they share its hostname: each
	// names its resource (agent.resource; UNYO_AGENT_RESOURCE for A).
	for _, a := range []struct{ node, resource string }{{"node-a", ""}, {"node-b", "  resource: srv-b\n"}} {
		var env []string
		if a.resource == "" {
			env = []string{"UNYO_AGENT_RESOURCE=srv-a"}
		}
		startUnyo(t, a.node, env, "agent", "--config", writeFile(t, dir, a.node+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  token: %s
  labels: {role: web}
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
%s`, dir, a.node, a.node, clURL, joinToken, a.resource)))
	}

	// where reads each node's resource, rack and zone from `nodes ls -o json`.
	type place struct{ resource, rack, zone, reason string }
	where := func() (map[string]place, error) {
		nodes, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "ls")
		if err != nil {
			return nil, err
		}
		out := map[string]place{}
		for _, n := range nodes {
			labels, _ := n["topology_labels"].(map[string]any)
			p := place{resource: str(n, "resource"), reason: str(n, "topology_reason")}
			if labels != nil {
				p.rack, p.zone = str(labels, "topology.unyo.dev/rack"), str(labels, "topology.unyo.dev/zone")
			}
			out[str(n, "name")] = p
		}
		return out, nil
	}
	wantPlaces := func(what string, want map[string]place) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what, func() error {
			got, err := where()
			if err != nil {
				return err
			}
			for node, w := range want {
				g := got[node]
				if g.resource != w.resource || g.rack != w.rack || g.zone != w.zone || (w.reason != "" && !strings.Contains(g.reason, w.reason)) {
					return fmt.Errorf("node %s: %+v, want %+v", node, g, w)
				}
			}
			return nil
		})
	}
	// ran says which nodes reported the rack check.
	ran := func() (map[string]bool, error) {
		events, err := cliJSON(t, rootURL, "--token", adminToken, "events", "ls", "--check", "in-r1")
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, e := range events {
			out[str(e, "node")] = true
		}
		return out, nil
	}
	ranOn := func(node string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, "the rack check to run on "+node, func() error {
			got, err := ran()
			if err != nil {
				return err
			}
			if !got[node] {
				return fmt.Errorf("the check ran on %v", got)
			}
			return nil
		})
	}

	inv := writeFile(t, dir, "inventory.yaml", topologyInventory("r2"))
	if out, err := op("apply", "-f", inv); err != nil {
		t.Fatalf("apply the inventory: %v\n%s", err, out)
	}
	wantPlaces("the topology labels to reach both nodes", map[string]place{
		"node-a": {resource: "srv-a", rack: "r1", zone: "az1"},
		"node-b": {resource: "srv-b", rack: "r2", zone: "az2"},
	})
	nodes, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "get", "node-a")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes get node-a: %v, %v", nodes, err)
	}
	labels, _ := nodes[0]["topology_labels"].(map[string]any)
	for k, v := range map[string]string{"region": "tokyo", "datacenter": "dc1", "floor": "floor-1-1-1", "rack": "r1", "power": "p1", "network": "n1", "zone": "az1"} {
		if got := str(labels, "topology.unyo.dev/"+k); got != v {
			t.Errorf("node-a's topology.unyo.dev/%s = %q, want %q (labels %v)", k, got, v, labels)
		}
	}
	if table, err := op("nodes", "ls"); err != nil || !strings.Contains(table, "RACK") || !strings.Contains(table, "srv-a") {
		t.Errorf("nodes ls: %v\n%s", err, table)
	}

	check := writeFile(t, dir, "check.yaml", `
kind: Check
name: in-r1
spec:
  command: [check_dummy, "0", "in rack r1"]
  interval: 1s
  node_selector: {topology.unyo.dev/rack: r1}
`)
	if out, err := op("apply", "-f", check); err != nil {
		t.Fatalf("apply the check: %v\n%s", err, out)
	}
	ranOn("node-a")
	// A few of its runs later, node-b (rack r2) still has none.
	time.Sleep(3 * time.Second)
	if got, err := ran(); err != nil || got["node-b"] {
		t.Fatalf("the rack r1 check ran on %v (err %v); node-b is in r2", got, err)
	}

	// srv-b moves to r1: node-b's labels follow, and the check runs there.
	if out, err := op("apply", "-f", writeFile(t, dir, "inventory-moved.yaml", topologyInventory("r1"))); err != nil {
		t.Fatalf("apply the moved inventory: %v\n%s", err, out)
	}
	wantPlaces("node-b's labels to follow srv-b to r1", map[string]place{
		"node-a": {resource: "srv-a", rack: "r1", zone: "az1"},
		"node-b": {resource: "srv-b", rack: "r1", zone: "az1"},
	})
	ranOn("node-b")

	// srv-b goes: node-b is listed without an inventory entry.
	if out, err := op("delete", "resource", "srv-b"); err != nil {
		t.Fatalf("delete srv-b: %v\n%s", err, out)
	}
	wantPlaces("node-b to be listed without an inventory entry", map[string]place{
		"node-a": {resource: "srv-a", rack: "r1", zone: "az1"},
		"node-b": {reason: `agent.resource is "srv-b"`},
	})
	testutil.Eventually(t, 10*time.Second, "nodes ls to show node-b without a resource", func() error {
		table, err := op("nodes", "ls")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(table, "\n") {
			// NAME CLUSTER STATE SCHED RESOURCE RACK ...
			if f := strings.Fields(line); len(f) > 6 && f[0] == "node-b" {
				if f[4] != "<none>" || f[5] != "-" {
					return fmt.Errorf("node-b's row: %q", line)
				}
				return nil
			}
		}
		return fmt.Errorf("no row for node-b:\n%s", table)
	})
}
