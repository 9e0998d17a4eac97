package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
)

// xdpReplica is the command of the XDP test's replicas (provider exec, in
// their port namespaces): busybox httpd on 8080 answering the compute's
// name, which it reads from its metadata endpoint. BB and WWW are
// replaced by the busybox binary and a directory of the test.
const xdpReplica = `a=${UNYO_ADDRESS%/*}; d=WWW/$a; BB mkdir -p $d
until BB wget -qO $d/md http://169.254.1.2/v1/metadata; do BB sleep 0.2; done
BB sed -n 's/.*"compute": "\([^"]*\)".*/\1/p' $d/md > $d/index.html
exec BB httpd -f -p 8080 -h $d`

// lbBackend is one backend of a load balancer as root shows it.
type lbBackend struct {
	compute, address string
	healthy          bool
}

// lbNow is root's view of the service's load balancer: its phase, VIP, node
// and the backends its agent reported (health from the provider).
type lbNow struct {
	phase, vip, node string
	backends         []lbBackend
}

func (v lbNow) healthy() []string {
	var out []string
	for _, b := range v.backends {
		if b.healthy {
			out = append(out, b.compute)
		}
	}
	slices.Sort(out)
	return out
}

func readLB(t *testing.T, rootURL string) (lbNow, error) {
	items, err := cliJSON(t, rootURL, "--token", adminToken, "loadbalancers", "ls")
	if err != nil || len(items) != 1 {
		return lbNow{}, fmt.Errorf("load balancers: %v, %v", items, err)
	}
	st, _ := items[0]["status"].(map[string]any)
	v := lbNow{phase: fmt.Sprint(st["phase"]), vip: fmt.Sprint(items[0]["vip"]), node: fmt.Sprint(st["node"])}
	bs, _ := st["backends"].([]any)
	for _, b := range bs {
		m, _ := b.(map[string]any)
		h, _ := m["healthy"].(bool)
		v.backends = append(v.backends, lbBackend{compute: fmt.Sprint(m["compute"]), address: fmt.Sprint(m["address"]), healthy: h})
	}
	return v, nil
}

// halfRequest is a TCP connection to the VIP holding a request without
// its last line: the connection is established at its backend, which
// answers once the request is finished.
type halfRequest struct {
	c     net.Conn
	sport uint16
}

// halfTo opens a connection to vip:80 from the namespace at path and
// sends a request but for its last line.
func halfTo(t *testing.T, path, vip string) *halfRequest {
	t.Helper()
	c, err := nsutil.Dialer(path, &net.Dialer{Timeout: 3 * time.Second})(context.Background(), "tcp", vip+":80")
	if err != nil {
		t.Fatalf("connecting to the VIP: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: vip\r\n"); err != nil {
		t.Fatal(err)
	}
	return &halfRequest{c: c, sport: uint16(c.LocalAddr().(*net.TCPAddr).Port)}
}

// finish ends the request and reads the answer.
func (h *halfRequest) finish() (string, error) {
	_ = h.c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(h.c, "\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(h.c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// lbPrograms are the programs of the XDP load balancer on dev in the
// namespace at path: the XDP program's id (0: none) and the TC egress
// (TCX) programs' ids, where the reply program sits.
type lbPrograms struct {
	xdp    uint32
	egress []ebpf.ProgramID
}

func programsOn(t *testing.T, path, dev string) lbPrograms {
	t.Helper()
	var p lbPrograms
	if err := nsutil.Do(path, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			p.xdp = x.ProgId
		}
		// The query resolves the index in the caller's namespace.
		q, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXEgress})
		if err != nil {
			return fmt.Errorf("TCX egress programs of %s: %w", dev, err)
		}
		for _, a := range q.Programs {
			p.egress = append(p.egress, a.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// pidsOf lists the processes whose command line contains all of parts.
func pidsOf(parts ...string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		match := true
		for _, part := range parts {
			match = match && strings.Contains(string(cmd), part)
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); match && err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestXDPLoadbalancedService is issue 16 end to end: a RegionService with
// a loadbalancer of provider xdp, through root, a cluster and two agents
// each in a network namespace of its own as its own host. Node xa-SFX is
// the load balancer's: its agent runs provider-xdp on the interface
// towards the client; node xb-SFX runs the replicas (provider exec,
// busybox httpd answering its compute's name in its port namespace). The
// client routes the VIP to xa, xa routes the service's network to xb, xb
// routes the client back through xa (the L3 advertisement's stand-in):
//
//	client [xc 10.79.0.2] ── [xi 10.79.0.1, XDP] node xa [xa 10.79.1.1] ── [xb 10.79.1.2] node xb ── ports ── replicas
//
// 1,000 requests spread over the three replicas; a replica's process
// killed leaves rotation and no request fails after; a fourth replica
// gets its share while established connections the hashing keeps survive;
// provider-xdp SIGKILLed keeps forwarding, and the plugin the agent
// restarts takes the load balancer back (same program, and it follows a
// scale down). Everything goes with the service.
func TestXDPLoadbalancedService(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces and XDP need root")
	}
	testutil.NeedTool(t, "nsenter", "apt-get install util-linux", "/usr/bin/nsenter")
	bb := testutil.NeedTool(t, "busybox (static)", "apt-get install busybox-static", "/bin/busybox", "/usr/bin/busybox")
	dir := t.TempDir()
	sfx := xdptest.Suffix()
	pins := filepath.Join(dir, "bpf")
	www := filepath.Join(dir, "www")
	names := []string{"unyo-xa-" + sfx, "unyo-xb-" + sfx, "unyo-xc-" + sfx}
	var bins []string
	// Registered first, so it runs last: nothing of the test is left
	// (the links went with the namespaces).
	t.Cleanup(func() {
		left := xdptest.Leftovers(names, []string{pins})
		for _, part := range append(bins, www) {
			if pids := pidsOf(part); len(pids) > 0 {
				left = append(left, fmt.Sprintf("processes %v of %s", pids, part))
			}
		}
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	// Registered first, so they run after the agents stopped: the
	// replicas, then the bpffs provider-xdp mounted (it unmounts it when
	// the last load balancer goes; this is for a failed test).
	t.Cleanup(func() {
		for range 3 {
			if unix.Unmount(pins, unix.MNT_DETACH) != nil {
				break
			}
		}
	})
	t.Cleanup(func() {
		stopServiceProcs(t, dir)
		for _, pid := range pidsOf(www) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// The nodes' names are the test's own: port namespaces are named
	// after their node, and another test's node-a would share them.
	lbNode, beNode := "xa-"+sfx, "xb-"+sfx
	nodes := map[string]nodeNS{lbNode: newNodeNS(t, names[0]), beNode: newNodeNS(t, names[1])}
	for n, res := range map[string]string{lbNode: "srv-a", beNode: "srv-b"} {
		ns := nodes[n]
		ns.resource = res
		nodes[n] = ns
	}
	client := newNodeNS(t, names[2])
	a, b := nodes[lbNode].name, nodes[beNode].name
	iface := "xi" + sfx
	ipCmd(t, "link", "add", iface, "netns", a, "type", "veth", "peer", "name", "xc"+sfx, "netns", client.name)
	ipCmd(t, "link", "add", "xa"+sfx, "netns", a, "type", "veth", "peer", "name", "xb"+sfx, "netns", b)
	for _, l := range []struct{ ns, dev, addr string }{
		{client.name, "xc" + sfx, "10.79.0.2/24"}, {a, iface, "10.79.0.1/24"},
		{a, "xa" + sfx, "10.79.1.1/24"}, {b, "xb" + sfx, "10.79.1.2/24"},
	} {
		ipCmd(t, "-n", l.ns, "addr", "add", l.addr, "dev", l.dev)
		ipCmd(t, "-n", l.ns, "link", "set", l.dev, "up")
	}
	const netCIDR = "10.234.0.0/24"
	ipCmd(t, "-n", client.name, "route", "add", "default", "via", "10.79.0.1")
	ipCmd(t, "-n", a, "route", "add", netCIDR, "via", "10.79.1.2")
	ipCmd(t, "-n", b, "route", "add", "10.79.0.0/24", "via", "10.79.1.1")
	// A local sender's veth leaves partial checksums XDP would see
	// unfinished; a client on a wire sends complete ones.
	if err := nsutil.Do(client.path, func() error { return xdptest.SetTxChecksum("xc"+sfx, false) }); err != nil {
		t.Fatal(err)
	}

	xdp, execP := buildNodePlugin(t, "xdp"), buildNodePlugin(t, "exec")
	bins = []string{xdp.bin, execP.bin}
	xdp.config = fmt.Sprintf("{interface: %s, pin_dir: %s, state_dir: %s/xdp-state}", iface, pins, dir)
	execP.config = fmt.Sprintf("{state_dir: %s/exec-state}", dir)
	rootURL, _ := startNodeFleet(t, dir, nodes, func(node string) (string, []nodePlugin) {
		if node == lbNode {
			return "", []nodePlugin{xdp}
		}
		return "  capacity: {cpus: 16, memory: 4GiB}\n", []nodePlugin{execP}
	})
	adm := adminCLI{t, rootURL}
	cmd := strings.NewReplacer("BB", bb, "WWW", www).Replace(xdpReplica)
	adm.must("apply", "-f", writeFile(t, dir, "web.yaml", busyboxCatalog(bb, "xdpnet", netCIDR)+fmt.Sprintf(`
---
kind: RegionService
name: web
spec:
  region: tokyo
  compute:
    flavor: small
    image: busybox
    network: xdpnet
    provider: exec
    replicas: 3
    command: [%s, sh, -c, %s]
  loadbalancer:
    provider: xdp
    ports: [{port: 80, target_port: 8080, protocol: tcp}]
    health: {kind: http, path: /, interval: 1s, timeout: 500ms, fall: 2, rise: 2}
`, bb, strconv.Quote(cmd))))

	waitLB := func(what string, within time.Duration, ok func(v lbNow) bool) lbNow {
		t.Helper()
		var v lbNow
		testutil.Eventually(t, within, what, func() error {
			var err error
			if v, err = readLB(t, rootURL); err == nil && !ok(v) {
				err = fmt.Errorf("load balancer %+v", v)
			}
			return err
		})
		return v
	}
	three := []string{"web-0", "web-1", "web-2"}
	v := waitLB("web-lb Active with three healthy backends", 120*time.Second, func(v lbNow) bool {
		return v.phase == "Active" && slices.Equal(v.healthy(), three)
	})
	if v.node != lbNode {
		t.Fatalf("the load balancer is on %s, want %s (the only node with provider xdp)", v.node, lbNode)
	}
	progs := programsOn(t, nodes[lbNode].path, iface)
	if progs.xdp == 0 || len(progs.egress) != 1 {
		t.Fatalf("programs on %s's %s: %+v, want an XDP program and a TC egress one", lbNode, iface, progs)
	}
	addrOf := func(v lbNow) map[string]netip.Addr {
		m := map[string]netip.Addr{}
		for _, b := range v.backends {
			m[b.compute] = netip.MustParseAddr(strings.Split(b.address, "/")[0])
		}
		return m
	}
	cns := &xdptest.NS{Name: client.name, Path: client.path}
	// A new connection (a new flow) per request.
	hc, url := xdptest.Client(cns, false, 3*time.Second), "http://"+v.vip+"/index.html"

	// Spread.
	xdptest.Spread(t, hc, url, 1000, three...)

	// A replica's process killed: out of rotation after the health
	// check's fall (2 × 1 s), and no request fails after.
	addrs := addrOf(v)
	victim := "web-1"
	pids := pidsOf("httpd", filepath.Join(www, addrs[victim].String()))
	if len(pids) != 1 {
		t.Fatalf("%s's httpd: pids %v", victim, pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitLB(victim+" out of rotation", 20*time.Second, func(v lbNow) bool {
		return !slices.Contains(v.healthy(), victim)
	})
	t.Logf("%s out of rotation at root %v after its process was killed", victim, time.Since(killed).Round(100*time.Millisecond))
	got, errs := xdptest.Fetch(hc, url, 300)
	if got[""] > 0 {
		t.Errorf("after %s left rotation: %v (errors %v)", victim, got, errs)
	}
	// It is made again (self-healing) and comes back.
	waitLB(victim+" back in rotation", 90*time.Second, func(v lbNow) bool { return slices.Equal(v.healthy(), three) })

	// Scale up: connections established before (a request in flight on
	// each) keep their backend where the Maglev table keeps their bucket.
	v, _ = readLB(t, rootURL)
	addrs = addrOf(v)
	before := make([]dataplane.Backend, 0, 4)
	for _, n := range three {
		before = append(before, dataplane.Backend{Addr: addrs[n], InTable: true})
	}
	pickBefore := dataplane.Picker(before)
	vip, from := netip.MustParseAddr(v.vip), netip.MustParseAddr("10.79.0.2")
	var halves []*halfRequest
	for range 24 {
		halves = append(halves, halfTo(t, client.path, v.vip))
	}
	adm.must("services", "scale", "web", "4")
	four := append(slices.Clone(three), "web-3")
	v = waitLB("web-lb with four healthy backends", 90*time.Second, func(v lbNow) bool { return slices.Equal(v.healthy(), four) })
	addrs = addrOf(v)
	pickAfter := dataplane.Picker(append(slices.Clone(before), dataplane.Backend{Addr: addrs["web-3"], InTable: true}))
	kept := 0
	for _, h := range halves {
		i, j := pickBefore(from, vip, h.sport, 80, dataplane.TCP), pickAfter(from, vip, h.sport, 80, dataplane.TCP)
		if i != j {
			continue // its bucket moved to web-3: the hashing breaks it
		}
		kept++
		if who, err := h.finish(); err != nil || who != three[i] {
			t.Errorf("an established connection to %s (its bucket kept its backend) after the scale up: %q, %v", three[i], who, err)
		}
	}
	if kept == 0 {
		t.Fatal("no connection keeps its backend after the scale up; cannot tell that they survive")
	}
	t.Logf("%d of %d established connections kept their backend by the hashing; all of them survived", kept, len(halves))
	xdptest.Spread(t, hc, url, 1000, four...)

	// provider-xdp SIGKILLed: the program stays, traffic flows; the
	// agent restarts the plugin, which takes the load balancer back.
	pids = pidsOf(xdp.bin)
	if len(pids) != 1 {
		t.Fatalf("provider-xdp's processes: %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	xdptest.Spread(t, hc, url, 1000, four...)
	testutil.Eventually(t, 30*time.Second, "provider-xdp restarted by its agent", func() error {
		if p := pidsOf(xdp.bin); len(p) != 1 || p[0] == pids[0] {
			return fmt.Errorf("provider-xdp's processes: %v (killed %d)", p, pids[0])
		}
		return nil
	})
	if p := programsOn(t, nodes[lbNode].path, iface); !reflect.DeepEqual(p, progs) {
		t.Errorf("programs on %s after the plugin's restart: %+v, want the same %+v", iface, p, progs)
	}
	// The restarted plugin follows a change: web-3 leaves.
	adm.must("services", "scale", "web", "3")
	waitLB("web-lb with three backends after the plugin's restart", 90*time.Second, func(v lbNow) bool {
		return v.phase == "Active" && len(v.backends) == 3 && slices.Equal(v.healthy(), three)
	})
	xdptest.Spread(t, hc, url, 600, three...)
	if p := programsOn(t, nodes[lbNode].path, iface); !reflect.DeepEqual(p, progs) {
		t.Errorf("programs on %s after an update by the restarted plugin: %+v, want the same %+v", iface, p, progs)
	}

	// The service deleted: the load balancer goes, and with it the
	// program, its pins and the bpffs.
	adm.must("services", "delete", "web")
	testutil.Eventually(t, 90*time.Second, "web-lb gone", func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "loadbalancers", "ls")
		if err == nil && len(items) != 0 {
			err = fmt.Errorf("load balancers: %v", items)
		}
		return err
	})
	testutil.Eventually(t, 30*time.Second, "the XDP program, its pins and the bpffs gone", func() error {
		if p := programsOn(t, nodes[lbNode].path, iface); p.xdp != 0 || len(p.egress) > 0 {
			return fmt.Errorf("programs still on %s: %+v", iface, p)
		}
		if left := xdptest.Leftovers(nil, []string{pins}); len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	if got, _ := xdptest.Fetch(hc, url, 3); got[""] != 3 {
		t.Errorf("the VIP still answers after the service's deletion: %v", got)
	}
}
