package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/binapi/lb_types"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// vipSpec is what lb_add_del_vip sets for one VIP; a VIP whose spec
// changes is deleted and added again (VPP has no in-place change).
type vipSpec struct {
	Key        vppaddr.VIPKey
	Encap      lb_types.LbEncapType
	Dscp       uint8
	TargetPort uint16
}

// wantVIP is one VIP as the resources want it: its spec and the ASes new
// flows should go to, with the resource that asked first (for messages).
type wantVIP struct {
	Spec  vipSpec
	ASes  map[netip.Addr]bool
	Owner string
}

// haveVIP is one VIP as VPP reports it: ASes in use (true) and draining
// (false: deleted, kept for established flows until the flow timeout).
type haveVIP struct {
	Spec vipSpec
	ASes map[netip.Addr]bool
}

type opKind int

const (
	opDelAS opKind = iota
	opDelVIP
	opAddVIP
	opAddAS
)

// op is one binary API call.
type op struct {
	Kind opKind
	Spec vipSpec
	AS   netip.Addr
}

func (o op) String() string {
	switch o.Kind {
	case opAddVIP:
		return "add VIP " + o.Spec.Key.String()
	case opDelVIP:
		return "delete VIP " + o.Spec.Key.String()
	case opAddAS:
		return fmt.Sprintf("add AS %s to %s", o.AS, o.Spec.Key)
	}
	return fmt.Sprintf("delete AS %s from %s", o.AS, o.Spec.Key)
}

// resourceVIPs is the VIPs one resource config asks for.
func resourceVIPs(c lb.Config, encap lb_types.LbEncapType, dscp uint8) []vipSpec {
	vip := netip.MustParseAddr(c.VIP)
	var out []vipSpec
	for _, p := range c.Ports {
		proto := vppaddr.TCP
		if p.Protocol == "udp" {
			proto = vppaddr.UDP
		}
		s := vipSpec{Key: vppaddr.VIPKey{Prefix: netip.PrefixFrom(vip, 32), Protocol: proto, Port: uint16(p.Port)}, Encap: encap}
		switch encap {
		case lb_types.LB_API_ENCAP_TYPE_NAT4:
			s.TargetPort = uint16(p.Target())
		case lb_types.LB_API_ENCAP_TYPE_L3DSR:
			s.Dscp = dscp
		}
		out = append(out, s)
	}
	return out
}

// wanted is one resource's contribution: its VIPs and the backends in
// rotation (healthy ones).
type wanted struct {
	ID   string
	VIPs []vipSpec
	ASes []netip.Addr
}

// merge unions what every resource wants. Resources may share a VIP (the
// AS set is the union); two that want one VIP with different specs
// conflict, named in the error.
func merge(ws []wanted) (map[vppaddr.VIPKey]*wantVIP, error) {
	out := map[vppaddr.VIPKey]*wantVIP{}
	for _, w := range ws {
		for _, s := range w.VIPs {
			v, ok := out[s.Key]
			if !ok {
				v = &wantVIP{Spec: s, ASes: map[netip.Addr]bool{}, Owner: w.ID}
				out[s.Key] = v
			} else if v.Spec != s {
				return nil, fmt.Errorf("VIP %s is balanced by resource %s with target port %d; resource %s wants target port %d",
					s.Key, v.Owner, v.Spec.TargetPort, w.ID, s.TargetPort)
			}
			for _, a := range w.ASes {
				v.ASes[a] = true
			}
		}
	}
	return out, nil
}

// plan returns the calls that make VPP's table (have) what the resources
// want. Only VIPs in owned are touched: other VIPs in VPP belong to
// someone else. ASes leave with flush=false (opDelAS), so their
// established flows go on until VPP's flow timeout, as VPP drains them;
// a draining AS that is wanted again is simply added back.
//
// A VIP in VPP is matched by its key alone, never by the encap or target
// port lb_vip_dump reports: older VPPs encode those wrongly in the dump,
// and a mismatch would delete and re-add the VIP (dropping its flows) on
// every pass. A VIP is recreated only when the config changed its spec
// (recreate, from the records); deletes come first, so that it is free to
// be added again.
func plan(want map[vppaddr.VIPKey]*wantVIP, have map[vppaddr.VIPKey]*haveVIP, owned, recreate map[vppaddr.VIPKey]bool) []op {
	var ops []op
	for k := range owned {
		h, ok := have[k]
		if !ok {
			continue
		}
		w, wok := want[k]
		if wok && !recreate[k] {
			for a, used := range h.ASes {
				if used && !w.ASes[a] {
					ops = append(ops, op{Kind: opDelAS, Spec: h.Spec, AS: a})
				}
			}
			continue
		}
		for a, used := range h.ASes {
			if used {
				ops = append(ops, op{Kind: opDelAS, Spec: h.Spec, AS: a})
			}
		}
		ops = append(ops, op{Kind: opDelVIP, Spec: h.Spec})
	}
	for k, w := range want {
		h, ok := have[k]
		if !ok || recreate[k] {
			ops = append(ops, op{Kind: opAddVIP, Spec: w.Spec})
			h = &haveVIP{}
		}
		for a := range w.ASes {
			if !h.ASes[a] {
				ops = append(ops, op{Kind: opAddAS, Spec: w.Spec, AS: a})
			}
		}
	}
	slices.SortFunc(ops, func(a, b op) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Spec.Key.String(), b.Spec.Key.String()), a.AS.Compare(b.AS))
	})
	return ops
}
