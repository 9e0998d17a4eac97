package main

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
)

// BenchmarkVeth sends UDP to a VIP from the client namespace through the
// load balancer's namespace to one backend, over veth, and reports the
// packets per second that reach the backend: first with the kernel's own
// path (iptables DNAT in the load balancer's namespace, no program), then
// with the XDP program in generic mode, then in native mode (with XDP_PASS
// programs on the veth peers, as native veth XDP needs), on the same
// topology in the same run. b.N is the number of packets sent.
func BenchmarkVeth(b *testing.B) {
	xdptest.NeedRoot(b)
	ipt := testutil.NeedTool(b, "iptables", "apt-get install iptables", "/usr/sbin/iptables", "iptables")
	tp := xdptest.NewTopology(b, 1)
	be := tp.Backends[0]
	vip := netip.MustParseAddr("10.77.200.9")
	const port = 9000
	pins := filepath.Join(b.TempDir(), "bpf")
	b.Cleanup(func() { _ = unix.Unmount(pins, unix.MNT_DETACH) })

	iptables := func(args ...string) {
		b.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", tp.LB.Name, ipt}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("iptables %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rule := []string{"PREROUTING", "-d", vip.String(), "-p", "udp", "--dport", fmt.Sprint(port), "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", be.Addr, port)}

	b.Run("kernel_iptables_dnat", func(b *testing.B) {
		iptables(append([]string{"-t", "nat", "-A"}, rule...)...)
		defer iptables(append([]string{"-t", "nat", "-D"}, rule...)...)
		_ = blast(b, tp, be, vip, port)
	})
	svc := dataplane.Service{Key: dataplane.Key{VIP: vip, Port: port, Proto: dataplane.UDP}, TargetPort: port,
		Backends: []dataplane.Backend{{Addr: be.Addr, InTable: true}}}
	for _, mode := range []dataplane.Mode{dataplane.Generic, dataplane.Native} {
		b.Run("xdp_"+string(mode), func(b *testing.B) {
			if mode == dataplane.Native {
				// Native veth XDP drops redirected frames unless the
				// receiving peer runs a program too: the same program
				// with a VIP nobody uses passes everything.
				for _, s := range []struct{ ns *xdptest.NS }{{be.NS}, {tp.LB}} {
					dev := "eth0"
					if s.ns == tp.LB {
						dev = "lbb1"
					}
					stub := attach(b, dataplane.Options{Interface: dev, Netns: s.ns.Path, PinDir: filepath.Join(b.TempDir(), "stub"), Mode: dataplane.Native},
						dataplane.Service{Key: dataplane.Key{VIP: netip.MustParseAddr("192.0.2.1"), Port: 1, Proto: dataplane.UDP}, TargetPort: 1})
					b.Cleanup(func() { _ = stub.Apply(nil); stub.Close() })
				}
			}
			d := attach(b, dataplane.Options{Interface: tp.Iface, Netns: tp.LB.Path, PinDir: pins, Mode: mode}, svc)
			defer func() { _ = d.Apply(nil); d.Close() }()
			got := blast(b, tp, be, vip, port)
			// The packets that arrived took the XDP path, not the
			// kernel's. (In native mode veth's XDP ring drops what it
			// cannot take before any program runs; that is the loss-%.)
			cs, err := d.Counters()
			if err != nil {
				b.Fatal(err)
			}
			if n := cs[svc.Key].Forwarded.Packets; n < got*9/10 {
				b.Errorf("the program forwarded %d packets, but %d reached the backend", n, got)
			}
		})
	}
}

func attach(b *testing.B, o dataplane.Options, s dataplane.Service) *dataplane.Dataplane {
	b.Helper()
	d, err := dataplane.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Apply([]dataplane.Service{s}); err != nil {
		d.Close()
		b.Fatalf("attaching to %s: %v", o.Interface, err)
	}
	return d
}

// blast sends b.N UDP packets of 64 bytes to vip:port from 8 client
// sockets (8 flows) in batches of 64 (sendmmsg), and reports how many per
// second reached the backend's interface; it returns how many did.
func blast(b *testing.B, tp *xdptest.Topology, be *xdptest.BackendNS, vip netip.Addr, port int) uint64 {
	var conns []*ipv4.PacketConn
	for range 8 {
		c, err := nsutil.ListenPacket(tp.Client.Path, "udp4", "10.77.0.2:0")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, ipv4.NewPacketConn(c))
	}
	dst := &net.UDPAddr{IP: vip.AsSlice(), Port: port}
	msgs := make([]ipv4.Message, 64)
	for i := range msgs {
		msgs[i] = ipv4.Message{Buffers: [][]byte{make([]byte, 64)}, Addr: dst}
	}
	// Warm up: the load balancer resolves the backend's MAC.
	_, _ = conns[0].WriteBatch(msgs[:4], 0)
	time.Sleep(50 * time.Millisecond)
	before := rxPackets(b, be)
	b.ResetTimer()
	began := time.Now()
	sent := 0
	for i := 0; sent < b.N; i++ {
		n := min(len(msgs), b.N-sent)
		w, err := conns[i%len(conns)].WriteBatch(msgs[:n], 0)
		if err != nil && w == 0 {
			continue // ENOBUFS: the veth queue is full
		}
		sent += w
	}
	elapsed := time.Since(began)
	time.Sleep(20 * time.Millisecond) // the last packets land
	b.StopTimer()
	got := rxPackets(b, be) - before
	b.ReportMetric(float64(got)/elapsed.Seconds(), "rx-pkts/s")
	b.ReportMetric(100*float64(uint64(sent)-min(got, uint64(sent)))/float64(sent), "loss-%")
	return got
}

func rxPackets(b *testing.B, be *xdptest.BackendNS) uint64 {
	var n uint64
	if err := be.NS.Do(func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		n = l.Attrs().Statistics.RxPackets
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return n
}
