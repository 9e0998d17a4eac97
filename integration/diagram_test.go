package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Issue 13, item 5: `unyo racks diagram` and `unyo networks diagram` draw
// what root holds. The fixture is the diagram package's: what the CLI
// prints from root must be the package's golden files byte for byte.
func TestDiagramCommands(t *testing.T) {
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, "")
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	testutil.Eventually(t, 30*time.Second, "root to answer", func() error {
		_, err := op("status")
		return err
	})
	testdata := filepath.Join("..", "provision", "diagram", "testdata")
	if out, err := op("apply", "-f", filepath.Join(testdata, "inventory.yaml")); err != nil {
		t.Fatalf("apply the inventory: %v\n%s", err, out)
	}
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	draws := []struct {
		args   []string
		golden string
	}{
		{[]string{"racks", "diagram", "--floor", "floor-1-1-1", "--width", "80"}, "racks-floor-80.txt"},
		{[]string{"rack", "diagram", "--floor", "floor-1-1-1", "--format", "svg"}, "racks-floor.svg"},
		{[]string{"networks", "diagram", "--from", "rack-1-1-server1", "--width", "80"}, "network-rack-1-1-server1.txt"},
		{[]string{"networks", "diagram", "--from", "floor-1-1-1-rack-1-1-rack-leaf-router01", "--format", "dot"}, "network-floor-1-1-1-rack-1-1-rack-leaf-router01.dot"},
		{[]string{"network", "diagram", "--from", "rack-1-1-server1", "--format", "svg"}, "network-rack-1-1-server1.svg"},
	}
	for _, d := range draws {
		out, err := op(d.args...)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if want := golden(d.golden); out != want {
			t.Errorf("unyo %s differs from %s:\n--- got\n%s\n--- want\n%s", strings.Join(d.args, " "), d.golden, out, want)
		}
	}

	// Unknown names are named, with a few the inventory has.
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"racks", "diagram", "--floor", "floor-1-1-2"}, `floor "floor-1-1-2" is not in the inventory (known: floor-1-1-1, floor-1-2-1)`},
		{[]string{"networks", "diagram", "--from", "rack-1-1-server3"}, `resource "rack-1-1-server3" is not in the inventory (known: rack-1-1-server1, rack-1-1-server2, rack-1-1-pdu1,`},
		{[]string{"racks", "diagram", "--cluster", "nope"}, `cluster "nope" is not registered with root`},
	}
	for _, r := range refusals {
		out, err := op(r.args...)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("unyo %s: %v (output %q), want an error with %q", strings.Join(r.args, " "), err, out, r.want)
		}
	}

	// The cluster view lists the cluster's nodes through root: a node the
	// inventory has no entry for is said to be so.
	clAddr := freeAddr(t)
	startUnyo(t, "c1", nil, "server", "--config", writeFile(t, dir, "c1.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/c1
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c1
  root_url: %s
  root_token: %s
%s`, dir, clAddr, adminToken, joinToken, rootURL, addClusterAt(t, rootURL, "c1"), lightCluster)))
	startUnyo(t, "n1", nil, "agent", "--config", writeFile(t, dir, "n1.yaml", fmt.Sprintf(`
role: agent
data_dir: %s/n1
agent:
  node_name: n1
  cluster_url: http://%s
  token: %s
  status_listen: 127.0.0.1:0
  metrics_interval: 0s
`, dir, clAddr, joinToken)))
	testutil.Eventually(t, 60*time.Second, "the cluster view to show node n1", func() error {
		out, err := op("racks", "diagram", "--cluster", "c1")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, "Racks of cluster c1: ") || !strings.Contains(out, "node n1 ") {
			return fmt.Errorf("racks diagram --cluster c1:\n%s", out)
		}
		return nil
	})
}
