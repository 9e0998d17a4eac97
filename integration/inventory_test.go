package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestInventory applies the example inventory to root through the CLI,
// reads it back as tables, JSON and YAML, lists the hardware refresh, and
// has every bad file under testdata/inventory refused with its document
// and field named and nothing stored; a floor still holding racks is not
// deleted, and a cluster's attributes show in unyo clusters ls before it
// registers (issue 13, items 1, 6 and 7).
func TestInventory(t *testing.T) {
	dir := t.TempDir()
	url := startRootServer(t, dir, "")
	testutil.Eventually(t, 30*time.Second, "root to answer", func() error {
		_, err := cli(t, url, "--token", adminToken, "status")
		return err
	})
	run := func(args ...string) string {
		t.Helper()
		out, err := cli(t, url, append([]string{"--token", adminToken}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	example := filepath.Join("..", "configs", "examples", "inventory.yaml")
	run("apply", "-f", example)
	if out := run("apply", "-f", example); strings.Contains(out, "configured") || strings.Contains(out, "created") {
		t.Errorf("applying the example again changed something:\n%s", out)
	}

	const rack, server = "dc-1-floor-1-1-1-rack-1", "dc-1-floor-1-1-1-rack-1-server01"
	if out := run("racks", "ls"); !strings.Contains(out, rack) || !strings.Contains(out, "az1") {
		t.Errorf("racks ls lacks rack %s in zone az1:\n%s", rack, out)
	}
	items, err := cliJSON(t, url, "--token", adminToken, "resources", "ls")
	if err != nil || len(items) != 142 {
		t.Errorf("resources ls -o json: %d items, %v; want the example's 142", len(items), err)
	}
	if out := run("resources", "get", server, "-o", "yaml"); !strings.Contains(out, `unyo.dev/dev-node: "true"`) || !strings.Contains(out, "rack-leaf-router01") {
		t.Errorf("resources get -o yaml of the dev node:\n%s", out)
	}
	if out := run("floors", "get", "dc-2-floor-1-1-2", "-o", "table"); !strings.Contains(out, "dc-2") {
		t.Errorf("floors get -o table:\n%s", out)
	}

	// The server racks of each datacenter's first floor expire first, all
	// seven resources of each (four servers, two leaf routers, a PDU).
	out := run("resources", "ls", "--contract-ends-before", "2027-06-01")
	if !strings.Contains(out, "WHOLE RACK") || strings.Count(out, "-rack-") < 8 {
		t.Errorf("the hardware refresh listing:\n%s", out)
	}
	for _, want := range []string{rack + "   7          7           yes", "dc-2-floor-1-1-1-rack-4", "2027-03-31"} {
		if !strings.Contains(out, want) {
			t.Errorf("the hardware refresh listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dc-1-floor-1-1-2-rack-1 ") {
		t.Errorf("the second floor's racks expire later, yet are listed:\n%s", out)
	}
	if out := run("resources", "ls", "--contract-ends-before", "2020-01-01"); !strings.Contains(out, "No maintenance contract ends before 2020-01-01") {
		t.Errorf("an empty refresh listing: %q", out)
	}

	bad := []struct{ file, want string }{
		{"unit-beyond-rack.yaml", `PhysicalResource "bad-beyond": spec.unit: units 42-43 go beyond rack "` + rack + `", which has 42 units`},
		{"overlapping-units.yaml", `PhysicalResource "bad-overlap": spec.unit: units 2-3 overlap PhysicalResource "` + server + `" (units 1-2)`},
		{"unknown-port.yaml", `PhysicalResource "bad-port": spec.ports[0].link: no port "nope" on PhysicalResource "` + rack + `-rack-leaf-router01"`},
		{"port-linked-twice.yaml", `PhysicalResource "bad-twice": spec.ports[0].link: port ` + rack + `-rack-leaf-router01/srv1a is linked twice`},
		{"cycle.yaml", `spec.ports[0].link: a cycle of links: bad-cycle-a/p → bad-cycle-b/p → bad-cycle-c/p → bad-cycle-a/p`},
		{"unknown-floor.yaml", `Rack "bad-rack": spec.floor: no Floor "f9"`},
	}
	for _, tt := range bad {
		out, err := cli(t, url, "--token", adminToken, "apply", "-f", filepath.Join("testdata", "inventory", tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "nothing was stored") {
			t.Errorf("%s: apply = %v (%s), want refused with %q", tt.file, err, out, tt.want)
		}
	}
	items, err = cliJSON(t, url, "--token", adminToken, "resources", "ls")
	if err != nil || len(items) != 142 {
		t.Errorf("after the refused applies: %d resources, %v; want 142", len(items), err)
	}
	if _, err := cli(t, url, "--token", adminToken, "racks", "get", "bad-rack"); err == nil {
		t.Error("rack bad-rack was stored by a refused apply")
	}

	_, err = cli(t, url, "--token", adminToken, "delete", "floor", "dc-1-floor-1-1-2")
	if err == nil || !strings.Contains(err.Error(), `Floor "dc-1-floor-1-1-2" is used by Rack "dc-1-floor-1-1-2-net", Rack "dc-1-floor-1-1-2-rack-1"`) {
		t.Errorf("delete of a floor holding racks = %v, want refused naming its racks", err)
	}
	run("floors", "get", "dc-1-floor-1-1-2")

	run("apply", "-f", filepath.Join("testdata", "inventory", "cluster.yaml"))
	if out := run("clusters", "ls"); !strings.Contains(out, "dc-1-a") || !strings.Contains(out, "region-1") || !strings.Contains(out, "not registered yet") {
		t.Errorf("clusters ls lacks the attributes of dc-1-a:\n%s", out)
	}
	_, err = cli(t, url, "--token", adminToken, "delete", "datacenter", "dc-1")
	if err == nil || !strings.Contains(err.Error(), `Cluster "dc-1-a"`) {
		t.Errorf("delete of a datacenter a cluster names = %v, want refused naming the cluster", err)
	}
	run("delete", "cluster", "dc-1-a")
	if out := run("clusters", "ls"); strings.Contains(out, "dc-1-a") {
		t.Errorf("the cluster's attributes are still listed after their delete:\n%s", out)
	}
}
