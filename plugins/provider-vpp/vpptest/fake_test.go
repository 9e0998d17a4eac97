package vpptest

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"
	"go.fd.io/govpp/binapi/vpe"
	"go.fd.io/govpp/core"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
)

func connect(t *testing.T, s *Server) api.Channel {
	t.Helper()
	conn, err := core.Connect(socketclient.NewVppClient(s.Socket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Disconnect)
	ch, err := conn.NewAPIChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	ch.SetReplyTimeout(2 * time.Second)
	return ch
}

var (
	vip = netip.MustParsePrefix("10.9.0.1/32")
	as1 = netip.MustParseAddr("10.9.1.1")
	as2 = netip.MustParseAddr("10.9.1.2")
)

func addVIP(port uint16, encap lb_types.LbEncapType, del bool) *lb.LbAddDelVip {
	return &lb.LbAddDelVip{Pfx: vppaddr.Prefix(vip), Protocol: vppaddr.TCP, Port: port, Encap: encap, NewFlowsTableLength: 1024, IsDel: del}
}

func addAS(port uint16, as netip.Addr, del bool) *lb.LbAddDelAs {
	return &lb.LbAddDelAs{Pfx: vppaddr.Prefix(vip), Protocol: vppaddr.TCP, Port: port, AsAddress: vppaddr.Address(as), IsDel: del}
}

// retval sends req and returns VPP's retval (govpp turns a non-zero one
// into an api.VPPApiError).
func retval(t *testing.T, ch api.Channel, req, reply api.Message) int32 {
	t.Helper()
	err := ch.SendRequest(req).ReceiveReply(reply)
	var ve api.VPPApiError
	if errors.As(err, &ve) {
		return int32(ve)
	}
	if err != nil {
		t.Fatalf("%s: %v", req.GetMessageName(), err)
	}
	return 0
}

// TestTablesOverTheSocket drives the fake through govpp's socketclient,
// as the plugin does: the retvals are VPP's.
func TestTablesOverTheSocket(t *testing.T) {
	s := Start(t, New())
	ch := connect(t, s)
	gre := lb_types.LB_API_ENCAP_TYPE_GRE4
	steps := []struct {
		name string
		req  api.Message
		want int32
	}{
		{"as to a missing vip", addAS(80, as1, false), ErrNoSuchEntry},
		{"add vip", addVIP(80, gre, false), 0},
		{"add vip again", addVIP(80, gre, false), ErrValueExist},
		{"another port, another encap", addVIP(443, lb_types.LB_API_ENCAP_TYPE_NAT4, false), ErrInvalidArgument},
		{"flow table not a power of 2", &lb.LbAddDelVip{Pfx: vppaddr.Prefix(vip), Protocol: vppaddr.TCP, Port: 8080, NewFlowsTableLength: 1000}, ErrInvalidMemorySize},
		{"all ports next to a port", &lb.LbAddDelVip{Pfx: vppaddr.Prefix(vip), Protocol: vppaddr.AnyProtocol, NewFlowsTableLength: 1024}, ErrValueExist},
		{"add as", addAS(80, as1, false), 0},
		{"add as again", addAS(80, as1, false), ErrValueExist},
		{"add as 2", addAS(80, as2, false), 0},
		{"ipv6 as on gre4", addAS(80, netip.MustParseAddr("fd00::1"), false), ErrInvalidAddressFamily},
		{"del missing as", addAS(80, netip.MustParseAddr("10.9.1.9"), true), ErrNoSuchEntry},
		{"del as 2 (drains)", addAS(80, as2, true), 0},
		{"re-add draining as 2", addAS(80, as2, false), 0},
		{"del as 2 again", addAS(80, as2, true), 0},
		{"lb_conf sticky not a power of 2", &lb.LbConf{StickyBucketsPerCore: 1000, FlowTimeout: 40}, ErrInvalidMemorySize},
		{"lb_conf", &lb.LbConf{IP4SrcAddress: [4]uint8{10, 9, 0, 254}, StickyBucketsPerCore: ^uint32(0), FlowTimeout: ^uint32(0)}, 0},
	}
	for _, st := range steps {
		reply := map[string]api.Message{"lb_add_del_vip": &lb.LbAddDelVipReply{}, "lb_add_del_as": &lb.LbAddDelAsReply{}, "lb_conf": &lb.LbConfReply{}}[st.req.GetMessageName()]
		if got := retval(t, ch, st.req, reply); got != st.want {
			t.Errorf("%s: retval %d, want %d", st.name, got, st.want)
		}
	}
	if c := s.VPP.Conf(); c.IP4Src != netip.MustParseAddr("10.9.0.254") || c.StickyBuckets != 1024 || c.FlowTimeout != 40 {
		t.Errorf("lb_conf left %+v", c)
	}

	var vips []*lb.LbVipDetails
	req := ch.SendMultiRequest(&lb.LbVipDump{})
	for {
		d := &lb.LbVipDetails{}
		last, err := req.ReceiveReply(d)
		if err != nil {
			t.Fatal(err)
		}
		if last {
			break
		}
		vips = append(vips, d)
	}
	if len(vips) != 1 || vppaddr.PrefixOf(vips[0].Vip.Pfx) != vip || vips[0].Vip.Port != 80 || vips[0].FlowTableLength != 1024 {
		t.Errorf("vip dump: %+v", vips)
	}
	var used, draining []netip.Addr
	areq := ch.SendMultiRequest(&lb.LbAsDump{Pfx: vppaddr.Prefix(vip), Protocol: vppaddr.TCP, Port: 80})
	for {
		d := &lb.LbAsDetails{}
		last, err := areq.ReceiveReply(d)
		if err != nil {
			t.Fatal(err)
		}
		if last {
			break
		}
		if d.Flags&1 != 0 {
			used = append(used, vppaddr.Addr(d.AppSrv))
		} else {
			draining = append(draining, vppaddr.Addr(d.AppSrv))
		}
	}
	if !slices.Equal(used, []netip.Addr{as1}) || !slices.Equal(draining, []netip.Addr{as2}) {
		t.Errorf("as dump: used %v draining %v", used, draining)
	}

	// A VIP with ASes is deleted with them (lb_vip_del removes them).
	if got := retval(t, ch, addVIP(80, gre, true), &lb.LbAddDelVipReply{}); got != 0 {
		t.Errorf("del vip with ases: %d", got)
	}
	if got := retval(t, ch, addVIP(80, gre, true), &lb.LbAddDelVipReply{}); got != ErrNoSuchEntry {
		t.Errorf("del missing vip: %d", got)
	}
	v := &vpe.ShowVersionReply{}
	if err := ch.SendRequest(&vpe.ShowVersion{}).ReceiveReply(v); err != nil || v.Version != "24.02-fake" {
		t.Errorf("show_version: %+v %v", v, err)
	}
}

// TestDrainingASCollected: an AS deleted without flush stays (unused)
// until the flow timeout, then goes.
func TestDrainingASCollected(t *testing.T) {
	v := New()
	now := time.Unix(1000, 0)
	v.SetClock(func() time.Time { return now })
	v.Handle(addVIP(80, lb_types.LB_API_ENCAP_TYPE_GRE4, false))
	v.Handle(addAS(80, as1, false))
	v.Handle(addAS(80, as2, false))
	v.Handle(addAS(80, as2, true))
	if n := len(v.VIPs()[0].ASes); n != 2 {
		t.Fatalf("%d ases right after the delete, want 2 (one draining)", n)
	}
	now = now.Add(41 * time.Second)
	v.Handle(addAS(80, as1, true))
	if as := v.VIPs()[0].ASes; len(as) != 1 || as[0].Address != as1 || as[0].Used {
		t.Fatalf("after the flow timeout: %+v", as)
	}
	k := vppaddr.VIPKey{Prefix: vip, Protocol: vppaddr.TCP, Port: 80}
	if got := v.InUse(k); len(got) != 0 {
		t.Errorf("in use: %v", got)
	}
}
