// Package xdptest builds network-namespace topologies for the XDP load
// balancer's tests: named namespaces joined by veth pairs, addresses and
// routes, small HTTP servers bound inside a namespace and clients dialling
// from one. Every namespace, link and listener is removed when the test
// ends (also after a failure), and Leftovers tells a test whether anything
// of its own is still there. Without root (or with CI=true and a missing
// capability) the test skips or fails as testutil.Unavailable says.
package xdptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
)

// NeedRoot skips (or with CI=true fails) a test that cannot make
// namespaces and load BPF programs.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces and XDP need root")
	}
}

// Suffix is a random suffix for names of one test, so that engineers
// running tests side by side do not clash.
func Suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NS is a named network namespace of one test.
type NS struct {
	Name string
	// Path is /run/netns/NAME, what the plugin's netns config takes.
	Path string
}

// NewNS makes a namespace (lo up) removed when the test ends.
func NewNS(t testing.TB, name string) *NS {
	t.Helper()
	NeedRoot(t)
	// NewNamed switches the calling thread into the new namespace: a
	// locked thread of its own switches back (or dies with its goroutine).
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		if serr := netns.Set(orig); serr != nil {
			errc <- serr
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	err := <-errc
	if err != nil {
		testutil.Unavailable(t, fmt.Sprintf("making network namespace %s: %v", name, err))
	}
	ns := &NS{Name: name, Path: "/run/netns/" + name}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
			t.Errorf("removing network namespace %s: %v", name, err)
		}
	})
	if err := ns.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatalf("lo up in %s: %v", name, err)
	}
	return ns
}

// Do runs fn inside the namespace.
func (ns *NS) Do(fn func() error) error { return nsutil.Do(ns.Path, fn) }

// Sysctl sets a sysctl inside the namespace.
func (ns *NS) Sysctl(t testing.TB, name, value string) {
	t.Helper()
	if err := nsutil.Sysctl(ns.Path, name, value); err != nil {
		t.Fatal(err)
	}
}

// Link is one end of a veth pair.
type Link struct {
	NS    *NS
	Name  string
	Addr  netip.Prefix
	MAC   net.HardwareAddr
	Index int
}

// Veth joins a and b with a veth pair named an (in a) and bn (in b), with
// the given addresses, both up, TX checksum offload off (so that packets
// carry real checksums, as from a wire). The pair goes with the
// namespaces.
func Veth(t testing.TB, a *NS, an string, aAddr netip.Prefix, b *NS, bn string, bAddr netip.Prefix) (*Link, *Link) {
	t.Helper()
	bh, err := netns.GetFromPath(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	err = a.Do(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an}, PeerName: bn, PeerNamespace: netlink.NsFd(int(bh))})
	})
	if err != nil {
		t.Fatalf("veth %s/%s: %v", an, bn, err)
	}
	la, lb := &Link{NS: a, Name: an, Addr: aAddr}, &Link{NS: b, Name: bn, Addr: bAddr}
	for _, l := range []*Link{la, lb} {
		if err := l.NS.Do(func() error {
			nl, err := netlink.LinkByName(l.Name)
			if err != nil {
				return err
			}
			if l.Addr.IsValid() {
				if err := netlink.AddrAdd(nl, &netlink.Addr{IPNet: prefixNet(l.Addr)}); err != nil {
					return err
				}
			}
			if err := SetTxChecksum(l.Name, false); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(nl); err != nil {
				return err
			}
			l.MAC, l.Index = nl.Attrs().HardwareAddr, nl.Attrs().Index
			return nil
		}); err != nil {
			t.Fatalf("setting up %s in %s: %v", l.Name, l.NS.Name, err)
		}
	}
	return la, lb
}

// Route adds a route to dst via gw (a zero gw: on-link through dev).
func (ns *NS) Route(t testing.TB, dst netip.Prefix, gw netip.Addr, dev string) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		r := &netlink.Route{Dst: prefixNet(dst), LinkIndex: l.Attrs().Index}
		if gw.IsValid() {
			r.Gw = gw.AsSlice()
		}
		return netlink.RouteAdd(r)
	}); err != nil {
		t.Fatalf("route %s via %s dev %s in %s: %v", dst, gw, dev, ns.Name, err)
	}
}

// Neigh adds a permanent neighbour entry.
func (ns *NS) Neigh(t testing.TB, dev string, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		return netlink.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: mac})
	}); err != nil {
		t.Fatalf("neighbour %s on %s in %s: %v", ip, dev, ns.Name, err)
	}
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// SetTxChecksum switches a device's TX checksum offload (ethtool -K DEV tx
// on|off) in the calling thread's namespace. On veth, offload leaves
// locally sent packets with partial checksums that an XDP program sees
// unfinished; from a wire they are complete.
func SetTxChecksum(dev string, on bool) error {
	const ethtoolSTXCSUM = 0x17
	val := struct{ cmd, data uint32 }{ethtoolSTXCSUM, 0}
	if on {
		val.data = 1
	}
	var ifr [unix.IFNAMSIZ + 24]byte
	copy(ifr[:unix.IFNAMSIZ-1], dev)
	*(*uintptr)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = uintptr(unsafe.Pointer(&val))
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("ethtool -K %s tx: %w", dev, e)
	}
	return nil
}

// Server is an HTTP server bound in a namespace that answers its name.
type Server struct {
	Name string
	Addr netip.AddrPort
	srv  *http.Server
	once sync.Once
}

// Serve starts an HTTP server on addr inside ns, answering "NAME\n" on
// every path; it stops when the test ends or on Stop.
func Serve(t testing.TB, ns *NS, name string, addr netip.AddrPort) *Server {
	t.Helper()
	l, err := nsutil.Listen(ns.Path, "tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, ns.Name, err)
	}
	s := &Server{Name: name, Addr: addr, srv: &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name+"\n")
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}}
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(s.Stop)
	return s
}

// Stop closes the listener and every connection: the backend is dead.
func (s *Server) Stop() { s.once.Do(func() { _ = s.srv.Close() }) }

// Client returns an HTTP client dialling from ns; keepAlive false makes a
// new connection (a new flow) per request.
func Client(ns *NS, keepAlive bool, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:       nsutil.Dialer(ns.Path, &net.Dialer{Timeout: timeout}),
		DisableKeepAlives: !keepAlive,
	}}
}

// Get fetches url with c and returns the trimmed body.
func Get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

// Fetch makes n requests to url with c (a client without keep-alives makes
// each on a new connection: a new flow) and counts the answers by body;
// failures count under "", the first five of their errors returned.
func Fetch(c *http.Client, url string, n int) (map[string]int, []error) {
	got := map[string]int{}
	var errs []error
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		body, err := Get(ctx, c, url)
		cancel()
		if err != nil {
			got[""]++
			if len(errs) < 5 {
				errs = append(errs, err)
			}
			continue
		}
		got[body]++
	}
	return got, errs
}

// Spread makes n requests to url (Fetch): all must succeed, each of want
// must answer within ±20% of its share, and nobody else may answer.
func Spread(t testing.TB, c *http.Client, url string, n int, want ...string) {
	t.Helper()
	got, errs := Fetch(c, url, n)
	if got[""] > 0 {
		t.Errorf("%d of %d requests failed: %v", got[""], n, errs)
	}
	share := float64(n) / float64(len(want))
	// Each request's source port is random, so a backend's count is
	// binomial: allow 20% or five standard deviations, whichever is wider
	// (at 300 requests over three, 20% is 2.4 deviations: about one run
	// in twenty failed with all in rotation and spread evenly).
	p := 1 / float64(len(want))
	slack := max(0.2*share, 5*math.Sqrt(float64(n)*p*(1-p)))
	in := map[string]bool{}
	for _, w := range want {
		in[w] = true
		if c := float64(got[w]); c < share-slack || c > share+slack {
			t.Errorf("%s answered %v of %d requests, want %.0f±%.0f: %v", w, c, n, share, slack, got)
		}
	}
	for k, c := range got {
		if k != "" && !in[k] {
			t.Errorf("%s answered %d requests; it is not in rotation: %v", k, c, got)
		}
	}
	t.Logf("%d requests: %v", n, got)
}

// Leftovers lists what of the given namespace names and mount points is
// still there: the test's cleanup check.
func Leftovers(names []string, mounts []string) []string {
	var left []string
	for _, n := range names {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			left = append(left, "netns "+n)
		}
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		for _, m := range mounts {
			if f[4] == m {
				left = append(left, "mount "+m)
			}
		}
	}
	return left
}

// Topology is a load balancer's network: a client namespace and backend
// namespaces, each joined to the load balancer's namespace by a veth pair,
// the load balancer routing between them. The client reaches every VIP in
// VIPNet through the load balancer; the backends' default route is the
// load balancer, so their replies pass through it.
//
//	client 10.77.0.2 --- lbc0 10.77.0.1 [LB] lbbN 10.77.N.1 --- eth0 10.77.N.2 backend N
type Topology struct {
	Client, LB *NS
	// Iface is the load balancer's interface towards the client, where
	// the XDP program goes.
	Iface    string
	Backends []*BackendNS
	sfx      string
	names    []string
}

// BackendNS is one backend's namespace and address.
type BackendNS struct {
	NS   *NS
	Addr netip.Addr
}

// VIPNet holds the VIPs a topology's client routes to the load balancer.
var VIPNet = netip.MustParsePrefix("10.77.200.0/24")

// NewTopology makes the client, the load balancer and n backends.
func NewTopology(t testing.TB, n int) *Topology {
	t.Helper()
	sfx := Suffix()
	tp := &Topology{sfx: sfx, Iface: "lbc0"}
	tp.Client = tp.ns(t, "uxc-"+sfx)
	tp.LB = tp.ns(t, "uxl-"+sfx)
	Veth(t, tp.Client, "eth0", netip.MustParsePrefix("10.77.0.2/24"), tp.LB, tp.Iface, netip.MustParsePrefix("10.77.0.1/24"))
	tp.Client.Route(t, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.77.0.1"), "eth0")
	tp.LB.Sysctl(t, "net.ipv4.conf.all.forwarding", "1")
	for range n {
		tp.AddBackend(t)
	}
	return tp
}

func (tp *Topology) ns(t testing.TB, name string) *NS {
	tp.names = append(tp.names, name)
	return NewNS(t, name)
}

// Names are the namespaces made, for Leftovers.
func (tp *Topology) Names() []string { return tp.names }

// ClientAddr is the client's address.
func (tp *Topology) ClientAddr() netip.Addr { return netip.MustParseAddr("10.77.0.2") }

// AddBackend makes one more backend namespace.
func (tp *Topology) AddBackend(t testing.TB) *BackendNS {
	t.Helper()
	i := len(tp.Backends) + 1
	ns := tp.ns(t, fmt.Sprintf("uxb%d-%s", i, tp.sfx))
	lbSide := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(i), 1}), 24)
	addr := netip.AddrFrom4([4]byte{10, 77, byte(i), 2})
	Veth(t, tp.LB, fmt.Sprintf("lbb%d", i), lbSide, ns, "eth0", netip.PrefixFrom(addr, 24))
	ns.Route(t, netip.MustParsePrefix("0.0.0.0/0"), lbSide.Addr(), "eth0")
	b := &BackendNS{NS: ns, Addr: addr}
	tp.Backends = append(tp.Backends, b)
	return b
}

// ServeUDP answers every datagram to addr inside ns with "NAME\n"; it stops
// when the test ends.
func ServeUDP(t testing.TB, ns *NS, name string, addr netip.AddrPort) {
	t.Helper()
	c, err := nsutil.ListenPacket(ns.Path, "udp4", addr.String())
	if err != nil {
		t.Fatalf("listening on udp %s in %s: %v", addr, ns.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo([]byte(name+"\n"), from)
		}
	}()
}
