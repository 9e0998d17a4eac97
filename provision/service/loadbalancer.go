package service

import (
	"fmt"
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// KindLoadbalancer is root's record of a service's load balancer.
const KindLoadbalancer = "Loadbalancer"

// LoadbalancerProviders are the provider plugins a load balancer may name:
// plugins/provider-xdp and plugins/provider-vpp, and lbtest, the test-only
// provider the integration tests run the flow with (it realizes nothing).
var LoadbalancerProviders = []string{"xdp", "vpp", "lbtest"}

// LoadbalancerName is the name of a service's load balancer.
func LoadbalancerName(svc string) string { return svc + "-lb" }

// validateLoadbalancer checks a service's load balancer spec, naming
// every wrong field.
func validateLoadbalancer(f *validate.Fields, field string, lb *unyov1.LoadbalancerSpec) {
	if lb == nil {
		return
	}
	switch p := lb.GetProvider(); {
	case p == "":
		f.Addf(field+".provider", "required: one of %s", strings.Join(LoadbalancerProviders, ", "))
	case !slices.Contains(LoadbalancerProviders, p):
		f.Addf(field+".provider", "%q is not a load-balancer provider (known: %s)", p, strings.Join(LoadbalancerProviders, ", "))
	}
	if len(lb.GetPorts()) == 0 {
		f.Add(field+".ports", "required: at least one port")
	}
	seen := map[string]bool{}
	for i, p := range lb.GetPorts() {
		pf := fmt.Sprintf("%s.ports[%d]", field, i)
		if p.GetPort() < 1 || p.GetPort() > 65535 {
			f.Addf(pf+".port", "must be 1-65535, got %d", p.GetPort())
		}
		if p.GetTargetPort() < 0 || p.GetTargetPort() > 65535 {
			f.Addf(pf+".target_port", "must be 1-65535 (or 0 for port), got %d", p.GetTargetPort())
		}
		if pr := p.GetProtocol(); pr != "tcp" && pr != "udp" {
			f.Addf(pf+".protocol", "must be tcp or udp, got %q", pr)
		}
		if k := fmt.Sprint(p.GetProtocol(), p.GetPort()); seen[k] {
			f.Addf(pf, "repeats %s port %d", p.GetProtocol(), p.GetPort())
		} else {
			seen[k] = true
		}
	}
	h := lb.GetHealth()
	hf := field + ".health"
	switch h.GetKind() {
	case "", "tcp", "http", "none":
	default:
		f.Addf(hf+".kind", "must be tcp, http or none, got %q", h.GetKind())
	}
	if h.GetPort() < 0 || h.GetPort() > 65535 {
		f.Addf(hf+".port", "must be 1-65535 (or 0 for the first port's target), got %d", h.GetPort())
	}
	if h.GetInterval() != "" {
		f.Duration(hf+".interval", h.GetInterval())
	}
	if h.GetTimeout() != "" {
		f.Duration(hf+".timeout", h.GetTimeout())
	}
	if h.GetFall() < 0 || h.GetRise() < 0 {
		f.Add(hf, "fall and rise must not be negative")
	}
	validatePolicy(f, field+".schedule", lb.GetSchedule())
}

// LoadbalancerBackends are the replicas a service's load balancer sends
// traffic to, by name: those Active with an address. A replica being
// deleted, replaced (Updating, or a drain or surge replacement in flight),
// Failed or not yet running is out of rotation; its replacement joins once
// Active.
func LoadbalancerBackends(records []*unyov1.Compute) []*unyov1.LoadbalancerBackend {
	var out []*unyov1.LoadbalancerBackend
	for _, r := range records {
		st := r.GetStatus()
		addr := r.GetAddress()
		if addr == "" {
			addr = st.GetAddress()
		}
		if st.GetPhase() != PhaseActive || st.GetReplacementPhase() != "" || addr == "" {
			continue
		}
		out = append(out, &unyov1.LoadbalancerBackend{Compute: r.GetName(), Address: addr})
	}
	slices.SortFunc(out, func(a, b *unyov1.LoadbalancerBackend) int { return strings.Compare(a.GetCompute(), b.GetCompute()) })
	return out
}

// LoadbalancerCluster is the cluster a service's load balancer runs in:
// the one holding most of its placed replicas (on a node, not being
// deleted), ties to the first name; "" while none is placed.
func LoadbalancerCluster(records []*unyov1.Compute) string {
	count := map[string]int{}
	for _, r := range records {
		if r.GetCluster() != "" && r.GetStatus().GetNode() != "" && r.GetStatus().GetPhase() != PhaseDeleting {
			count[r.GetCluster()]++
		}
	}
	best := ""
	for cl, n := range count {
		if n > count[best] || (n == count[best] && cl < best) {
			best = cl
		}
	}
	return best
}

// LoadbalancerAssignment is what a load balancer's agent realizes: its
// VIP, ports, backends and health check. The cluster rewrites the
// assignment (at a new generation) whenever this changes.
func LoadbalancerAssignment(l *unyov1.Loadbalancer) *unyov1.LoadbalancerAssignment {
	return &unyov1.LoadbalancerAssignment{Vip: l.GetVip(), Ports: l.GetSpec().GetPorts(), Backends: l.GetBackends(), Health: l.GetSpec().GetHealth()}
}
