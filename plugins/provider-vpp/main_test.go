package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/conformance"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
	"github.com/unyo-ops/unyo/plugins/provider-vpp/vpptest"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// foreignVIP is an all-port VIP someone else configured: a per-port VIP
// on its address is refused by VPP.
var foreignVIP = netip.MustParsePrefix("10.255.0.1/32")

func startVPP(t *testing.T) *vpptest.Server {
	s := vpptest.Start(t, vpptest.New())
	s.VPP.Handle(&lb.LbAddDelVip{Pfx: vppaddr.Prefix(foreignVIP), Protocol: vppaddr.AnyProtocol, Encap: lb_types.LB_API_ENCAP_TYPE_GRE4, NewFlowsTableLength: 1024})
	return s
}

func serve(t *testing.T, s *vpptest.Server, extra map[string]any) *base.Conn {
	cfg := map[string]any{"socket": s.Socket, "state_dir": t.TempDir(), "resync_interval": "200ms"}
	for k, v := range extra {
		cfg[k] = v
	}
	return testbin.Serve(t, &vppProvider{}, cfg)
}

func key(vip string, port uint16) vppaddr.VIPKey {
	return vppaddr.VIPKey{Prefix: netip.PrefixFrom(netip.MustParseAddr(vip), 32), Protocol: vppaddr.TCP, Port: port}
}

func create(t *testing.T, c *base.Conn, id string, cfg map[string]any) *pluginv1.Resource {
	t.Helper()
	r, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: id, Config: testbin.Struct(t, cfg)})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return r.GetResource()
}

func backends(addrs ...string) []any {
	var out []any
	for i, a := range addrs {
		out = append(out, map[string]any{"name": fmt.Sprint("b", i), "address": a})
	}
	return out
}

// inUse waits until VPP's rotation for k is want.
func inUse(t *testing.T, s *vpptest.Server, k vppaddr.VIPKey, within time.Duration, want ...string) {
	t.Helper()
	var w []netip.Addr
	for _, a := range want {
		w = append(w, netip.MustParseAddr(a))
	}
	testutil.Eventually(t, within, fmt.Sprintf("VPP's ASes in use for %s = %v", k, want), func() error {
		if got := s.VPP.InUse(k); !slices.Equal(got, w) {
			return fmt.Errorf("in use %v", got)
		}
		return nil
	})
}

func TestConformance(t *testing.T) {
	s := startVPP(t)
	fx, err := conformance.LoadFixtures("testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fx.Config["socket"] = s.Socket
	// Deletes at once: the suite deletes dozens of resources with a grace
	// of 2s each; draining is TestTablesFollowTheConfig's.
	fx.Config["max_drain"] = "0s"
	conformance.Run(t, conformance.Binary(conformance.Build(t, ".", "unyo-provider-vpp"), fx))
	// Every case deleted what it made: only the foreign VIP is left.
	if vips := s.VPP.VIPs(); len(vips) != 1 || vips[0].Key.Prefix != foreignVIP {
		t.Errorf("VIPs left in VPP after the suite: %+v", vips)
	}
}

// TestTablesFollowTheConfig: Create adds the VIPs and ASes (after lb_conf),
// Update diffs them (a removed backend drains: deleted without flush, kept
// by VPP for its flows), Delete removes them; VPP's refusal is reported
// with its retval and leaves nothing behind.
func TestTablesFollowTheConfig(t *testing.T) {
	s := startVPP(t)
	c := serve(t, s, map[string]any{"src_address": "10.0.0.254", "flow_timeout": "30s"})
	ctx := context.Background()
	cfg := map[string]any{"vip": "10.0.0.1", "ports": []any{map[string]any{"port": 80.0, "protocol": "tcp"}, map[string]any{"port": 443.0, "protocol": "tcp"}},
		"backends": backends("10.1.0.1", "10.1.0.2"), "health": map[string]any{"kind": "none"}}
	r := create(t, c, "web-lb", cfg)
	if r.GetState() != sdk.Running || len(r.GetBackends()) != 2 || !r.GetBackends()[0].GetHealthy() || r.GetBackends()[0].GetName() != "b0" {
		t.Fatalf("created: %v", r)
	}
	if r.GetAttributes()["socket"] != s.Socket || r.GetAttributes()["encap"] != "gre4" {
		t.Errorf("attributes %v", r.GetAttributes())
	}
	if conf := s.VPP.Conf(); conf.Calls != 1 || conf.IP4Src != netip.MustParseAddr("10.0.0.254") || conf.FlowTimeout != 30 || conf.StickyBuckets != 1024 {
		t.Errorf("lb_conf: %+v", conf)
	}
	inUse(t, s, key("10.0.0.1", 80), time.Second, "10.1.0.1", "10.1.0.2")
	inUse(t, s, key("10.0.0.1", 443), time.Second, "10.1.0.1", "10.1.0.2")

	cfg["backends"] = backends("10.1.0.2", "10.1.0.3")
	cfg["ports"] = []any{map[string]any{"port": 80.0, "protocol": "tcp"}}
	plan, err := c.Provider.PlanUpdate(ctx, &pluginv1.PlanUpdateRequest{Id: "web-lb", Config: testbin.Struct(t, cfg)})
	if err != nil || plan.GetAction() != pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE || !slices.Equal(plan.GetChangedFields(), []string{"ports", "backends"}) {
		t.Fatalf("plan: %v %v", plan, err)
	}
	if _, err := c.Provider.Update(ctx, &pluginv1.UpdateRequest{Id: "web-lb", Config: testbin.Struct(t, cfg)}); err != nil {
		t.Fatal(err)
	}
	inUse(t, s, key("10.0.0.1", 80), time.Second, "10.1.0.2", "10.1.0.3")
	for _, v := range s.VPP.VIPs() {
		if v.Key.Port == 443 {
			t.Errorf("port 443's VIP is still in VPP: %+v", v)
		}
		if v.Key.Port == 80 {
			i := slices.IndexFunc(v.ASes, func(a vpptest.AS) bool { return a.Address == netip.MustParseAddr("10.1.0.1") })
			if i < 0 || v.ASes[i].Used || v.ASes[i].Flushed {
				t.Errorf("the removed backend should drain (unused, not flushed): %+v", v.ASes)
			}
		}
	}

	// VPP refuses a per-port VIP next to someone's all-port VIP.
	_, err = c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: "clash", Config: testbin.Struct(t, map[string]any{
		"vip": "10.255.0.1", "ports": []any{map[string]any{"port": 80.0, "protocol": "tcp"}}, "backends": backends("10.1.0.1")})})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "VPP refused to add VIP 10.255.0.1/32 tcp/80") || !strings.Contains(err.Error(), "Value already exists (-81)") {
		t.Errorf("create next to a foreign VIP: %v", err)
	}
	if _, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "clash"}); status.Code(err) != codes.NotFound {
		t.Errorf("get after the refused create: %v", err)
	}

	// Delete drains first: the ASes leave (no new flows), the VIP stays
	// for the grace, then goes.
	deleted := make(chan error, 1)
	began := time.Now()
	go func() {
		d, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "web-lb", Grace: durationpb.New(time.Second)})
		if err == nil && !d.GetExisted() {
			err = fmt.Errorf("delete: existed=false")
		}
		deleted <- err
	}()
	inUse(t, s, key("10.0.0.1", 80), time.Second)
	testutil.Eventually(t, time.Second, "the resource saying it drains", func() error {
		g, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "web-lb"})
		if err != nil || !strings.HasPrefix(g.GetResource().GetReason(), "being deleted: no new flows") {
			return fmt.Errorf("get while draining: %v %v", g, err)
		}
		return nil
	})
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < time.Second {
		t.Errorf("delete took %s, want the grace (1s) for draining", took)
	}
	if vips := s.VPP.VIPs(); len(vips) != 1 || vips[0].Key.Prefix != foreignVIP {
		t.Errorf("VIPs after delete: %+v", vips)
	}
}

// listen starts a TCP listener on addr:port that accepts and closes.
func listen(t *testing.T, addr string, port int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestHealthChecks runs TCP checks against real listeners on 127.0.0.1-3:
// a backend whose listener is closed leaves VPP's rotation within
// interval*fall (plus one check's timeout), and comes back after rise
// successes.
func TestHealthChecks(t *testing.T) {
	s := startVPP(t)
	c := serve(t, s, nil)
	first := listen(t, "127.0.0.1", 0)
	port := first.Addr().(*net.TCPAddr).Port
	listen(t, "127.0.0.3", port)
	second := listen(t, "127.0.0.2", port)
	const interval, fall = 200 * time.Millisecond, 2
	create(t, c, "lb", map[string]any{"vip": "10.0.0.1", "ports": []any{map[string]any{"port": float64(port), "protocol": "tcp"}},
		"backends": backends("127.0.0.1", "127.0.0.2", "127.0.0.3"),
		"health":   map[string]any{"kind": "tcp", "interval": "200ms", "timeout": "200ms", "fall": float64(fall), "rise": 2.0}})
	k := key("10.0.0.1", uint16(port))
	inUse(t, s, k, time.Second, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := c.Provider.Watch(wctx, &pluginv1.WatchRequest{Ids: []string{"lb"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := watch.Recv(); err != nil || ev.GetState() != sdk.Running || ev.GetReason() != "" {
		t.Fatalf("first watch event: %v %v", ev, err)
	}

	second.Close()
	killed := time.Now()
	// Polled every 10ms, so that the time measured is the plugin's.
	left := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.3")}
	for !slices.Equal(s.VPP.InUse(k), left) && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	inUse(t, s, k, time.Millisecond, "127.0.0.1", "127.0.0.3")
	if took, bound := time.Since(killed), interval*fall+interval+500*time.Millisecond; took > bound {
		t.Errorf("the dead backend left the rotation after %s, want within interval*fall (+ a check's timeout and slack): %s", took, bound)
	}
	g, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "lb"})
	if err != nil {
		t.Fatal(err)
	}
	b := g.GetResource().GetBackends()[1]
	if b.GetHealthy() || !strings.Contains(b.GetReason(), "refused") || b.GetSince().AsTime().Before(killed) {
		t.Errorf("backend status after the kill: %v", b)
	}
	if g.GetResource().GetReason() != "2 of 3 backends healthy" {
		t.Errorf("reason %q", g.GetResource().GetReason())
	}
	if ev, err := watch.Recv(); err != nil || ev.GetReason() != "2 of 3 backends healthy" {
		t.Errorf("watch event after the kill: %v %v", ev, err)
	}
	st, err := c.Provider.Stats(context.Background(), &pluginv1.StatsRequest{Id: "lb"})
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]float64{}
	for _, m := range st.GetMetrics() {
		metrics[m.GetLabel()] = m.GetValue()
	}
	if want := map[string]float64{"backends": 3, "backends_healthy": 2, "ases_in_use": 2, "ases_draining": 1}; !maps.Equal(metrics, want) {
		t.Errorf("stats %v, want %v", metrics, want)
	}

	listen(t, "127.0.0.2", port)
	inUse(t, s, k, 5*time.Second, "127.0.0.1", "127.0.0.2", "127.0.0.3")
}

// TestVPPGoesAway: with VPP gone, operations fail Unavailable naming the
// socket and the fingerprint is unhealthy; when VPP comes back (restarted,
// tables empty) the plugin reconnects and refills them.
func TestVPPGoesAway(t *testing.T) {
	s := startVPP(t)
	c := serve(t, s, nil)
	ctx := context.Background()
	create(t, c, "lb", map[string]any{"vip": "10.0.0.1", "ports": []any{map[string]any{"port": 80.0, "protocol": "tcp"}},
		"backends": backends("10.1.0.1"), "health": map[string]any{"kind": "none"}})
	fingerprint := func() *pluginv1.FingerprintResponse {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := c.Provider.Fingerprint(fctx, &pluginv1.FingerprintRequest{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := fingerprint(); !f.GetHealthy() || f.GetAttributes()["vpp.version"] != "24.02-fake" {
		t.Errorf("fingerprint: %v", f)
	}

	s.Stop()
	_, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "lb"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), s.Socket) {
		t.Errorf("get with VPP gone: %v", err)
	}
	if _, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "lb"}); status.Code(err) != codes.Unavailable {
		t.Errorf("delete with VPP gone: %v", err)
	}
	if f := fingerprint(); f.GetHealthy() || !strings.Contains(f.GetReason(), s.Socket) {
		t.Errorf("fingerprint with VPP gone: %v", f)
	}

	s.VPP.Reset() // a restarted VPP has empty tables
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	inUse(t, s, key("10.0.0.1", 80), 5*time.Second, "10.1.0.1")
	g, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "lb"})
	if err != nil || g.GetResource().GetState() != sdk.Running {
		t.Errorf("get after VPP came back: %v %v", g, err)
	}
	if f := fingerprint(); !f.GetHealthy() {
		t.Errorf("fingerprint after VPP came back: %v", f)
	}
}

// TestNat4TargetPort: with encap nat4 the VIP carries the target port, and
// a changed target port recreates the VIP; gre4 refuses a target port
// other than the port (it forwards packets unchanged).
func TestNat4TargetPort(t *testing.T) {
	s := startVPP(t)
	ctx := context.Background()
	port := func(target float64) map[string]any {
		return map[string]any{"vip": "10.0.0.1", "ports": []any{map[string]any{"port": 80.0, "target_port": target, "protocol": "tcp"}},
			"backends": backends("10.1.0.1"), "health": map[string]any{"kind": "none"}}
	}
	gre := serve(t, s, nil)
	v, err := gre.Provider.Validate(ctx, &pluginv1.ValidateRequest{Config: testbin.Struct(t, port(8080))})
	if err != nil || v.GetValid() || len(v.GetProblems()) != 1 || v.GetProblems()[0].GetField() != "ports[0].target_port" {
		t.Errorf("gre4 with a target port: %v %v", v, err)
	}

	c := serve(t, s, map[string]any{"encap": "nat4"})
	create(t, c, "lb", port(8080))
	target := func() uint16 {
		for _, v := range s.VPP.VIPs() {
			if v.Key == key("10.0.0.1", 80) {
				return v.TargetPort
			}
		}
		return 0
	}
	if got := target(); got != 8080 {
		t.Fatalf("target port %d", got)
	}
	if _, err := c.Provider.Update(ctx, &pluginv1.UpdateRequest{Id: "lb", Config: testbin.Struct(t, port(9090))}); err != nil {
		t.Fatal(err)
	}
	if got := target(); got != 9090 {
		t.Errorf("target port after the update %d, want 9090", got)
	}
	inUse(t, s, key("10.0.0.1", 80), time.Second, "10.1.0.1")
}
