package schedule

import (
	"math"
	"slices"
	"testing"
)

func TestScores(t *testing.T) {
	racks := []Node{nd("a", 8, 16, "rack", "r1"), nd("b", 8, 16, "rack", "r2"), nd("c", 8, 16)}
	tests := []struct {
		name  string
		nodes []Node
		req   Request
		mk    func(*cycle) scorer
		want  []float64
	}{
		{
			name:  "soft affinity: before any replica every labelled node matches",
			nodes: racks, req: Request{Policy: Policy{SoftAffinity: []Term{{Key: lk("rack"), Weight: 3}}}},
			mk:   func(*cycle) scorer { return softAffinityScore{t: 0} },
			want: []float64{3, 3, 0},
		},
		{
			name:  "soft affinity: then the replicas' domain",
			nodes: racks, req: Request{Policy: Policy{SoftAffinity: []Term{{Key: lk("rack"), Weight: 3}}}, Existing: on("b")},
			mk:   func(*cycle) scorer { return softAffinityScore{t: 0} },
			want: []float64{0, 3, 0},
		},
		{
			name:  "soft affinity: values",
			nodes: racks, req: Request{Policy: Policy{SoftAffinity: []Term{{Key: lk("rack"), Values: []string{"r1"}}}}, Existing: on("b")},
			mk:   func(*cycle) scorer { return softAffinityScore{t: 0} },
			want: []float64{1, 0, 0},
		},
		{
			name:  "soft anti-affinity: fewer replicas score higher; no key scores nothing",
			nodes: racks, req: Request{Policy: Policy{SoftAntiAffinity: []Term{{Key: lk("rack"), Weight: 4}}}, Existing: on("a", "a")},
			mk:   func(c *cycle) scorer { return c.scorers()[0] },
			want: []float64{4.0 / 3, 4, 0},
		},
		{
			name:  "soft anti-affinity: max_per_domain before it counts",
			nodes: racks, req: Request{Policy: Policy{SoftAntiAffinity: []Term{{Key: lk("rack"), MaxPerDomain: 2}}}, Existing: on("a")},
			mk:   func(c *cycle) scorer { return c.scorers()[0] },
			want: []float64{1, 1, 0},
		},
		{
			name:  "spread: relative to the least loaded domain",
			nodes: []Node{nd("a", 8, 16, "zone", "z1"), nd("b", 8, 16, "zone", "z2"), nd("c", 8, 16)},
			req:   Request{Existing: on("a", "a", "b")}, // default zone spread
			mk:    func(*cycle) scorer { return spreadScore{s: 0} },
			want:  []float64{SpreadWeight / 2.0, SpreadWeight, 0},
		},
		{
			name:  "binpack: used fraction after placement",
			nodes: []Node{nd("a", 8, 16), with(nd("b", 8, 16), func(n *Node) { n.Reserved = Resources{VCPUs: 4, MemoryBytes: 8 * gib, DiskBytes: 50 * gib} })},
			req:   Request{Shape: Resources{VCPUs: 4, MemoryBytes: 8 * gib, DiskBytes: 50 * gib}},
			mk:    func(*cycle) scorer { return strategyScore{} },
			want:  []float64{0.5, 1},
		},
		{
			name:  "spread strategy: free fraction after placement",
			nodes: []Node{nd("a", 8, 16), with(nd("b", 8, 16), func(n *Node) { n.Reserved = Resources{VCPUs: 4, MemoryBytes: 8 * gib, DiskBytes: 50 * gib} })},
			req:   Request{Shape: Resources{VCPUs: 4, MemoryBytes: 8 * gib, DiskBytes: 50 * gib}},
			mk:    func(*cycle) scorer { return strategyScore{spread: true} },
			want:  []float64{0.5, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Shape == (Resources{}) {
				tt.req.Shape = shape(1, 1)
			}
			c := newCycle(NewSnapshot(tt.nodes), &tt.req)
			c.prepare()
			s := tt.mk(c)
			got := make([]float64, len(tt.nodes))
			for i := range tt.nodes {
				got[i] = s.score(c, i)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
				t.Errorf("scores = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDefaultSpread(t *testing.T) {
	tests := []struct {
		name string
		pol  Policy
		want int // spreads after defaults
	}{
		{"none given: zone spread added", Policy{}, 1},
		{"turned off", Policy{NoDefaultSpread: true}, 0},
		{"zone already in a rule", Policy{AntiAffinity: []Term{{Key: lk("zone")}}}, 0},
		{"zone already spread", Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 2}}}, 1},
		{"other spread kept, zone added", Policy{Spread: []Spread{{Key: lk("rack"), MaxSkew: 1}}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(tt.pol.withDefaults().Spread); got != tt.want {
				t.Errorf("spreads = %d, want %d", got, tt.want)
			}
		})
	}
}
