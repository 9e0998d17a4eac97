package portnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/unyo-ops/unyo/core/testutil"
)

// needRoot skips (or, with CI=true, fails) where namespaces cannot be made.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces need root")
	}
}

func suffix(t testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testNS creates a named namespace with lo up, removed at the test's end.
func testNS(t testing.TB, name string) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr)
	}
	runtime.UnlockOSThread()
	orig.Close()
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := setUp(h, "lo"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// fixture is a node namespace standing in for the host (so that nothing
// touches the machine's own), its manager, and a container's namespace.
type fixture struct {
	m         *Manager
	host      netns.NsHandle
	container netns.NsHandle
	ctrPath   string
	port      Port
}

func newFixture(t testing.TB) *fixture {
	needRoot(t)
	s := suffix(t)
	host := testNS(t, "unyo-test-host-"+s)
	ctr := testNS(t, "unyo-test-ctr-"+s)
	m, err := New("node-"+s, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	p := Port{Compute: "web-" + s + "-0", Link: netip.MustParseAddr("169.254.32.7"), Address: netip.MustParseAddr("10.99.0.7")}
	t.Cleanup(func() {
		if err := m.Remove(p.Compute); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return &fixture{m: m, host: host, container: ctr, ctrPath: filepath.Join(runDir, "unyo-test-ctr-"+s), port: p}
}

// ping sends ICMP echo from inside ns to dst and waits for the reply.
func ping(t testing.TB, ns netns.NsHandle, dst netip.Addr) error {
	t.Helper()
	var conn *icmp.PacketConn
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if serr := netns.Set(orig); serr != nil {
		t.Fatal(serr)
	}
	runtime.UnlockOSThread()
	orig.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: 1, Data: []byte("unyo")}}
	b, _ := msg.Marshal(nil)
	var last error
	for range 3 {
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			last = err
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				last = err
				break
			}
			r, err := icmp.ParseMessage(1, buf[:n])
			if err == nil && r.Type == ipv4.ICMPTypeEchoReply && from.String() == dst.String() {
				return nil
			}
		}
	}
	return last
}

func TestPortLifecycle(t *testing.T) {
	f := newFixture(t)
	if err := f.m.Ensure(f.port); err != nil {
		t.Fatal(err)
	}
	// Ensure again is a no-op (an agent restarting).
	if err := f.m.Ensure(f.port); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if err := f.m.Attach(f.port, f.ctrPath); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Attach(f.port, f.ctrPath); err != nil {
		t.Fatalf("second Attach: %v", err)
	}
	if err := ping(t, f.host, f.port.Address); err != nil {
		t.Fatalf("ping the compute's /32 from the node: %v", err)
	}
	if err := ping(t, f.container, Gateway); err != nil {
		t.Fatalf("ping the gateway from the compute: %v", err)
	}
	ns, err := netns.GetFromName(f.m.Name(f.port.Compute))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := hasRules(ns)
	ns.Close()
	if err != nil || !ok {
		t.Fatalf("the port's nftables table: present=%v err=%v", ok, err)
	}
	names, err := f.m.List()
	if err != nil || len(names) != 1 || names[0] != f.m.Name(f.port.Compute) {
		t.Fatalf("List = %v, %v", names, err)
	}

	if err := f.m.Remove(f.port.Compute); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f)
	if err := f.m.Remove(f.port.Compute); err != nil {
		t.Fatalf("removing a removed port: %v", err)
	}
}

// assertGone checks that nothing of f's port is left: its namespace, the
// node's link and routes, the container's eth0.
func assertGone(t *testing.T, f *fixture) {
	t.Helper()
	if _, err := os.Stat(f.m.Path(f.port.Compute)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the port namespace is left: %v", err)
	}
	hh, err := netlink.NewHandleAt(f.host)
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close()
	links, _ := hh.LinkList()
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			t.Errorf("node link %s is left", l.Attrs().Name)
		}
	}
	routes, _ := hh.RouteList(nil, netlink.FAMILY_V4)
	for _, r := range routes {
		t.Errorf("node route %v is left", r)
	}
	ch, err := netlink.NewHandleAt(f.container)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.LinkByName(containerLink); err == nil {
		t.Errorf("the container's %s is left", containerLink)
	}
}

func TestPortLocal(t *testing.T) {
	f := newFixture(t)
	if err := f.m.Ensure(f.port); err != nil {
		t.Fatal(err)
	}
	if err := f.m.AttachLocal(f.port); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, f.host, f.port.Address); err != nil {
		t.Fatalf("ping a process port's /32 from the node: %v", err)
	}
	if err := f.m.Remove(f.port.Compute); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f)
}

func TestPortTap(t *testing.T) {
	f := newFixture(t)
	if err := f.m.Ensure(f.port); err != nil {
		t.Fatal(err)
	}
	// A tap in the node's namespace, as libvirt's VM would have.
	hh, err := netlink.NewHandleAt(f.host)
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close()
	tap := "ut" + suffix(t)
	// /dev/net/tun makes the tap in the calling thread's namespace.
	err = f.m.inNS(f.host, func() error {
		tt := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: tap}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_DEFAULTS}
		err := netlink.LinkAdd(tt)
		for _, fd := range tt.Fds {
			fd.Close()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := hh.LinkByName(tap); err == nil {
			_ = hh.LinkDel(l)
		}
	})
	if err := f.m.AttachTap(f.port, tap); err != nil {
		t.Fatal(err)
	}
	if err := f.m.AttachTap(f.port, tap); err != nil {
		t.Fatalf("second AttachTap: %v", err)
	}
	if _, err := hh.LinkByName(tap); err == nil {
		t.Fatal("the tap is still in the node's namespace")
	}
	ns, nh, err := f.m.open(f.port.Compute)
	if err != nil {
		t.Fatal(err)
	}
	l, err := nh.LinkByName(nsComputeLink)
	if err != nil {
		t.Fatalf("the tap as %s in the port namespace: %v", nsComputeLink, err)
	}
	if _, ok := l.(*netlink.Tuntap); !ok {
		t.Errorf("%s is a %s, not the tap", nsComputeLink, l.Type())
	}
	nh.Close()
	ns.Close()
	if err := f.m.Remove(f.port.Compute); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f)
}

func TestPortForeignNamespace(t *testing.T) {
	f := newFixture(t)
	// Something else made a namespace of the port's name, with a link of
	// its own.
	other := testNS(t, f.m.Name(f.port.Compute))
	h, err := netlink.NewHandleAt(other)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "foreign0"}, PeerName: "foreign1"}); err != nil {
		t.Fatal(err)
	}
	err = f.m.Ensure(f.port)
	if !errors.Is(err, ErrForeign) {
		t.Fatalf("Ensure over a foreign namespace = %v, want ErrForeign", err)
	}
	if !strings.Contains(err.Error(), f.port.Compute) {
		t.Errorf("the error %q does not name the compute", err)
	}
	if err := f.m.Remove(f.port.Compute); !errors.Is(err, ErrForeign) {
		t.Fatalf("Remove of a foreign namespace = %v, want ErrForeign", err)
	}
	if _, err := os.Stat(f.m.Path(f.port.Compute)); err != nil {
		t.Fatalf("the foreign namespace was removed: %v", err)
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	keep := f.port
	gone := Port{Compute: keep.Compute + "-old", Link: netip.MustParseAddr("169.254.32.8"), Address: netip.MustParseAddr("10.99.0.8")}
	t.Cleanup(func() { _ = f.m.Remove(gone.Compute) })
	for _, p := range []Port{keep, gone} {
		if err := f.m.Ensure(p); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := f.m.Prune(map[string]bool{keep.Compute: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != f.m.Name(gone.Compute) {
		t.Fatalf("Prune removed %v, want only %s", removed, f.m.Name(gone.Compute))
	}
	if names, _ := f.m.List(); len(names) != 1 {
		t.Fatalf("left %v", names)
	}
}

func TestNames(t *testing.T) {
	m := &Manager{prefix: "unyo-" + hash("n1", 6) + "-"}
	long := strings.Repeat("x", 200)
	for _, tc := range []struct{ a, b string }{
		{"web-0", "web-1"},
		{long + "a", long + "b"},
		{"a/b", "a_b"},
	} {
		na, nb := m.Name(tc.a), m.Name(tc.b)
		if na == nb {
			t.Errorf("%q and %q share the namespace name %s", tc.a, tc.b, na)
		}
		if len(na) > 64 || len(hostLinkName(na)) > 15 {
			t.Errorf("names of %q too long: %s, %s", tc.a, na, hostLinkName(na))
		}
	}
	other := &Manager{prefix: "unyo-" + hash("n2", 6) + "-"}
	if m.Name("web-0") == other.Name("web-0") {
		t.Error("two nodes name a compute's port alike")
	}
}

// BenchmarkPortSetup measures a container port's setup: namespace, links,
// addresses, routes and rules (Ensure and Attach); removing it is outside
// the timer (BenchmarkPortRemove measures that).
func BenchmarkPortSetup(b *testing.B) { benchPort(b, true) }

// BenchmarkPortRemove measures a container port's removal.
func BenchmarkPortRemove(b *testing.B) { benchPort(b, false) }

func benchPort(b *testing.B, setup bool) {
	f := newFixture(b)
	b.ResetTimer()
	for range b.N {
		if !setup {
			b.StopTimer()
		}
		if err := f.m.Ensure(f.port); err != nil {
			b.Fatal(err)
		}
		if err := f.m.Attach(f.port, f.ctrPath); err != nil {
			b.Fatal(err)
		}
		if setup {
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		if err := f.m.Remove(f.port.Compute); err != nil {
			b.Fatal(err)
		}
		if setup {
			b.StartTimer()
		}
	}
}
