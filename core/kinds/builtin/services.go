package builtin

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/printer/cell"
	"github.com/unyo-ops/unyo/provision/service"
)

// errComputeApplied refuses a Compute in a document: root keeps one per
// replica of a RegionService, and nothing else makes them.
var errComputeApplied = errors.New("computes are created through their RegionService: apply a RegionService (or `unyo services scale NAME N`) instead")

// errLoadbalancerApplied refuses a Loadbalancer in a document: root keeps
// one per service whose spec has a loadbalancer.
var errLoadbalancerApplied = errors.New("load balancers are created through their RegionService: set spec.loadbalancer of a RegionService instead")

// services are RegionServices and root's records of their replicas
// (DESIGN.md, "Provisioning"); root owns both. Computes live in the same
// objects table as every kind, so that `unyo computes ls|get` and
// `unyo get computes` work like any other kind's, but they are written
// only by root's controller (core/root/provision.go).
func services() []kinds.Kind {
	return []kinds.Kind{
		kinds.Define(kinds.Spec[*unyov1.RegionService]{
			Noun: "services", Help: "RegionServices: replicas of a compute placed in a region", Aliases: []string{"service", "svc"},
			Owner:    kinds.RootTier,
			Validate: func(s *unyov1.RegionService, _ time.Time) error { return service.Validate(s) },
			Refs:     service.Refs,
			Columns: []kinds.TypedColumn[*unyov1.RegionService]{
				{Header: "NAME", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetName() }},
				{Header: "REGION", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetSpec().GetRegion() }},
				{Header: "FLAVOR", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetSpec().GetCompute().GetFlavor() }},
				{Header: "IMAGE", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetSpec().GetCompute().GetImage() }},
				{Header: "PROVIDER", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetSpec().GetCompute().GetProvider() }},
				{Header: "REPLICAS", Cell: func(s *unyov1.RegionService, _ time.Time) string {
					return fmt.Sprintf("%d/%d", s.GetStatus().GetActive(), s.GetSpec().GetCompute().GetReplicas())
				}},
				{Header: "PHASE", Cell: func(s *unyov1.RegionService, _ time.Time) string { return s.GetStatus().GetPhase() }},
				{Header: "REVISION", Cell: func(s *unyov1.RegionService, _ time.Time) string {
					return fmt.Sprint(s.GetStatus().GetTemplateRevision())
				}},
				{Header: "REASON", Width: 60, Cell: func(s *unyov1.RegionService, _ time.Time) string {
					if st := s.GetStatus(); st.GetReason() == "" && st.GetMessage() == "" {
						return st.GetRollout() // a rollout's progress, if one runs
					}
					return reason(s.GetStatus().GetReason(), s.GetStatus().GetMessage())
				}},
				{Header: "AUTOSCALE", Width: 80, Cell: autoscaleCell},
				{Header: "AGE", Cell: func(s *unyov1.RegionService, now time.Time) string { return cell.Age(now, s.GetCreatedAt()) }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Compute]{
			Noun: "computes", Help: "Computes: the replicas of RegionServices (root's records)", Aliases: []string{"compute"},
			Owner:    kinds.RootTier,
			Validate: func(*unyov1.Compute, time.Time) error { return errComputeApplied },
			Columns: []kinds.TypedColumn[*unyov1.Compute]{
				{Header: "NAME", Cell: func(c *unyov1.Compute, _ time.Time) string { return c.GetName() }},
				{Header: "SERVICE", Cell: func(c *unyov1.Compute, _ time.Time) string { return c.GetService() }},
				{Header: "PHASE", Cell: func(c *unyov1.Compute, _ time.Time) string { return c.GetStatus().GetPhase() }},
				{Header: "CLUSTER", Cell: func(c *unyov1.Compute, _ time.Time) string { return c.GetCluster() }},
				{Header: "NODE", Cell: func(c *unyov1.Compute, _ time.Time) string { return c.GetStatus().GetNode() }},
				// Root's IPAM allocates it before the replica is placed.
				{Header: "ADDRESS", Cell: func(c *unyov1.Compute, _ time.Time) string { return cmp.Or(c.GetAddress(), c.GetStatus().GetAddress()) }},
				{Header: "REASON", Width: 60, Cell: func(c *unyov1.Compute, _ time.Time) string {
					if r := reason(c.GetStatus().GetReason(), c.GetStatus().GetMessage()); r != "" {
						return r
					}
					return replacement(c.GetStatus())
				}},
				{Header: "AGE", Cell: func(c *unyov1.Compute, now time.Time) string { return cell.Age(now, c.GetCreatedAt()) }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Loadbalancer]{
			Noun: "loadbalancers", Help: "Load balancers: the VIPs of RegionServices (root's records)", Aliases: []string{"loadbalancer", "lb"},
			Owner:    kinds.RootTier,
			Validate: func(*unyov1.Loadbalancer, time.Time) error { return errLoadbalancerApplied },
			Columns: []kinds.TypedColumn[*unyov1.Loadbalancer]{
				{Header: "NAME", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetName() }},
				{Header: "SERVICE", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetService() }},
				{Header: "PHASE", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetStatus().GetPhase() }},
				{Header: "VIP", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetVip() }},
				{Header: "PORTS", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return LoadbalancerPorts(l.GetSpec()) }},
				{Header: "CLUSTER", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetCluster() }},
				{Header: "NODE", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return l.GetStatus().GetNode() }},
				{Header: "BACKENDS", Cell: func(l *unyov1.Loadbalancer, _ time.Time) string { return LoadbalancerBackends(l) }},
				{Header: "REASON", Width: 60, Cell: func(l *unyov1.Loadbalancer, _ time.Time) string {
					return reason(l.GetStatus().GetReason(), l.GetStatus().GetMessage())
				}},
				{Header: "AGE", Cell: func(l *unyov1.Loadbalancer, now time.Time) string { return cell.Age(now, l.GetCreatedAt()) }},
			},
		}),
	}
}

// LoadbalancerPorts is a load balancer's ports in words: "80/tcp->8080,53/udp".
func LoadbalancerPorts(s *unyov1.LoadbalancerSpec) string {
	var out []string
	for _, p := range s.GetPorts() {
		w := fmt.Sprintf("%d/%s", p.GetPort(), p.GetProtocol())
		if t := p.GetTargetPort(); t != 0 && t != p.GetPort() {
			w += fmt.Sprintf("->%d", t)
		}
		out = append(out, w)
	}
	return strings.Join(out, ",")
}

// LoadbalancerBackends is "healthy/total": the backends the provider
// reports healthy of those root put in rotation.
func LoadbalancerBackends(l *unyov1.Loadbalancer) string {
	healthy := 0
	for _, b := range l.GetStatus().GetBackends() {
		if b.GetHealthy() {
			healthy++
		}
	}
	return fmt.Sprintf("%d/%d", healthy, len(l.GetBackends()))
}

// autoscaleCell is a service's autoscale state: its bounds, the metric's
// last value against the target, the replicas wanted, when the autoscaler
// last changed them, and its last evaluation in words ("" when the service
// is not autoscaled).
func autoscaleCell(s *unyov1.RegionService, now time.Time) string {
	a := s.GetSpec().GetCompute().GetAutoscale()
	if a == nil {
		return ""
	}
	st := s.GetStatus().GetAutoscale()
	out := fmt.Sprintf("%d..%d", a.GetMin(), a.GetMax())
	switch {
	case st == nil:
		return out + " not evaluated yet"
	case st.GetError() != "":
		out += " metric unusable"
	case st.GetHasValue():
		out += fmt.Sprintf(" metric %.4g/%.4g want %d", st.GetValue(), a.GetTarget(), st.GetDesired())
	}
	if st.GetDecidedAt() != nil {
		out += ", scaled " + cell.Age(now, st.GetDecidedAt()) + " ago"
	}
	return out + ": " + st.GetReason()
}

// reason is "CODE: words", or either alone.
func reason(code, msg string) string {
	switch {
	case code == "":
		return msg
	case msg == "":
		return code
	}
	return code + ": " + msg
}

// replacement is a replacement in flight in words: "Drain: next on a2
// Creating:Scheduled", "Surge: next Blocked: 0/3 nodes fit: ...".
func replacement(st *unyov1.ComputeStatus) string {
	if st.GetReplacementPhase() == "" {
		return ""
	}
	out := st.GetReplacementReason() + ": next"
	if n := st.GetReplacingNode(); n != "" {
		out += " on " + n
	}
	out += " " + st.GetReplacementPhase()
	if m := st.GetReplacementMessage(); m != "" {
		out += ": " + m
	}
	return out
}
