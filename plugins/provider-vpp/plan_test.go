package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.fd.io/govpp/binapi/lb_types"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
	sdklb "github.com/unyo-ops/unyo/plugins/sdk/lb"
)

const gre = lb_types.LB_API_ENCAP_TYPE_GRE4

func spec(port uint16) vipSpec {
	return vipSpec{Key: vppaddr.VIPKey{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: vppaddr.TCP, Port: port}, Encap: gre}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// have builds VPP's table: "a" is an AS in use, "-a" one draining.
func have(specs map[vipSpec][]string) map[vppaddr.VIPKey]*haveVIP {
	out := map[vppaddr.VIPKey]*haveVIP{}
	for s, as := range specs {
		h := &haveVIP{Spec: s, ASes: map[netip.Addr]bool{}}
		for _, a := range as {
			d, draining := strings.CutPrefix(a, "-")
			h.ASes[netip.MustParseAddr(d)] = !draining
		}
		out[s.Key] = h
	}
	return out
}

func TestPlan(t *testing.T) {
	other := vipSpec{Key: vppaddr.VIPKey{Prefix: netip.MustParsePrefix("10.0.0.9/32"), Protocol: vppaddr.TCP, Port: 80}, Encap: gre}
	nat := spec(80)
	nat.Encap, nat.TargetPort = lb_types.LB_API_ENCAP_TYPE_NAT4, 8080
	cases := []struct {
		name     string
		want     []wanted
		have     map[vppaddr.VIPKey]*haveVIP
		owned    []vipSpec
		recreate []vipSpec
		ops      []string
	}{
		{name: "new VIP with its ASes",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1", "10.1.0.2")}},
			ops:  []string{"add VIP 10.0.0.1/32 tcp/80", "add AS 10.1.0.1 to 10.0.0.1/32 tcp/80", "add AS 10.1.0.2 to 10.0.0.1/32 tcp/80"}},
		{name: "in sync",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1")}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1", "-10.1.0.7"}})},
		{name: "backend replaced: the old one drains, the new one is added",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1", "10.1.0.3")}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1", "10.1.0.2"}}),
			ops:  []string{"delete AS 10.1.0.2 from 10.0.0.1/32 tcp/80", "add AS 10.1.0.3 to 10.0.0.1/32 tcp/80"}},
		{name: "a draining AS wanted again is added back",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.2")}},
			have: have(map[vipSpec][]string{spec(80): {"-10.1.0.2"}}),
			ops:  []string{"add AS 10.1.0.2 to 10.0.0.1/32 tcp/80"}},
		{name: "a port removed: its ASes and VIP go, the other port stays",
			want:  []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1")}},
			have:  have(map[vipSpec][]string{spec(80): {"10.1.0.1"}, spec(443): {"10.1.0.1", "-10.1.0.5"}}),
			owned: []vipSpec{spec(443)},
			ops:   []string{"delete AS 10.1.0.1 from 10.0.0.1/32 tcp/443", "delete VIP 10.0.0.1/32 tcp/443"}},
		{name: "the dump reporting another spec recreates nothing",
			want: []wanted{{ID: "a", VIPs: []vipSpec{nat}, ASes: addrs("10.1.0.1")}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1"}})},
		{name: "a spec the config changed deletes and adds the VIP",
			want:     []wanted{{ID: "a", VIPs: []vipSpec{nat}, ASes: addrs("10.1.0.1")}},
			have:     have(map[vipSpec][]string{spec(80): {"10.1.0.1"}}),
			recreate: []vipSpec{nat},
			ops: []string{"delete AS 10.1.0.1 from 10.0.0.1/32 tcp/80", "delete VIP 10.0.0.1/32 tcp/80",
				"add VIP 10.0.0.1/32 tcp/80", "add AS 10.1.0.1 to 10.0.0.1/32 tcp/80"}},
		{name: "someone else's VIP is not touched",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1")}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1"}, other: {"10.9.9.9"}})},
		{name: "two resources share a VIP: the union of their backends",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.1")}, {ID: "b", VIPs: []vipSpec{spec(80)}, ASes: addrs("10.1.0.2")}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1"}}),
			ops:  []string{"add AS 10.1.0.2 to 10.0.0.1/32 tcp/80"}},
		{name: "no healthy backend: every AS leaves, the VIP stays",
			want: []wanted{{ID: "a", VIPs: []vipSpec{spec(80)}}},
			have: have(map[vipSpec][]string{spec(80): {"10.1.0.1"}}),
			ops:  []string{"delete AS 10.1.0.1 from 10.0.0.1/32 tcp/80"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := merge(c.want)
			if err != nil {
				t.Fatal(err)
			}
			owned := map[vppaddr.VIPKey]bool{}
			for k := range want {
				owned[k] = true
			}
			for _, s := range c.owned {
				owned[s.Key] = true
			}
			recreate := map[vppaddr.VIPKey]bool{}
			for _, s := range c.recreate {
				recreate[s.Key] = true
			}
			var got []string
			for _, o := range plan(want, c.have, owned, recreate) {
				got = append(got, o.String())
			}
			if !slices.Equal(got, c.ops) {
				t.Errorf("ops:\n got %q\nwant %q", got, c.ops)
			}
		})
	}
}

func TestMergeConflict(t *testing.T) {
	a, b := spec(80), spec(80)
	a.Encap, a.TargetPort = lb_types.LB_API_ENCAP_TYPE_NAT4, 8080
	b.Encap, b.TargetPort = lb_types.LB_API_ENCAP_TYPE_NAT4, 9090
	_, err := merge([]wanted{{ID: "web", VIPs: []vipSpec{a}}, {ID: "api", VIPs: []vipSpec{b}}})
	if err == nil || !strings.Contains(err.Error(), "resource web with target port 8080; resource api wants target port 9090") {
		t.Fatalf("conflict: %v", err)
	}
}

func TestResourceVIPs(t *testing.T) {
	c := sdklb.Config{VIP: "10.0.0.1", Ports: []sdklb.Port{{Port: 80, TargetPort: 8080, Protocol: "tcp"}, {Port: 53, Protocol: "udp"}}}
	got := fmt.Sprint(resourceVIPs(c, lb_types.LB_API_ENCAP_TYPE_NAT4, 0))
	want := fmt.Sprint([]vipSpec{
		{Key: vppaddr.VIPKey{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: 6, Port: 80}, Encap: lb_types.LB_API_ENCAP_TYPE_NAT4, TargetPort: 8080},
		{Key: vppaddr.VIPKey{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: 17, Port: 53}, Encap: lb_types.LB_API_ENCAP_TYPE_NAT4, TargetPort: 53},
	})
	if got != want {
		t.Errorf("nat4:\n got %s\nwant %s", got, want)
	}
	if s := resourceVIPs(c, lb_types.LB_API_ENCAP_TYPE_L3DSR, 10); s[0].Dscp != 10 || s[0].TargetPort != 0 {
		t.Errorf("l3dsr: %+v", s[0])
	}
}

func TestHealthRiseFall(t *testing.T) {
	hc := sdklb.Health{Fall: 2, Rise: 3}
	h := backendHealth{Healthy: true, Checked: true}
	fail := errors.New("connect: connection refused")
	at := time.Unix(100, 0)
	steps := []struct {
		err     error
		changed bool
		healthy bool
	}{
		{fail, false, true}, {nil, false, true}, {fail, false, true}, {fail, true, false},
		{nil, false, false}, {nil, false, false}, {fail, false, false}, {nil, false, false}, {nil, false, false}, {nil, true, true},
	}
	for i, s := range steps {
		at = at.Add(time.Second)
		if got := h.Observe(s.err, hc, at); got != s.changed || h.Healthy != s.healthy {
			t.Fatalf("step %d: changed %v healthy %v, want %v %v", i, got, h.Healthy, s.changed, s.healthy)
		}
	}
	if h.Since != at || h.Reason != "" {
		t.Errorf("since %v reason %q", h.Since, h.Reason)
	}
}
