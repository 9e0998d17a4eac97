package integration

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/unyo-ops/unyo/core/agent/portnet"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/provider-libvirt/virttest"
)

// A VM service through a RegionService, end to end (issue 15): root, a
// cluster and an agent that is its own host in a network namespace, with
// provider-libvirt on qemu:///embed (software emulation). A RegionService
// of flavor kind vm, cpu_policy pinned, with 1 replica: the VM boots to
// its ready line on its console with its address and gateway from the
// kernel command line, its vCPU is pinned, and it answers HTTP on its /32
// from another namespace through its port namespace (the VM's tap moved
// in). Deleting the service leaves no domain, disk, tap, port namespace
// or QEMU.
func TestVMServiceEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "VMs with per-port network namespaces need root")
	}
	testutil.NeedTool(t, "nsenter", "apt-get install util-linux", "/usr/bin/nsenter")
	if out, err := exec.Command("pkg-config", "--exists", "libvirt").CombinedOutput(); err != nil {
		testutil.Unavailable(t, fmt.Sprintf("provider-libvirt builds with cgo against libvirt-dev (apt-get install libvirt-dev pkg-config): %v %s", err, out))
	}
	embed := virttest.NewEmbed(t)
	images := t.TempDir()
	virttest.Guest(t, filepath.Join(images, "guest"), virttest.GuestInit)
	state := t.TempDir()
	dir := t.TempDir()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)

	// The node, and a client namespace linked to it (another host of the
	// network: the L3 advertisement's stand-in is a static route).
	node := newNodeNS(t, "unyo-vm-n-"+sfx)
	client := newNodeNS(t, "unyo-vm-c-"+sfx)
	ln, lc := "vn"+sfx, "vc"+sfx
	ipCmd(t, "link", "add", ln, "netns", node.name, "type", "veth", "peer", "name", lc, "netns", client.name)
	const nodeAddr, clientAddr = "198.18.1.1", "198.18.1.2"
	ipCmd(t, "-n", node.name, "addr", "add", nodeAddr+"/32", "dev", ln)
	ipCmd(t, "-n", node.name, "link", "set", ln, "up")
	ipCmd(t, "-n", node.name, "route", "add", clientAddr+"/32", "dev", ln, "scope", "link")
	ipCmd(t, "-n", client.name, "addr", "add", clientAddr+"/32", "dev", lc)
	ipCmd(t, "-n", client.name, "link", "set", lc, "up")
	ipCmd(t, "-n", client.name, "route", "add", nodeAddr+"/32", "dev", lc, "scope", "link")

	nodes := map[string]nodeNS{"node-a": node}
	rootURL, _ := startPortFleet(t, dir, nodes, "libvirt", func(string) string {
		return fmt.Sprintf(`{uri: %q, state_dir: %q, images_dir: %q}`, embed.URI, state, images)
	})
	a := adminCLI{t, rootURL}
	applied := time.Now()
	a.must("apply", "-f", writeFile(t, dir, "catalog.yaml", `
kind: Flavor
name: vmsmall
spec: {kind: vm, vcpus: 1, cpu_policy: pinned, memory: 256Mi}
---
kind: Image
name: guest
spec: {kind: vm, source: guest, format: kernel}
---
kind: Network
name: vmnet
spec: {cidr: 10.232.0.0/24, gateway: 10.232.0.1, scope: region, region: tokyo}
---
kind: RegionService
name: vmweb
spec:
  region: tokyo
  compute:
    flavor: vmsmall
    image: guest
    network: vmnet
    provider: libvirt
    replicas: 1
`))
	testutil.Eventually(t, 180*time.Second, "vmweb Active 1/1", func() error {
		out, err := a.run("services", "get", "vmweb")
		if err == nil && (!strings.Contains(out, "Active") || !strings.Contains(out, "1/1")) {
			err = fmt.Errorf("services get vmweb:\n%s", out)
		}
		return err
	})
	items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
	if err != nil || len(items) != 1 {
		t.Fatalf("computes: %v, %v", items, err)
	}
	compute := fmt.Sprint(items[0]["name"])
	st, _ := items[0]["status"].(map[string]any)
	addr := fmt.Sprint(st["address"])
	if addr == "" || addr == "<nil>" {
		addr = fmt.Sprint(items[0]["address"])
	}
	addr = strings.Split(addr, "/")[0]
	domain := "unyo-" + compute // provider-libvirt's default name_prefix
	console := filepath.Join(state, domain, "console.log")

	// It boots to its ready line with the address from the command line.
	testutil.Eventually(t, 120*time.Second, "the VM's ready line on its console", func() error {
		b, _ := os.ReadFile(console)
		if !strings.Contains(string(b), virttest.ReadyLine) {
			return fmt.Errorf("no ready line yet; console ends %q", tail(string(b), 300))
		}
		if !strings.Contains(string(b), "addr="+addr) {
			return fmt.Errorf("the guest did not get %s from its command line: %q", addr, tail(string(b), 300))
		}
		return nil
	})
	// The figure (software emulation; the poll adds up to its
	// interval): apply to the ready line.
	t.Logf("apply to the VM's ready line: %v (load: %s)", time.Since(applied).Round(100*time.Millisecond), loadavg())
	qemu := virttest.QEMUProcesses(domain)
	if len(qemu) != 1 {
		t.Fatalf("QEMU processes of %s: %v, want 1", domain, qemu)
	}
	// cpu_policy pinned: the flavor's one vCPU runs on the node's CPU 0.
	if got := vcpuAffinity(t, qemu[0]); got != "0" {
		t.Errorf("vCPU 0 of the pinned flavor may run on CPUs %q, want 0", got)
	}

	// It answers on its /32 from the client's namespace: node, port
	// namespace, the VM's tap.
	ipCmd(t, "-n", client.name, "route", "add", addr+"/32", "via", nodeAddr, "dev", lc, "onlink")
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%s answering on %s from another host", compute, addr), func() error {
		code, body, err := getIn(t, client.path, "http://"+addr+"/index.html")
		if err == nil && (code != 200 || !strings.HasPrefix(body, "unyo guest")) {
			err = fmt.Errorf("status %d: %q", code, body)
		}
		return err
	})
	tap := "uv" + hex.EncodeToString(sha256Sum(compute))[:12] // provider-libvirt's tap of the compute
	if linkIn(t, node.path, tap) {
		t.Errorf("the VM's tap %s is still in the node's namespace, not in its port's", tap)
	}

	a.must("services", "delete", "vmweb")
	testutil.Eventually(t, 90*time.Second, "nothing of the VM left", func() error {
		if p := virttest.QEMUProcesses(domain); len(p) > 0 {
			return fmt.Errorf("QEMU %v", p)
		}
		if defs := domainFiles(embed.Root, domain); len(defs) > 0 {
			return fmt.Errorf("domain definitions %v", defs)
		}
		if _, err := os.Stat(filepath.Join(state, domain)); !os.IsNotExist(err) {
			return fmt.Errorf("the VM's disk and console dir: %v", err)
		}
		if linkIn(t, node.path, tap) {
			return fmt.Errorf("tap %s", tap)
		}
		h, err := netns.GetFromPath(node.path)
		if err != nil {
			return err
		}
		defer h.Close()
		m, err := portnet.New("node-a", h)
		if err != nil {
			return err
		}
		defer m.Close()
		if left, err := m.List(); err != nil || len(left) > 0 {
			return fmt.Errorf("port namespaces %v (%v)", left, err)
		}
		return nil
	})
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// vcpuAffinity is the CPU list vCPU 0's thread of QEMU pid may run on
// (its thread is named "CPU 0/TCG" under software emulation, "CPU 0/KVM"
// otherwise).
func vcpuAffinity(t *testing.T, pid string) string {
	t.Helper()
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*")
	for _, task := range tasks {
		comm, _ := os.ReadFile(filepath.Join(task, "comm"))
		if !strings.HasPrefix(string(comm), "CPU 0/") {
			continue
		}
		status, err := os.ReadFile(filepath.Join(task, "status"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	t.Fatalf("QEMU %s has no vCPU 0 thread", pid)
	return ""
}

// domainFiles are the files under the embed root that define or describe
// domain (its persistent definition, its status); QEMU's log of it stays,
// as libvirt keeps it.
func domainFiles(root, domain string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == domain+".xml" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// linkIn says whether the namespace at path has a link of that name.
func linkIn(t *testing.T, path, name string) bool {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	_, err = nh.LinkByName(name)
	return err == nil
}
