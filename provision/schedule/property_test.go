package schedule

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomCluster makes nodes of mixed sizes, states and labels; some lack
// the rack label.
func randomCluster(r *rand.Rand, n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nd := nd(fmt.Sprintf("n%03d", i), int64(2+r.IntN(31)), int64(4+r.IntN(125)), "zone", fmt.Sprintf("z%d", r.IntN(3)))
		if r.IntN(10) > 0 {
			nd.Labels[lk("rack")] = fmt.Sprintf("r%d", r.IntN(8))
		}
		if r.IntN(4) == 0 {
			nd.Labels["ssd"] = "1"
		}
		switch r.IntN(20) {
		case 0:
			nd.State = Down
		case 1:
			nd.State = Stale
		case 2:
			nd.Cordoned = true
		case 3:
			nd.Draining = true
		}
		nodes[i] = nd
	}
	return nodes
}

func randomPolicy(r *rand.Rand) Policy {
	var p Policy
	if r.IntN(3) == 0 {
		p.AntiAffinity = append(p.AntiAffinity, Term{Key: lk("rack"), MaxPerDomain: r.IntN(3)})
	}
	if r.IntN(3) == 0 {
		p.AntiAffinity = append(p.AntiAffinity, Term{Key: LabelHostname, MaxPerDomain: r.IntN(2)})
	}
	if r.IntN(5) == 0 {
		p.Affinity = append(p.Affinity, Term{Key: lk("zone")})
	} else if r.IntN(3) == 0 {
		p.Spread = append(p.Spread, Spread{Key: lk("zone"), MaxSkew: r.IntN(3)})
	}
	if r.IntN(4) == 0 {
		p.SoftAntiAffinity = append(p.SoftAntiAffinity, Term{Key: lk("rack"), Weight: 1 + r.IntN(20)})
	}
	if r.IntN(6) == 0 {
		p.Selectors = append(p.Selectors, Selector{Key: "ssd", Operator: Exists})
	}
	if r.IntN(3) == 0 {
		p.Strategy = SpreadNodes
	}
	return p
}

// TestNeverOvercommits places random services on random clusters, commits
// every choice through Check as a caller would, and asserts that no node
// ever exceeds its capacity and that no hard rule is ever broken.
func TestNeverOvercommits(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 14))
		nodes := randomCluster(r, 5+r.IntN(60))
		byName := map[string]int{}
		for i, n := range nodes {
			byName[n.Name] = i
		}
		type service struct {
			req    Request
			placed []int // node indices
		}
		// Even seeds reuse one Snapshot, updated in place as a caller
		// would; odd seeds index the nodes afresh on every call.
		snap := NewSnapshot(nodes)
		place := func(req Request, n int) Result {
			if seed%2 == 0 {
				return snap.Place(req, n)
			}
			return Place(nodes, req, n)
		}
		var services []*service
		for round := range 40 {
			var s *service
			if round > 0 && r.IntN(3) == 0 {
				s = services[r.IntN(len(services))]
			} else {
				s = &service{req: Request{
					Service: fmt.Sprintf("svc-%d", round),
					Shape:   Resources{VCPUs: int64(1 + r.IntN(8)), MemoryBytes: int64(1+r.IntN(32)) * gib, DiskBytes: int64(r.IntN(20)) * gib},
					Policy:  randomPolicy(r),
				}}
				services = append(services, s)
			}
			res := place(s.req, 1+r.IntN(6))
			if len(res.Placed) > 0 && res.Reason != nil && res.Reason.Class == Unsatisfiable && res.Reason.Invalid != "" {
				t.Fatalf("seed %d: placed despite an invalid request", seed)
			}
			for _, ch := range res.Placed {
				i := byName[ch.Node]
				if err := Check(nodes[i], s.req); err != nil {
					t.Fatalf("seed %d: Place chose %s but Check refuses it: %v", seed, ch.Node, err)
				}
				nodes[i].Reserved = nodes[i].Reserved.Add(s.req.Shape)
				nodes[i].Generation++
				s.placed = append(s.placed, i)
				s.req.Existing = append(s.req.Existing, Placement{Node: ch.Node, Labels: nodes[i].Labels})
			}
		}
		for _, n := range nodes {
			if !n.Reserved.Fits(n.Capacity) {
				t.Fatalf("seed %d: node %s overcommitted: reserved %+v of %+v", seed, n.Name, n.Reserved, n.Capacity)
			}
		}
		for _, s := range services {
			assertHardRules(t, seed, nodes, s.req, s.placed)
		}
	}
}

func assertHardRules(t *testing.T, seed uint64, nodes []Node, req Request, placed []int) {
	t.Helper()
	pol := req.Policy
	for _, i := range placed {
		n := &nodes[i]
		if n.State != Ready || n.Cordoned || n.Draining || !matchesAll(pol.Selectors, n.Labels) {
			t.Fatalf("seed %d: %s placed on ineligible node %+v", seed, req.Service, n)
		}
	}
	count := func(key string) map[string]int {
		m := map[string]int{}
		for _, i := range placed {
			v, ok := nodes[i].Value(key)
			if !ok {
				t.Fatalf("seed %d: %s placed on %s lacking hard key %s", seed, req.Service, nodes[i].Name, key)
			}
			m[v]++
		}
		return m
	}
	for _, term := range pol.AntiAffinity {
		for d, c := range count(term.Key) {
			if c > term.maxPerDomain() {
				t.Fatalf("seed %d: %s has %d replicas in %s=%s, max %d", seed, req.Service, c, term.Key, d, term.maxPerDomain())
			}
		}
	}
	for _, term := range pol.Affinity {
		if m := count(term.Key); len(m) > 1 {
			t.Fatalf("seed %d: %s spans %v on %s despite affinity", seed, req.Service, m, term.Key)
		}
	}
	for _, sp := range pol.Spread {
		if !sp.hard() {
			continue
		}
		m := count(sp.Key)
		lo, hi := -1, 0
		for i := range nodes {
			n := &nodes[i]
			v, ok := n.Value(sp.Key)
			if !ok || n.State != Ready || n.Cordoned || n.Draining || !matchesAll(pol.Selectors, n.Labels) {
				continue
			}
			c := m[v]
			if lo < 0 || c < lo {
				lo = c
			}
			hi = max(hi, c)
		}
		if hi-max(lo, 0) > sp.maxSkew() {
			t.Fatalf("seed %d: %s spread on %s has skew %d > %d (%v)", seed, req.Service, sp.Key, hi-lo, sp.maxSkew(), m)
		}
	}
}
