package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/conformance"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	e2eVIP    = "10.77.200.1"
	e2ePort   = 80
	e2eTarget = 8080
	// A UDP port beside: 53 to the backends' 5353.
	e2eUDP       = 53
	e2eUDPTarget = 5353
)

// lbConfig is the load balancer over the given backends, health-checked
// by HTTP every 300 ms (out after 2 failures, back after 2 successes).
func lbConfig(bs ...*xdptest.BackendNS) map[string]any {
	var backends []any
	for _, b := range bs {
		backends = append(backends, map[string]any{"name": beName(b), "address": b.Addr.String()})
	}
	return map[string]any{
		"vip": e2eVIP,
		"ports": []any{map[string]any{"port": float64(e2ePort), "target_port": float64(e2eTarget), "protocol": "tcp"},
			map[string]any{"port": float64(e2eUDP), "target_port": float64(e2eUDPTarget), "protocol": "udp"}},
		"backends": backends,
		"health":   map[string]any{"kind": "http", "path": "/", "interval": "300ms", "timeout": "300ms", "fall": float64(2), "rise": float64(2)},
	}
}

func beName(b *xdptest.BackendNS) string { return "web-" + b.Addr.String() }

type e2e struct {
	t *testing.T
	// outer is the whole test's T: what outlives a subtest (backends,
	// plugin processes) is made with it.
	outer   *testing.T
	tp      *xdptest.Topology
	servers map[netip.Addr]*xdptest.Server
	client  *http.Client
}

func (e *e2e) serve(b *xdptest.BackendNS) {
	e.servers[b.Addr] = xdptest.Serve(e.outer, b.NS, beName(b), netip.AddrPortFrom(b.Addr, e2eTarget))
	xdptest.ServeUDP(e.outer, b.NS, beName(b), netip.AddrPortFrom(b.Addr, e2eUDPTarget))
}

// udp sends one datagram to the VIP from each of n sockets (n flows) and
// counts the answers by backend; an answer must come from the VIP's
// address and port (the reply path's reverse NAT).
func (e *e2e) udp(n int) map[string]int {
	e.t.Helper()
	got := map[string]int{}
	vip := &net.UDPAddr{IP: net.ParseIP(e2eVIP), Port: e2eUDP}
	for range n {
		c, err := nsutil.ListenPacket(e.tp.Client.Path, "udp4", "10.77.0.2:0")
		if err != nil {
			e.t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 256)
		_, err = c.WriteTo([]byte("who?"), vip)
		var k int
		var from net.Addr
		if err == nil {
			k, from, err = c.ReadFrom(buf)
		}
		c.Close()
		switch {
		case err != nil:
			got[""]++
		case from.String() != vip.String():
			e.t.Fatalf("UDP answer from %s, want the VIP %s", from, vip)
		default:
			got[strings.TrimSpace(string(buf[:k]))]++
		}
	}
	return got
}

func (e *e2e) url() string { return fmt.Sprintf("http://%s:%d/", e2eVIP, e2ePort) }

// spread checks that n requests all succeeded and went to want, each
// within ±20% of its share.
func (e *e2e) spread(n int, want ...*xdptest.BackendNS) {
	e.t.Helper()
	var names []string
	for _, b := range want {
		names = append(names, beName(b))
	}
	xdptest.Spread(e.t, e.client, e.url(), n, names...)
}

// keepAlive is one HTTP/1.1 connection to the VIP, kept open.
type keepAlive struct {
	c  net.Conn
	rd *bufio.Reader
}

func (e *e2e) keepAlive() *keepAlive {
	e.t.Helper()
	c, err := nsutil.Dialer(e.tp.Client.Path, &net.Dialer{Timeout: 2 * time.Second})(context.Background(), "tcp", fmt.Sprintf("%s:%d", e2eVIP, e2ePort))
	if err != nil {
		e.t.Fatalf("connecting to the VIP: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return &keepAlive{c: c, rd: bufio.NewReader(c)}
}

func (k *keepAlive) get() (string, error) {
	_ = k.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(k.c, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(k.rd, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func (k *keepAlive) sport() uint16 { return uint16(k.c.LocalAddr().(*net.TCPAddr).Port) }

func get(t *testing.T, p *proc, id string) *pluginv1.Resource {
	t.Helper()
	g, err := p.conn.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: id})
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return g.GetResource()
}

// waitHealth waits until the backend at addr has the given health.
func waitHealth(t *testing.T, p *proc, id string, addr netip.Addr, healthy bool, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	testutil.Eventually(t, within, fmt.Sprintf("backend %s healthy=%v", addr, healthy), func() error {
		for _, b := range get(t, p, id).GetBackends() {
			if b.GetAddress() == addr.String() {
				if b.GetHealthy() != healthy {
					return fmt.Errorf("healthy=%v (%s)", b.GetHealthy(), b.GetReason())
				}
				return nil
			}
		}
		return fmt.Errorf("no backend %s", addr)
	})
	return time.Since(began)
}

// TestEndToEnd runs the plugin as a process against real namespaces: a
// client, the load balancer and backends with HTTP servers; requests
// spread, a dead backend leaves rotation, a new one joins without breaking
// established connections the hashing keeps, and a SIGKILLed plugin's
// program keeps forwarding while its successor recovers.
func TestEndToEnd(t *testing.T) {
	xdptest.NeedRoot(t)
	bin := conformance.Build(t, ".", "unyo-provider-xdp")
	// Registered first, so it runs last: after every other cleanup,
	// nothing of the test may be left.
	var names []string
	pins := pinDir(t)
	t.Cleanup(func() {
		if left := xdptest.Leftovers(names, []string{pins}); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	tp := xdptest.NewTopology(t, 3)
	defer func() { names = tp.Names() }()
	e := &e2e{t: t, outer: t, tp: tp, servers: map[netip.Addr]*xdptest.Server{}, client: xdptest.Client(tp.Client, false, 3*time.Second)}
	for _, b := range tp.Backends {
		e.serve(b)
	}
	cfg := map[string]any{"interface": tp.Iface, "netns": tp.LB.Path, "pin_dir": pins, "state_dir": filepath.Join(t.TempDir(), "state")}
	p := startPlugin(t, bin, cfg)
	const id = "web-lb"
	b1, b2, b3 := tp.Backends[0], tp.Backends[1], tp.Backends[2]
	cr, err := p.conn.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: id, Config: mustStruct(t, lbConfig(b1, b2, b3))})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if r := cr.GetResource(); r.GetState() != sdk.Running || len(r.GetBackends()) != 3 {
		t.Fatalf("created: %v %s, backends %v", r.GetState(), r.GetReason(), r.GetBackends())
	}
	for _, b := range cr.GetResource().GetBackends() {
		if !b.GetHealthy() {
			// Create's first probe has the config's 300 ms timeout, which
			// a loaded machine can miss; the probes that follow must
			// bring the backend in.
			t.Logf("backend %s unhealthy after Create: %s", b.GetAddress(), b.GetReason())
			waitHealth(t, p, id, netip.MustParseAddr(b.GetAddress()), true, 30*time.Second)
		}
	}
	if !xdpAttached(t, tp.LB, tp.Iface) {
		t.Fatalf("no XDP program on %s after Create", tp.Iface)
	}

	t.Run("spread", func(t *testing.T) {
		e.t = t
		e.spread(1000, b1, b2, b3)
		r := get(t, p, id)
		for _, b := range r.GetBackends() {
			if b.GetPackets() == 0 || b.GetBytes() == 0 {
				t.Errorf("backend %s reports no traffic: %v", b.GetAddress(), b)
			}
		}
		st, err := p.conn.Provider.Stats(context.Background(), &pluginv1.StatsRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		ms := map[string]float64{}
		for _, m := range st.GetMetrics() {
			ms[m.GetLabel()] = m.GetValue()
		}
		// 1000 connections: at least SYN, ACK, request and FIN each.
		if ms["tcp_80_packets"] < 4000 || ms["packets"] != ms["tcp_80_packets"]+ms["udp_53_packets"] || ms["backends_healthy"] != 3 {
			t.Errorf("stats: %v", ms)
		}
	})

	t.Run("udp", func(t *testing.T) {
		e.t = t
		got := e.udp(300)
		for _, b := range []*xdptest.BackendNS{b1, b2, b3} {
			if c := got[beName(b)]; c < 80 || c > 120 {
				t.Errorf("%s answered %d of 300 datagrams, want 100±20%%: %v", beName(b), c, got)
			}
		}
		t.Logf("300 datagrams: %v", got)
	})

	t.Run("backend_killed", func(t *testing.T) {
		e.t = t
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, err := p.conn.Provider.Watch(ctx, &pluginv1.WatchRequest{Ids: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		events := make(chan *pluginv1.WatchResponse, 16)
		go func() {
			for {
				ev, err := w.Recv()
				if err != nil {
					close(events)
					return
				}
				events <- ev
			}
		}()
		time.Sleep(100 * time.Millisecond) // the watch is registered
		e.servers[b2.Addr].Stop()
		took := waitHealth(t, p, id, b2.Addr, false, 5*time.Second)
		select {
		case ev := <-events:
			if ev.GetState() != sdk.Running || !strings.Contains(ev.GetReason(), "2 of 3 backends healthy") {
				t.Errorf("Watch reported %v %q, want RUNNING with 2 of 3 backends healthy", ev.GetState(), ev.GetReason())
			}
		case <-time.After(2 * time.Second):
			t.Error("Watch reported nothing when a backend left rotation")
		}
		t.Logf("backend out of rotation %v after its server stopped", took.Round(10*time.Millisecond))
		e.spread(300, b1, b3)
	})

	t.Run("backend_added", func(t *testing.T) {
		e.t = t
		b4 := tp.AddBackend(e.outer)
		e.serve(b4)
		// Connections made before the change; the hashing says which
		// of them keep their backend.
		before := []dataplane.Backend{{Addr: b1.Addr, InTable: true}, {Addr: b2.Addr}, {Addr: b3.Addr, InTable: true}}
		after := append(append([]dataplane.Backend{}, before...), dataplane.Backend{Addr: b4.Addr, InTable: true})
		pickBefore, pickAfter := dataplane.Picker(before), dataplane.Picker(after)
		vip, client := netip.MustParseAddr(e2eVIP), tp.ClientAddr()
		var kept []*keepAlive
		var keptAt []string
		for range 16 {
			k := e.keepAlive()
			who, err := k.get()
			if err != nil {
				t.Fatalf("request on a new connection: %v", err)
			}
			i, j := pickBefore(client, vip, k.sport(), e2ePort, dataplane.TCP), pickAfter(client, vip, k.sport(), e2ePort, dataplane.TCP)
			if beName(&xdptest.BackendNS{Addr: before[i].Addr}) != who {
				t.Errorf("connection from port %d answered by %s, the Maglev pick is %s", k.sport(), who, before[i].Addr)
			}
			if after[j].Addr == before[i].Addr {
				kept, keptAt = append(kept, k), append(keptAt, who)
			}
		}
		if len(kept) == 0 {
			t.Fatal("no connection keeps its backend after the change; cannot test that they survive")
		}
		up, err := p.conn.Provider.Update(context.Background(), &pluginv1.UpdateRequest{Id: id, Config: mustStruct(t, lbConfig(b1, b2, b3, b4))})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		if up.GetAction() != pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE {
			t.Errorf("update action %v, want IN_PLACE", up.GetAction())
		}
		for i, k := range kept {
			who, err := k.get()
			if err != nil || who != keptAt[i] {
				t.Errorf("established connection to %s (its bucket kept its backend) after adding a backend: %q, %v", keptAt[i], who, err)
			}
		}
		t.Logf("%d of 16 established connections kept their backend by the hashing and all of them survived", len(kept))
		e.spread(1000, b1, b3, b4)
	})

	t.Run("plugin_killed", func(t *testing.T) {
		e.t = t
		r := get(t, p, id)
		p.kill(t)
		if !xdpAttached(t, tp.LB, tp.Iface) {
			t.Fatal("the XDP program left with the plugin")
		}
		b4 := tp.Backends[3]
		e.spread(300, b1, b3, b4)
		p = startPlugin(e.outer, bin, cfg)
		rec, err := p.conn.Provider.Recover(context.Background(), &pluginv1.RecoverRequest{Id: id, Handle: r.GetHandle()})
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if rec.GetResource().GetState() != sdk.Running || len(rec.GetResource().GetBackends()) != 4 {
			t.Errorf("recovered: %v %s %v", rec.GetResource().GetState(), rec.GetResource().GetReason(), rec.GetResource().GetBackends())
		}
		// The counters survived in the pinned maps.
		for _, b := range rec.GetResource().GetBackends() {
			if b.GetAddress() == b1.Addr.String() && b.GetPackets() == 0 {
				t.Errorf("backend %s's counters were lost with the plugin", b.GetAddress())
			}
		}
		// The restarted plugin checks health again: a stopped backend
		// leaves rotation.
		e.servers[b3.Addr].Stop()
		waitHealth(t, p, id, b3.Addr, false, 5*time.Second)
		e.spread(300, b1, b4)
		// And Update works on the recovered resource: b4 leaves.
		if _, err := p.conn.Provider.Update(context.Background(), &pluginv1.UpdateRequest{Id: id, Config: mustStruct(t, lbConfig(b1, b2, b3))}); err != nil {
			t.Fatalf("Update after recovery: %v", err)
		}
		e.spread(100, b1)
	})

	if d, err := p.conn.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: id}); err != nil || !d.GetExisted() {
		t.Fatalf("Delete: %v %v", d, err)
	}
	checkClean(t, tp.LB, tp.Iface, pins)
	if got, _ := xdptest.Fetch(e.client, e.url(), 3); got[""] != 3 {
		t.Errorf("the VIP still answers after Delete: %v", got)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
