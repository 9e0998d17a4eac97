package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// IP address management through the CLI against root as a process: a
// network applied, addresses allocated, shown and released into
// quarantine; a node's node-local network; bad networks refused with
// nothing stored; a network with allocations not deleted.
func TestNetworkIPAM(t *testing.T) {
	dir := t.TempDir()
	url := startRootServer(t, dir, "root:\n  address_quarantine: 1h\n")
	a := adminCLI{t, url}
	run, must, wantErr := a.run, a.must, a.wantErr
	testutil.Eventually(t, 30*time.Second, "root to answer", func() error { _, err := run("status"); return err })

	must("apply", "-f", writeFile(t, dir, "net.yaml", `
kind: Network
name: net-a
spec: {cidr: 10.0.0.0/29, gateway: 10.0.0.1, scope: cluster, cluster: c1}
`))
	// Bad networks are refused, each with its reason, and nothing of their
	// apply is stored.
	for _, tc := range []struct{ name, doc, want string }{
		{"slash33", "spec: {cidr: 10.0.0.0/33, scope: cluster, cluster: c1}", "an IPv4 prefix length is 0 to 32, not 33"},
		{"overlap", "spec: {cidr: 10.0.0.0/28, scope: cluster, cluster: c1}", `overlaps network "net-a" (10.0.0.0/29) in the same cluster "c1"`},
		{"gateway", "spec: {cidr: 10.1.0.0/24, gateway: 10.2.0.1, scope: cluster, cluster: c1}", "spec.gateway: 10.2.0.1 is outside the network 10.1.0.0/24"},
	} {
		file := writeFile(t, dir, tc.name+".yaml", "kind: Flavor\nname: ok-"+tc.name+"\nspec: {kind: vm, vcpus: 1, memory: 1Gi}\n---\nkind: Network\nname: "+tc.name+"\n"+tc.doc+"\n")
		wantErr(tc.want, "apply", "-f", file)
		wantErr("not found", "get", "network", tc.name)
		wantErr("not found", "get", "flavor", "ok-"+tc.name)
	}

	if got := strings.TrimSpace(must("networks", "allocate", "net-a", "--holder", "compute/web-0/eth0")); got != "10.0.0.2" {
		t.Fatalf("first allocation: %q, want 10.0.0.2", got)
	}
	if got := strings.TrimSpace(must("networks", "allocate", "net-a", "--holder", "compute/web-0/eth0")); got != "10.0.0.2" {
		t.Errorf("a retried allocation: %q, want the same 10.0.0.2", got)
	}
	if got := strings.TrimSpace(must("networks", "allocate", "net-a", "--holder", "compute/web-1/eth0")); got != "10.0.0.3" {
		t.Errorf("second holder: %q, want 10.0.0.3", got)
	}
	out := must("networks", "get", "net-a")
	for _, want := range []string{"5: 2 used, 3 free, 0 in quarantine", "10.0.0.2", "compute/web-0/eth0", "compute/web-1/eth0"} {
		if !strings.Contains(out, want) {
			t.Errorf("networks get does not show %q:\n%s", want, out)
		}
	}
	if out := must("networks", "ls"); !strings.Contains(out, "USED") || !strings.Contains(out, "cluster c1") {
		t.Errorf("networks ls:\n%s", out)
	}
	if out := must("networks", "get", "net-a", "-o", "yaml"); !strings.Contains(out, "usage:") || !strings.Contains(out, "holder: compute/web-1/eth0") {
		t.Errorf("-o yaml without the usage:\n%s", out)
	}
	wantErr(`network "net-a" still has 2 allocated addresses, held by compute/web-0/eth0 (10.0.0.2), compute/web-1/eth0 (10.0.0.3)`, "delete", "network", "net-a")
	wantErr("would no longer be allocatable", "apply", "-f", writeFile(t, dir, "moved.yaml", "kind: Network\nname: net-a\nspec: {cidr: 10.9.0.0/29, scope: cluster, cluster: c1}\n"))

	// A release puts the address in quarantine: shown, and not handed out.
	if out := must("networks", "release", "net-a", "10.0.0.2"); !strings.Contains(out, "in quarantine until") {
		t.Errorf("release: %s", out)
	}
	if out := must("networks", "get", "net-a"); !strings.Contains(out, "5: 1 used, 3 free, 1 in quarantine") || !strings.Contains(out, "quarantined until") {
		t.Errorf("after a release:\n%s", out)
	}
	for _, h := range []string{"a", "b", "c"} {
		if got := strings.TrimSpace(must("networks", "allocate", "net-a", "--holder", h)); got == "10.0.0.2" {
			t.Errorf("%s got 10.0.0.2, which is in quarantine", h)
		}
	}
	wantErr("network net-a is full (5 addresses: 4 allocated, 1 in quarantine after release", "networks", "allocate", "net-a", "--holder", "d")

	// A node's node-local network needs no object.
	if got := strings.TrimSpace(must("networks", "allocate", "node-local/node-1", "--holder", "port-1")); got != "169.254.32.0" {
		t.Errorf("node-local allocation: %q", got)
	}
	if out := must("networks", "get", "node-local/node-1"); !strings.Contains(out, "169.254.32.0/19") || !strings.Contains(out, "8192: 1 used, 8191 free") {
		t.Errorf("node-local network:\n%s", out)
	}

	for _, h := range []string{"compute/web-1/eth0", "a", "b", "c"} {
		must("networks", "release", "net-a", "--holder", h)
	}
	must("delete", "network", "net-a")
	wantErr("not found", "networks", "get", "net-a")
}
