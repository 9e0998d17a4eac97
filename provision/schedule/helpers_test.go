package schedule

import (
	"maps"

	"github.com/unyo-ops/unyo/provision/topology"
)

const gib = 1 << 30

// nd builds a Ready node with vcpu vCPUs, mem GiB of memory and 100 GiB of
// disk, and the given labels as key=value pairs (short keys zone, rack,
// power expand to the topology labels).
func nd(name string, vcpu, mem int64, kv ...string) Node {
	n := Node{Name: name, Capacity: Resources{VCPUs: vcpu, MemoryBytes: mem * gib, DiskBytes: 100 * gib}, Labels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[lk(kv[i])] = kv[i+1]
	}
	return n
}

// lk expands a short label key.
func lk(k string) string {
	switch k {
	case "zone":
		return topology.LabelZone
	case "rack":
		return topology.LabelRack
	case "power":
		return topology.LabelPower
	case "host":
		return LabelHostname
	}
	return k
}

func with(n Node, f func(*Node)) Node {
	n.Labels = maps.Clone(n.Labels)
	f(&n)
	return n
}

func shape(vcpu, mem int64) Resources {
	return Resources{VCPUs: vcpu, MemoryBytes: mem * gib, DiskBytes: 1 * gib}
}

func on(nodes ...string) []Placement {
	ps := make([]Placement, len(nodes))
	for i, n := range nodes {
		ps[i] = Placement{Node: n}
	}
	return ps
}

// runFilter applies one filter to every node and returns the codes.
func runFilter(nodes []Node, req Request, mk func(*cycle) filter) []Code {
	c := newCycle(NewSnapshot(nodes), &req)
	c.prepare()
	f := mk(c)
	out := make([]Code, len(nodes))
	for i := range nodes {
		out[i] = f.check(c, i).code
	}
	return out
}

func names(cs []Choice) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Node
	}
	return out
}
