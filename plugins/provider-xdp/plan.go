package main

import (
	"fmt"
	"net/netip"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/sdk"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// lbStatus is where a resource stands after planning.
type lbStatus struct {
	State  pluginv1.ResourceState
	Reason string
	// Keys are the services the resource owns in the kernel (none when
	// it waits behind another).
	Keys []dataplane.Key
	// full: refused for want of room in the tables.
	full bool
}

// plan turns the records (oldest first) into the services the kernel must
// hold and each resource's status. A VIP:port:protocol, and a backend
// address:port:protocol (its replies are rewritten back to one VIP), belong
// to the oldest resource that asks for them; a younger one asking for any
// of them waits (Pending) until the older is deleted, so a replacement
// created before its predecessor is deleted takes over without a gap.
func plan(recs []record) ([]dataplane.Service, map[string]lbStatus) {
	var services []dataplane.Service
	st := map[string]lbStatus{}
	fwd := map[dataplane.Key]string{}
	type revKey struct {
		addr  netip.Addr
		port  int
		proto string
	}
	rev := map[revKey]string{}
	for _, r := range recs {
		cfg, err := lb.Decode(r.Config)
		if err != nil {
			st[r.ID] = lbStatus{State: sdk.Broken, Reason: fmt.Sprintf("stored config is invalid: %v", err)}
			continue
		}
		var why string
		var keys []dataplane.Key
		for _, p := range cfg.Ports {
			proto, _ := dataplane.ParseProto(p.Protocol)
			k := dataplane.Key{VIP: netip.MustParseAddr(cfg.VIP), Port: uint16(p.Port), Proto: proto}
			keys = append(keys, k)
			if o, ok := fwd[k]; ok && why == "" {
				why = fmt.Sprintf("%s is served by load balancer %s; this one takes over when that one is deleted", k, o)
			}
			for _, b := range cfg.Backends {
				rk := revKey{netip.MustParseAddr(b.Address), p.Target(), p.Protocol}
				if o, ok := rev[rk]; ok && why == "" {
					why = fmt.Sprintf("backend %s:%d/%s is behind load balancer %s already (replies could not be told apart); this one waits until that one is deleted", b.Address, p.Target(), p.Protocol, o)
				}
			}
		}
		if why != "" {
			st[r.ID] = lbStatus{State: sdk.Pending, Reason: why}
			continue
		}
		if len(services)+len(keys) > dataplane.MaxServices {
			st[r.ID] = lbStatus{State: sdk.Broken, full: true,
				Reason: fmt.Sprintf("this node's XDP tables are full: %d VIP ports in use, %d asked for, at most %d", len(services), len(keys), dataplane.MaxServices)}
			continue
		}
		healthy := 0
		for i, k := range keys {
			fwd[k] = r.ID
			p := cfg.Ports[i]
			s := dataplane.Service{Key: k, TargetPort: uint16(p.Target())}
			for _, b := range cfg.Backends {
				rev[revKey{netip.MustParseAddr(b.Address), p.Target(), p.Protocol}] = r.ID
				h := r.Health[b.Address]
				s.Backends = append(s.Backends, dataplane.Backend{Addr: netip.MustParseAddr(b.Address), Weight: b.Weight, InTable: h.Healthy})
				if i == 0 && h.Healthy {
					healthy++
				}
			}
			services = append(services, s)
		}
		reason := fmt.Sprintf("%d of %d backends healthy", healthy, len(cfg.Backends))
		if healthy == 0 {
			reason += ": packets to the VIP are dropped"
		}
		st[r.ID] = lbStatus{State: sdk.Running, Reason: reason, Keys: keys}
	}
	return services, st
}
