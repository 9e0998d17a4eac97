// Package placement translates between the API's messages and the pure
// placement core (provision/schedule): nodes as the cluster stores them,
// a Compute's schedule policy and shape. It is the glue the cluster's node
// stage and the store's commit-time re-check share, so that both see a
// node and a policy alike.
package placement

import (
	"fmt"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
)

// Node is n as the scheduler sees it: its labels with the topology labels
// laid over them, capacity, reservations, liveness and schedulability.
func Node(n *unyov1.Node) schedule.Node {
	state := schedule.Down
	switch n.GetState() {
	case unyov1.NodeState_NODE_STATE_READY:
		state = schedule.Ready
	case unyov1.NodeState_NODE_STATE_STALE:
		state = schedule.Stale
	}
	return schedule.Node{
		Name:       n.GetName(),
		Labels:     topology.NodeLabels(n),
		Capacity:   Capacity(n),
		Reserved:   capacity(n.GetReserved()),
		State:      state,
		Cordoned:   n.GetCordoned(),
		Draining:   n.GetDraining(),
		Providers:  Providers(n.GetProviders()),
		Generation: n.GetGeneration(),
	}
}

// Providers are the healthy ones of a node's providers: nil when its agent
// reported none (it runs no provider plugin, or predates fingerprints),
// so that the scheduler does not filter it.
func Providers(ps []*unyov1.ProviderStatus) map[string]bool {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]bool, len(ps))
	for _, p := range ps {
		if p.GetHealthy() {
			out[p.GetName()] = true
		}
	}
	return out
}

// Capacity is what the scheduler may place on n: per resource, the least
// of the machine's capacity and that of every provider that reports one
// (a zero is none). All of a node's providers share the machine and its
// reservations, so a node with several providers offers every replica the
// smallest of their capacities (an unhealthy provider reports none: it
// takes no replicas of its own, and bounds nobody else's).
func Capacity(n *unyov1.Node) schedule.Resources {
	c := capacity(n.GetCapacity())
	least := func(have, reported int64) int64 {
		if reported > 0 && (have == 0 || reported < have) {
			return reported
		}
		return have
	}
	for _, p := range n.GetProviders() {
		pc := capacity(p.GetCapacity())
		c.VCPUs, c.MemoryBytes, c.DiskBytes = least(c.VCPUs, pc.VCPUs), least(c.MemoryBytes, pc.MemoryBytes), least(c.DiskBytes, pc.DiskBytes)
	}
	return c
}

// ProvidersKey is what the scheduler reads of a node's providers (which
// are healthy, their capacities), as a string that changes when that
// does; reasons, attributes and times are left out.
func ProvidersKey(ps []*unyov1.ProviderStatus) string {
	var b strings.Builder
	for _, p := range ps {
		c := p.GetCapacity()
		fmt.Fprintf(&b, "%s:%v:%d:%d:%d;", p.GetName(), p.GetHealthy(), c.GetCpus(), c.GetMemoryBytes(), c.GetDiskBytes())
	}
	return b.String()
}

func capacity(c *unyov1.Capacity) schedule.Resources {
	return schedule.Resources{VCPUs: int64(c.GetCpus()), MemoryBytes: c.GetMemoryBytes(), DiskBytes: c.GetDiskBytes()}
}

// Shape is one replica's resources.
func Shape(r *unyov1.ComputeResources) schedule.Resources {
	return schedule.Resources{VCPUs: r.GetVcpus(), MemoryBytes: r.GetMemoryBytes(), DiskBytes: r.GetDiskBytes()}
}

// Resources is the API form of a shape.
func Resources(r schedule.Resources) *unyov1.ComputeResources {
	return &unyov1.ComputeResources{Vcpus: r.VCPUs, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes}
}

// Policy is the node stage's part of a schedule policy (the cluster
// filters are root's).
func Policy(p *unyov1.SchedulePolicy) schedule.Policy {
	out := schedule.Policy{
		Nodes:            p.GetNodes(),
		Affinity:         terms(p.GetAffinity()),
		AntiAffinity:     terms(p.GetAntiAffinity()),
		SoftAffinity:     terms(p.GetSoftAffinity()),
		SoftAntiAffinity: terms(p.GetSoftAntiAffinity()),
		Strategy:         schedule.Strategy(p.GetStrategy()),
		NoDefaultSpread:  p.GetNoDefaultSpread(),
	}
	for _, l := range p.GetNodeLabels() {
		out.Selectors = append(out.Selectors, schedule.Selector{Key: l.GetKey(), Operator: schedule.Operator(l.GetOperator()), Values: l.GetValues()})
	}
	for _, s := range p.GetSpread() {
		out.Spread = append(out.Spread, schedule.Spread{Key: s.GetKey(), MaxSkew: int(s.GetMaxSkew()), WhenUnsatisfiable: schedule.WhenUnsatisfiable(s.GetWhenUnsatisfiable())})
	}
	return out
}

func terms(ts []*unyov1.AffinityTerm) []schedule.Term {
	var out []schedule.Term
	for _, t := range ts {
		out = append(out, schedule.Term{Key: t.GetKey(), Values: t.GetValues(), MaxPerDomain: int(t.GetMaxPerDomain()), Weight: int(t.GetWeight())})
	}
	return out
}

// Request is what placing c asks of the node stage; existing are the
// service's other placements.
func Request(c *unyov1.Compute, existing []schedule.Placement) schedule.Request {
	return schedule.Request{
		Service:  c.GetService(),
		Provider: c.GetSpec().GetProvider(),
		Shape:    Shape(c.GetResources()),
		Policy:   Policy(c.GetSpec().GetSchedule()),
		Existing: existing,
	}
}
