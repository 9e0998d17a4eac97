package root

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

func lbService(replicas int32) *unyov1.RegionService {
	s := webService(replicas)
	s.Spec.Compute.Network = "net"
	s.Spec.Loadbalancer = &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, TargetPort: 8080, Protocol: "tcp"}}}
	return s
}

// lb renders the service's load balancer as "PHASE REASON vip=VIP
// cluster=CLUSTER backends=NAME,NAME", "" when there is none.
func (f *controllerFixture) lb() (string, *unyov1.Loadbalancer) {
	f.t.Helper()
	o, err := f.st.GetObject(context.Background(), service.KindLoadbalancer, "web-lb")
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	l := o.GetLoadbalancer()
	var bs []string
	for _, b := range l.GetBackends() {
		bs = append(bs, b.GetCompute())
	}
	return strings.Join(strings.Fields(fmt.Sprintf("%s %s cluster=%s backends=%s", l.GetStatus().GetPhase(), l.GetStatus().GetReason(), l.GetCluster(), strings.Join(bs, ","))), " "), l
}

// TestControllerLoadbalancer: a service with a loadbalancer spec gets
// web-lb with a VIP of its network (held once, under loadbalancer/web-lb),
// Blocked until a replica is placed, then in the cluster of its replicas
// with the Active ones as backends, following scale; the cluster's status
// comes back; removing the spec, or the service, removes it and releases
// its VIP.
func TestControllerLoadbalancer(t *testing.T) {
	f := newControllerFixture(t, "c1")
	ctx := context.Background()
	f.put(kinds.Wrap(&unyov1.Network{Name: "net", Spec: &unyov1.NetworkSpec{Cidr: "10.1.0.0/24", Gateway: "10.1.0.1", Scope: "region", Region: "tokyo",
		Ranges: []*unyov1.AddressRange{{First: "10.1.0.10", Last: "10.1.0.20"}}}}))
	f.apply(lbService(2))
	f.pass()
	if got, _ := f.lb(); got != "Blocked NoReplica cluster= backends=" {
		t.Fatalf("after the first pass the load balancer is %q, want Blocked NoReplica", got)
	}
	f.pass()
	got, l := f.lb()
	if got != "Active cluster=c1 backends=web-0,web-1" || l.GetStatus().GetNode() != "c1-node" {
		t.Fatalf("load balancer = %q (node %q), want Active in c1 with web-0,web-1", got, l.GetStatus().GetNode())
	}
	vip := l.GetVip()
	holders := func() map[string]string {
		allocs, err := f.st.ListAllocations(ctx, "net", f.clock)
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, a := range allocs {
			if a.GetReleasedAt() == nil { // not in quarantine
				h[a.GetHolder()] = a.GetAddress()
			}
		}
		return h
	}
	if h := holders(); vip == "" || h["loadbalancer/web-lb"] != vip || len(h) != 3 || h["compute/web-0"] == vip || h["compute/web-1"] == vip {
		t.Fatalf("VIP %q; IPAM holds %v", vip, h)
	}
	f.fake.mu.Lock()
	sent := f.fake.lbs["c1"]
	f.fake.mu.Unlock()
	if len(sent) != 1 || sent[0].GetVip() != vip || len(sent[0].GetBackends()) != 2 || sent[0].GetBackends()[0].GetAddress() == "" {
		t.Fatalf("c1 got load balancers %v", sent)
	}

	f.apply(lbService(3))
	f.pass() // web-2 is placed (Active in the fake's answer)
	f.pass() // and joins the backends
	if got, l := f.lb(); got != "Active cluster=c1 backends=web-0,web-1,web-2" || l.GetVip() != vip {
		t.Fatalf("after scaling up the load balancer is %q (VIP %q, was %q)", got, l.GetVip(), vip)
	}
	f.apply(lbService(1))
	f.pass()
	if got, _ := f.lb(); got != "Active cluster=c1 backends=web-0" {
		t.Fatalf("after scaling down the load balancer is %q", got)
	}

	// The spec loses its loadbalancer: the record goes with its VIP.
	s := lbService(1)
	s.Spec.Loadbalancer = nil
	f.apply(s)
	f.pass()
	if got, _ := f.lb(); got != "" {
		t.Fatalf("without a loadbalancer spec the load balancer is still %q", got)
	}
	if h := holders(); h["loadbalancer/web-lb"] != "" {
		t.Fatalf("the VIP is still held: %v", h)
	}

	// And back; then the service is deleted with it.
	f.apply(lbService(1))
	f.pass()
	if got, _ := f.lb(); got != "Active cluster=c1 backends=web-0" {
		t.Fatalf("the load balancer made again is %q", got)
	}
	r := &Root{store: f.st, nudgeServices: make(chan struct{}, 1)}
	if _, err := r.deleteService(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	f.pass()
	f.pass()
	if got, _ := f.lb(); got != "" {
		t.Fatalf("the deleted service's load balancer is still %q", got)
	}
	if _, err := f.st.GetObject(ctx, service.KindService, "web"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the service is still there: %v", err)
	}
	if h := holders(); len(h) != 0 {
		t.Fatalf("addresses still held: %v", h)
	}
}
