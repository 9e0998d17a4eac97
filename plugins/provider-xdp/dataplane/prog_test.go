package dataplane

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
)

// XDP and TCX verdicts as the programs return them.
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
	tcxNext     = math.MaxUint32 // -1
)

var (
	vip      = netip.MustParseAddr("10.99.100.1")
	client   = netip.MustParseAddr("192.0.2.7")
	backendA = netip.MustParseAddr("10.99.0.2")
	backendB = netip.MustParseAddr("10.99.0.3")
	backendC = netip.MustParseAddr("10.99.0.4")
	// Not routed in the test namespace: the kernel gets the packet.
	unrouted  = netip.MustParseAddr("203.0.113.9")
	clientMAC = net.HardwareAddr{2, 0, 0, 0, 0, 0xc1}
)

// rig is a loaded program in a namespace where 10.99.0.0/24 is on link v0
// with permanent neighbour entries for the three backends, so that the
// program's FIB lookups succeed and the MACs it writes are known.
type rig struct {
	d    *Dataplane
	ns   *xdptest.NS
	v0   *xdptest.Link
	macs map[netip.Addr]net.HardwareAddr
}

func newRig(t *testing.T) *rig { return newRigB(t) }

func newRigB(t testing.TB) *rig {
	xdptest.NeedRoot(t)
	sfx := xdptest.Suffix()
	ns, peer := xdptest.NewNS(t, "uxu-"+sfx), xdptest.NewNS(t, "uxp-"+sfx)
	v0, v1 := xdptest.Veth(t, ns, "v0", netip.MustParsePrefix("10.99.0.1/24"), peer, "v1", netip.MustParsePrefix("10.99.0.2/24"))
	ns.Sysctl(t, "net.ipv4.conf.all.forwarding", "1")
	r := &rig{ns: ns, v0: v0, macs: map[netip.Addr]net.HardwareAddr{backendA: v1.MAC,
		backendB: {2, 0, 0, 0, 0, 0xb2}, backendC: {2, 0, 0, 0, 0, 0xb3}}}
	for a, m := range r.macs {
		ns.Neigh(t, "v0", a, m)
	}
	d, err := Open(Options{PinDir: t.TempDir(), Detached: true})
	if err != nil {
		t.Fatalf("loading the program: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	r.d = d
	return r
}

func (r *rig) apply(t *testing.T, s ...Service) {
	t.Helper()
	if err := r.d.Apply(s); err != nil {
		t.Fatal(err)
	}
}

// run passes one packet through prog inside the rig's namespace.
func (r *rig) run(t *testing.T, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	var ret uint32
	var out []byte
	if err := r.ns.Do(func() error {
		var err error
		ret, out, err = prog.Test(in)
		return err
	}); err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, out
}

func three(inTable ...bool) []Backend {
	bs := []Backend{{Addr: backendA, InTable: true}, {Addr: backendB, InTable: true}, {Addr: backendC, InTable: true}}
	for i, in := range inTable {
		bs[i].InTable = in
	}
	return bs
}

func TestProgram(t *testing.T) {
	r := newRig(t)
	web := Service{Key: Key{VIP: vip, Port: 80, Proto: TCP}, TargetPort: 8080, Backends: three()}
	dns := Service{Key: Key{VIP: vip, Port: 53, Proto: UDP}, TargetPort: 5353, Backends: three()}
	r.apply(t, web, dns)
	base := pkt{srcMAC: clientMAC, dstMAC: r.v0.MAC, src: client, dst: vip, sport: 40000}

	picks := map[Key]func(src, dst netip.Addr, sport, dport uint16, proto Proto) int{web.Key: Picker(web.Backends), dns.Key: Picker(dns.Backends)}
	forwarded := func(t *testing.T, s Service, p pkt) netip.Addr {
		t.Helper()
		ret, out := r.run(t, r.d.XDPProgram(), p.build())
		if ret != xdpRedirect {
			t.Fatalf("verdict %d, want XDP_REDIRECT (%d)", ret, xdpRedirect)
		}
		got := parse(out)
		want := s.Backends[picks[s.Key](p.src, p.dst, p.sport, p.dport, p.proto)].Addr
		if got.dst != want || got.dport != s.TargetPort || got.src != p.src || got.sport != p.sport {
			t.Errorf("rewritten to %s:%d from %s:%d, want %s:%d (the Maglev pick) from %s:%d", got.dst, got.dport, got.src, got.sport, want, s.TargetPort, p.src, p.sport)
		}
		if !got.ipCsumOK {
			t.Errorf("IP checksum wrong after the rewrite")
		}
		if got.l4Csum != got.l4Want {
			t.Errorf("%s checksum %#04x, recomputed %#04x", p.proto, got.l4Csum, got.l4Want)
		}
		if !bytes.Equal(got.dstMAC, r.macs[want]) || !bytes.Equal(got.srcMAC, r.v0.MAC) {
			t.Errorf("MACs %s -> %s, want %s -> %s (the FIB's)", got.srcMAC, got.dstMAC, r.v0.MAC, r.macs[want])
		}
		if got.ttl != 63 {
			t.Errorf("TTL %d, want 63", got.ttl)
		}
		return got.dst
	}

	t.Run("tcp", func(t *testing.T) {
		p := base
		p.proto, p.dport, p.payload = TCP, 80, []byte("GET / HTTP/1.1\r\n\r\n")
		forwarded(t, web, p)
	})
	t.Run("udp", func(t *testing.T) {
		p := base
		p.proto, p.dport, p.payload = UDP, 53, []byte("a query!!")
		forwarded(t, dns, p)
	})
	t.Run("udp_without_checksum", func(t *testing.T) {
		p := base
		p.proto, p.dport, p.noUDPCsum, p.payload = UDP, 53, true, []byte("q")
		ret, out := r.run(t, r.d.XDPProgram(), p.build())
		if got := parse(out); ret != xdpRedirect || got.l4Csum != 0 || !got.ipCsumOK || got.dport != 5353 {
			t.Errorf("verdict %d, checksum %#04x, port %d: want redirected with the checksum left 0", ret, got.l4Csum, got.dport)
		}
	})
	t.Run("spread_and_consistent", func(t *testing.T) {
		seen := map[netip.Addr]int{}
		for i := range 3000 {
			p := base
			p.proto, p.dport, p.sport = TCP, 80, uint16(10000+i)
			p.src = netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)})
			seen[forwarded(t, web, p)]++
			if t.Failed() {
				return
			}
		}
		for _, b := range web.Backends {
			if n := seen[b.Addr]; n < 900 || n > 1100 {
				t.Errorf("backend %s got %d of 3000 flows, want 1000±10%%: %v", b.Addr, n, seen)
			}
		}
	})

	passed := func(t *testing.T, p pkt) {
		t.Helper()
		in := p.build()
		ret, out := r.run(t, r.d.XDPProgram(), in)
		if ret != xdpPass || !bytes.Equal(in, out) {
			t.Errorf("verdict %d (want XDP_PASS %d), changed=%v", ret, xdpPass, !bytes.Equal(in, out))
		}
	}
	t.Run("non_vip_passed", func(t *testing.T) {
		p := base
		p.proto, p.dport, p.dst = TCP, 80, netip.MustParseAddr("10.99.100.2")
		passed(t, p)
	})
	t.Run("wrong_port_passed", func(t *testing.T) {
		p := base
		p.proto, p.dport = TCP, 81
		passed(t, p)
	})
	t.Run("wrong_protocol_passed", func(t *testing.T) {
		p := base
		p.proto, p.dport = UDP, 80
		passed(t, p)
		p.proto = 0 // ICMP
		passed(t, p)
	})
	t.Run("fragments_passed", func(t *testing.T) {
		before := r.global(t)["fragment"]
		for _, frag := range []uint16{0x2000, 0x0010, 0x2010} { // first, last, middle
			p := base
			p.proto, p.dport, p.frag, p.payload = UDP, 53, frag, []byte("part")
			passed(t, p)
		}
		if n := r.global(t)["fragment"].Packets - before.Packets; n != 3 {
			t.Errorf("fragment counter rose by %d, want 3", n)
		}
	})
	t.Run("unrouted_backend_left_to_kernel", func(t *testing.T) {
		far := Service{Key: Key{VIP: vip, Port: 8443, Proto: TCP}, TargetPort: 443, Backends: []Backend{{Addr: unrouted, InTable: true}}}
		r.apply(t, web, dns, far)
		defer r.apply(t, web, dns)
		p := base
		p.proto, p.dport = TCP, 8443
		ret, out := r.run(t, r.d.XDPProgram(), p.build())
		got := parse(out)
		if ret != xdpPass || got.dst != unrouted || got.dport != 443 || !got.ipCsumOK || got.l4Csum != got.l4Want || got.ttl != 64 {
			t.Errorf("verdict %d, %s:%d ttl %d: want XDP_PASS of the rewritten packet with valid checksums and TTL untouched (the kernel forwards it)", ret, got.dst, got.dport, got.ttl)
		}
	})
	t.Run("empty_table_dropped", func(t *testing.T) {
		down := web
		down.Backends = three(false, false, false)
		r.apply(t, down, dns)
		defer r.apply(t, web, dns)
		before := r.counters(t)[web.Key]
		p := base
		p.proto, p.dport = TCP, 80
		if ret, _ := r.run(t, r.d.XDPProgram(), p.build()); ret != xdpDrop {
			t.Errorf("verdict %d with no backend in the table, want XDP_DROP (%d)", ret, xdpDrop)
		}
		if n := r.counters(t)[web.Key].Dropped.Packets - before.Dropped.Packets; n != 1 {
			t.Errorf("drop counter rose by %d, want 1", n)
		}
	})
	t.Run("counters", func(t *testing.T) {
		before := r.counters(t)[web.Key]
		p := base
		p.proto, p.dport, p.payload = TCP, 80, []byte("x")
		in := p.build()
		to := web.Backends[Picker(web.Backends)(p.src, p.dst, p.sport, p.dport, p.proto)].Addr
		for range 5 {
			r.run(t, r.d.XDPProgram(), in)
		}
		after := r.counters(t)[web.Key]
		if d := after.Forwarded.Packets - before.Forwarded.Packets; d != 5 {
			t.Errorf("service forwarded packets rose by %d, want 5", d)
		}
		if d := after.Forwarded.Bytes - before.Forwarded.Bytes; d != uint64(5*len(in)) {
			t.Errorf("service bytes rose by %d, want %d", d, 5*len(in))
		}
		if d := after.Backends[to].Packets - before.Backends[to].Packets; d != 5 {
			t.Errorf("backend %s packets rose by %d, want 5", to, d)
		}
	})
	t.Run("backend_out_of_table_moves_only_its_flows", func(t *testing.T) {
		down := web
		down.Backends = three(true, false, true)
		r.apply(t, down)
		defer r.apply(t, web, dns)
		pick := Picker(web.Backends)
		for i := range 500 {
			p := base
			p.proto, p.dport, p.sport = TCP, 80, uint16(20000+i)
			before := web.Backends[pick(p.src, p.dst, p.sport, p.dport, p.proto)].Addr
			got := parse(func() []byte { _, out := r.run(t, r.d.XDPProgram(), p.build()); return out }()).dst
			if got == backendB {
				t.Fatalf("flow %d still sent to the backend out of the table", i)
			}
			if before != backendB && got != before {
				t.Errorf("flow %d moved from %s to %s although its backend stayed", i, before, got)
			}
		}
	})
	t.Run("reply_rewritten_to_vip", func(t *testing.T) {
		for _, proto := range []Proto{TCP, UDP} {
			s, port := web, uint16(80)
			if proto == UDP {
				s, port = dns, 53
			}
			p := pkt{srcMAC: r.v0.MAC, dstMAC: clientMAC, src: backendB, dst: client, proto: proto, sport: s.TargetPort, dport: 40000, payload: []byte("HTTP/1.1 200 OK\r\n")}
			ret, out := r.run(t, r.d.ReplyProgram(), p.build())
			got := parse(out)
			if ret != tcxNext || got.src != vip || got.sport != port || got.dst != client || got.dport != 40000 {
				t.Errorf("%s reply: verdict %d, %s:%d -> %s:%d, want TCX_NEXT and %s:%d -> %s:40000", proto, ret, got.src, got.sport, got.dst, got.dport, vip, port, client)
			}
			if !got.ipCsumOK || got.l4Csum != got.l4Want {
				t.Errorf("%s reply checksums: ip ok=%v, l4 %#04x want %#04x", proto, got.ipCsumOK, got.l4Csum, got.l4Want)
			}
		}
		other := pkt{srcMAC: r.v0.MAC, dstMAC: clientMAC, src: backendB, dst: client, proto: TCP, sport: 22, dport: 40000}
		in := other.build()
		if ret, out := r.run(t, r.d.ReplyProgram(), in); ret != tcxNext || !bytes.Equal(in, out) {
			t.Errorf("a backend's traffic from another port was changed (verdict %d)", ret)
		}
	})
	t.Run("service_removed", func(t *testing.T) {
		r.apply(t, dns)
		defer r.apply(t, web, dns)
		p := base
		p.proto, p.dport = TCP, 80
		passed(t, p)
	})
}

func (r *rig) counters(t *testing.T) map[Key]ServiceCounters {
	t.Helper()
	c, err := r.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (r *rig) global(t *testing.T) map[string]Counter {
	t.Helper()
	c, err := r.d.Global()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestApplyInPlace: updating backends writes only the buckets that change
// and keeps every backend's index (and counters).
func TestApplyInPlace(t *testing.T) {
	r := newRig(t)
	s := Service{Key: Key{VIP: vip, Port: 80, Proto: TCP}, TargetPort: 80, Backends: three()}
	r.apply(t, s)
	before := r.d.ringOf(0)
	idx := map[netip.Addr]uint32{}
	for i := range uint32(MaxBackends) {
		if a := r.d.backendAt(i); a.IsValid() {
			idx[a] = i
		}
	}
	s.Backends = append(s.Backends, Backend{Addr: netip.MustParseAddr("10.99.0.5"), InTable: true})
	r.apply(t, s)
	after := r.d.ringOf(0)
	for a, i := range idx {
		if r.d.backendAt(i) != a {
			t.Errorf("backend %s lost its index %d", a, i)
		}
	}
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
		}
	}
	if frac := float64(moved) / RingSize; frac < 0.2 || frac > 0.3 {
		t.Errorf("adding a 4th backend rewrote %d buckets (%.1f%%), want about a quarter", moved, 100*frac)
	}
	if got := fmt.Sprint(len(idx)); got != "3" {
		t.Errorf("indexes %v", idx)
	}
}
