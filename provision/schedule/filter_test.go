package schedule

import (
	"slices"
	"testing"
)

func TestFilters(t *testing.T) {
	ready := nd("a", 8, 16, "zone", "z1", "rack", "r1")
	tests := []struct {
		name  string
		nodes []Node
		req   Request
		mk    func(*cycle) filter
		want  []Code
	}{
		{
			name:  "state keeps ready nodes",
			nodes: []Node{ready, with(ready, func(n *Node) { n.Name, n.State = "b", Stale }), with(ready, func(n *Node) { n.Name, n.State = "c", Down })},
			mk:    func(*cycle) filter { return stateFilter{} },
			want:  []Code{pass, CodeStale, CodeDown},
		},
		{
			name:  "schedulable refuses cordoned and draining",
			nodes: []Node{ready, with(ready, func(n *Node) { n.Name, n.Cordoned = "b", true }), with(ready, func(n *Node) { n.Name, n.Draining = "c", true })},
			mk:    func(*cycle) filter { return schedulableFilter{} },
			want:  []Code{pass, CodeCordoned, CodeDraining},
		},
		{
			name:  "names",
			nodes: []Node{nd("a", 1, 1), nd("b", 1, 1), nd("c", 1, 1)},
			req:   Request{Policy: Policy{Nodes: []string{"a", "c"}}},
			mk:    func(*cycle) filter { return nameFilter{} },
			want:  []Code{pass, CodeNodeName, pass},
		},
		{
			name:  "labels: every selector must match",
			nodes: []Node{nd("a", 1, 1, "disk", "ssd", "gpu", "yes"), nd("b", 1, 1, "disk", "hdd", "gpu", "yes"), nd("c", 1, 1, "disk", "ssd")},
			req: Request{Policy: Policy{Selectors: []Selector{
				{Key: "disk", Operator: In, Values: []string{"ssd", "nvme"}},
				{Key: "gpu", Operator: Exists},
			}}},
			mk:   func(*cycle) filter { return labelFilter{} },
			want: []Code{pass, CodeLabel, CodeLabel},
		},
		{
			name:  "labels: NotIn and DoesNotExist",
			nodes: []Node{nd("a", 1, 1, "tier", "gold"), nd("b", 1, 1, "tier", "bronze"), nd("c", 1, 1, "old", "1")},
			req: Request{Policy: Policy{Selectors: []Selector{
				{Key: "tier", Operator: NotIn, Values: []string{"bronze"}},
				{Key: "old", Operator: DoesNotExist},
			}}},
			mk:   func(*cycle) filter { return labelFilter{} },
			want: []Code{pass, CodeLabel, CodeLabel},
		},
		{
			name:  "a node lacking a hard rule's key is infeasible",
			nodes: []Node{nd("a", 1, 1, "rack", "r1", "zone", "z1"), nd("b", 1, 1, "zone", "z1"), nd("c", 1, 1, "rack", "r2")},
			req:   Request{Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}, Spread: []Spread{{Key: lk("zone"), MaxSkew: 1}}}},
			mk:    func(c *cycle) filter { return c.filters[0] }, // requiredKeysFilter comes first here
			want:  []Code{pass, CodeMissingLabel, CodeMissingLabel},
		},
		{
			name:  "size: whole capacity below the shape",
			nodes: []Node{nd("a", 8, 16), nd("b", 2, 16), nd("c", 8, 4)},
			req:   Request{Shape: shape(4, 8)},
			mk:    func(*cycle) filter { return sizeFilter{} },
			want:  []Code{pass, CodeTooSmall, CodeTooSmall},
		},
		{
			name: "fit: capacity minus reservations, each dimension, no overcommit",
			nodes: []Node{
				with(nd("a", 8, 16), func(n *Node) { n.Reserved = shape(4, 8) }),                                               // exactly fits
				with(nd("b", 8, 16), func(n *Node) { n.Reserved = shape(5, 0) }),                                               // vCPU short by one
				with(nd("c", 8, 16), func(n *Node) { n.Reserved = Resources{MemoryBytes: 8*gib + 1} }),                         // memory short by a byte
				with(nd("d", 8, 16), func(n *Node) { n.Reserved = Resources{DiskBytes: 100*gib - shape(0, 0).DiskBytes + 1} }), // disk short
			},
			req:  Request{Shape: shape(4, 8)},
			mk:   func(*cycle) filter { return fitFilter{} },
			want: []Code{pass, CodeInsufficient, CodeInsufficient, CodeInsufficient},
		},
		{
			name:  "affinity: the first replica goes anywhere",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2")},
			req:   Request{Policy: Policy{Affinity: []Term{{Key: lk("rack")}}}},
			mk:    func(c *cycle) filter { return newAffinityFilter(c) },
			want:  []Code{pass, pass},
		},
		{
			name:  "affinity: later replicas follow the first",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2"), nd("c", 1, 1, "rack", "r1")},
			req:   Request{Policy: Policy{Affinity: []Term{{Key: lk("rack")}}}, Existing: on("a")},
			mk:    func(c *cycle) filter { return newAffinityFilter(c) },
			want:  []Code{pass, CodeAffinity, pass},
		},
		{
			name:  "affinity: values restrict the domains",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2"), nd("c", 1, 1, "rack", "r3")},
			req:   Request{Policy: Policy{Affinity: []Term{{Key: lk("rack"), Values: []string{"r2", "r3"}}}}},
			mk:    func(c *cycle) filter { return newAffinityFilter(c) },
			want:  []Code{CodeAffinity, pass, pass},
		},
		{
			name:  "anti-affinity: max one per domain by default",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2"), nd("c", 1, 1, "rack", "r1")},
			req:   Request{Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}, Existing: on("a")},
			mk:    pick[antiAffinityFilter],
			want:  []Code{CodeAntiAffinity, pass, CodeAntiAffinity},
		},
		{
			name:  "anti-affinity: max_per_domain",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2"), nd("c", 1, 1, "rack", "r1")},
			req:   Request{Policy: Policy{AntiAffinity: []Term{{Key: lk("rack"), MaxPerDomain: 2}}}, Existing: on("a", "c", "b")},
			mk:    pick[antiAffinityFilter],
			want:  []Code{CodeAntiAffinity, pass, CodeAntiAffinity},
		},
		{
			name:  "anti-affinity on hostname: one per node",
			nodes: []Node{nd("a", 1, 1), nd("b", 1, 1)},
			req:   Request{Policy: Policy{AntiAffinity: []Term{{Key: LabelHostname}}}, Existing: on("b")},
			mk:    pick[antiAffinityFilter],
			want:  []Code{pass, CodeAntiAffinity},
		},
		{
			name:  "anti-affinity counts placements given with labels",
			nodes: []Node{nd("a", 1, 1, "rack", "r1"), nd("b", 1, 1, "rack", "r2")},
			req:   Request{Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}, Existing: []Placement{{Node: "gone", Labels: map[string]string{lk("rack"): "r2"}}}},
			mk:    pick[antiAffinityFilter],
			want:  []Code{pass, CodeAntiAffinity},
		},
		{
			name: "spread: max skew counts empty domains",
			// z1 has one replica, z2 and z3 none: another in z1 would make skew 2.
			nodes: []Node{nd("a", 1, 1, "zone", "z1"), nd("b", 1, 1, "zone", "z2"), nd("c", 1, 1, "zone", "z3")},
			req:   Request{Policy: Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 1}}}, Existing: on("a")},
			mk:    pick[spreadFilter],
			want:  []Code{CodeSpread, pass, pass},
		},
		{
			name: "spread: a domain whose only node is cordoned is not a domain",
			nodes: []Node{nd("a", 1, 1, "zone", "z1"), nd("b", 1, 1, "zone", "z2"),
				with(nd("c", 1, 1, "zone", "z3"), func(n *Node) { n.Cordoned = true })},
			req:  Request{Policy: Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 1}}}, Existing: on("a", "b")},
			mk:   pick[spreadFilter],
			want: []Code{pass, pass, pass},
		},
		{
			name:  "spread: max skew 2",
			nodes: []Node{nd("a", 1, 1, "zone", "z1"), nd("b", 1, 1, "zone", "z2")},
			req:   Request{Policy: Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 2}}}, Existing: on("a", "a")},
			mk:    pick[spreadFilter],
			want:  []Code{CodeSpread, pass},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Shape == (Resources{}) {
				tt.req.Shape = shape(1, 1)
			}
			if got := runFilter(tt.nodes, tt.req, tt.mk); !slices.Equal(got, tt.want) {
				t.Errorf("codes = %v, want %v", got, tt.want)
			}
		})
	}
}

// pick returns the cycle's first filter of type F, as the policy built it.
func pick[F filter](c *cycle) filter {
	for _, f := range c.filters {
		if f, ok := f.(F); ok {
			return f
		}
	}
	panic("the policy built no such filter")
}

func TestFilterOrderStaticFirst(t *testing.T) {
	c := newCycle(NewSnapshot([]Node{nd("a", 1, 1)}), &Request{Policy: Policy{
		Nodes: []string{"a"}, Selectors: []Selector{{Key: "x", Operator: Exists}},
		Affinity: []Term{{Key: "k"}}, AntiAffinity: []Term{{Key: "k"}},
		Spread: []Spread{{Key: "k", MaxSkew: 1}},
	}})
	seenTransient := false
	for _, f := range c.filters {
		switch f.(type) {
		case stateFilter, schedulableFilter, spreadFilter, fitFilter:
			seenTransient = true
		default:
			if seenTransient {
				t.Fatalf("static filter %T after a transient one in %T", f, c.filters)
			}
		}
	}
}
