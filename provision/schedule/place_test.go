package schedule

import (
	"fmt"
	"slices"
	"testing"
)

func TestPlace(t *testing.T) {
	threeZones := []Node{
		nd("a1", 8, 16, "zone", "z1"), nd("a2", 8, 16, "zone", "z1"),
		nd("b1", 8, 16, "zone", "z2"), nd("b2", 8, 16, "zone", "z2"),
		nd("c1", 8, 16, "zone", "z3"), nd("c2", 8, 16, "zone", "z3"),
	}
	halfFull := with(nd("m", 8, 16), func(n *Node) { n.Reserved = shape(4, 8) })
	tests := []struct {
		name   string
		nodes  []Node
		req    Request
		n      int
		want   []string
		reason string // the unplaced replica's reason, "" if all placed
		class  Class
	}{
		{
			name:  "default policy spreads over zones",
			nodes: threeZones, req: Request{Shape: shape(1, 1)}, n: 3,
			want: []string{"a1", "b1", "c1"},
		},
		{
			name:  "default zone spread then binpack within the zone",
			nodes: threeZones, req: Request{Shape: shape(1, 1)}, n: 6,
			want: []string{"a1", "b1", "c1", "a1", "b1", "c1"},
		},
		{
			name:  "existing replicas count for the default spread",
			nodes: threeZones, req: Request{Shape: shape(1, 1), Existing: on("a1", "b2")}, n: 1,
			want: []string{"c1"},
		},
		{
			name:  "binpack prefers the fuller node",
			nodes: []Node{nd("e", 8, 16), halfFull}, req: Request{Shape: shape(1, 1)}, n: 1,
			want: []string{"m"},
		},
		{
			name:  "spread strategy prefers the emptier node",
			nodes: []Node{halfFull, nd("e", 8, 16)}, req: Request{Shape: shape(1, 1), Policy: Policy{Strategy: SpreadNodes}}, n: 2,
			want: []string{"e", "e"},
		},
		{
			name: "only nodes offering the provider healthy; unreported nodes are not filtered",
			nodes: []Node{
				with(nd("a", 8, 16), func(n *Node) { n.Providers = map[string]bool{"exec": true} }),
				with(nd("b", 8, 16), func(n *Node) { n.Providers = map[string]bool{"docker": true} }),
				nd("c", 8, 16),
			},
			req: Request{Shape: shape(1, 1), Provider: "docker", Policy: Policy{AntiAffinity: []Term{{Key: LabelHostname}}}}, n: 3,
			want:   []string{"b", "c"},
			reason: "0/3 nodes fit: 2 anti-affinity on hostname (blocking domains b, c), 1 without a healthy provider",
			class:  NoCapacity,
		},
		{
			name:  "ties break by name whatever the order",
			nodes: []Node{nd("c", 8, 16), nd("a", 8, 16), nd("b", 8, 16)}, req: Request{Shape: shape(1, 1)}, n: 1,
			want: []string{"a"},
		},
		{
			name:  "each placement counts before the next: capacity",
			nodes: []Node{halfFull, nd("e", 8, 16)}, req: Request{Shape: shape(2, 4)}, n: 4,
			want: []string{"m", "m", "e", "e"},
		},
		{
			name:  "each placement counts before the next: hostname anti-affinity",
			nodes: []Node{nd("a", 8, 16), nd("b", 8, 16), nd("c", 8, 16)},
			req:   Request{Shape: shape(1, 1), Policy: Policy{AntiAffinity: []Term{{Key: LabelHostname}}}}, n: 4,
			want:   []string{"a", "b", "c"},
			reason: "0/3 nodes fit: 3 anti-affinity on hostname (blocking domains a, b, c)",
			class:  Unsatisfiable,
		},
		{
			name:  "first-replica affinity: the first picks the rack, the rest follow",
			nodes: []Node{nd("a", 8, 16, "rack", "r2"), nd("b", 8, 16, "rack", "r1"), nd("c", 8, 16, "rack", "r2")},
			req:   Request{Shape: shape(4, 8), Policy: Policy{Affinity: []Term{{Key: lk("rack")}}, NoDefaultSpread: true}}, n: 5,
			// binpack and name pick a; a fills, c follows in r2; b (r1) never.
			want:   []string{"a", "a", "c", "c"},
			reason: "0/3 nodes fit: 2 insufficient vCPU (need 4 vCPUs; best node has 0 vCPUs free), 1 affinity on rack (bound to r2)",
			class:  NoCapacity,
		},
		{
			name:  "missing label everywhere is unsatisfiable",
			nodes: []Node{nd("a", 8, 16), nd("b", 8, 16)},
			req:   Request{Shape: shape(1, 1), Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}}, n: 1,
			reason: "0/2 nodes fit: 2 missing label topology.unyo.dev/rack",
			class:  Unsatisfiable,
		},
		{
			name:  "nodes lacking a hard key are skipped, others used",
			nodes: []Node{nd("a", 8, 16), nd("b", 8, 16, "rack", "r1")},
			req:   Request{Shape: shape(1, 1), Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}}, n: 1,
			want: []string{"b"},
		},
		{
			name:  "more replicas than max_per_domain allows is unsatisfiable",
			nodes: []Node{nd("a", 8, 16, "rack", "r1"), nd("b", 8, 16, "rack", "r2")},
			req:   Request{Shape: shape(1, 1), Policy: Policy{AntiAffinity: []Term{{Key: lk("rack"), MaxPerDomain: 2}}}}, n: 5,
			want:   []string{"a", "a", "b", "b"}, // bin-packing fills a's rack first
			reason: "0/2 nodes fit: 2 anti-affinity on rack (blocking domains r1, r2)",
			class:  Unsatisfiable,
		},
		{
			name: "max skew with an empty domain whose node is full: NoCapacity",
			nodes: []Node{nd("a", 8, 16, "zone", "z1"), nd("b", 8, 16, "zone", "z2"),
				with(nd("c", 8, 16, "zone", "z3"), func(n *Node) { n.Reserved = shape(8, 0) })},
			req: Request{Shape: shape(1, 1), Policy: Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 1}}}}, n: 3,
			want:   []string{"a", "b"},
			reason: "0/3 nodes fit: 2 spread on zone (max skew 1; blocking domains z1, z2), 1 insufficient vCPU (need 1 vCPU; best node has 0 vCPUs free)",
			class:  NoCapacity,
		},
		{
			name: "schedule_anyway spread prefers the emptiest domain but never blocks",
			nodes: []Node{nd("a", 8, 16, "zone", "z1"), nd("b", 8, 16, "zone", "z2"),
				with(nd("c", 8, 16, "zone", "z3"), func(n *Node) { n.Reserved = shape(8, 0) })},
			req: Request{Shape: shape(1, 1), Policy: Policy{Spread: []Spread{{Key: lk("zone"), MaxSkew: 1, WhenUnsatisfiable: ScheduleAnyway}}}}, n: 3,
			want: []string{"a", "b", "a"},
		},
		{
			name:  "soft anti-affinity prefers new racks, then doubles up",
			nodes: []Node{nd("a", 8, 16, "rack", "r1"), nd("b", 8, 16, "rack", "r2")},
			req:   Request{Shape: shape(1, 1), Policy: Policy{SoftAntiAffinity: []Term{{Key: lk("rack"), Weight: 5}}, NoDefaultSpread: true}}, n: 3,
			want: []string{"a", "b", "a"},
		},
		{
			name:  "soft affinity with values outweighs bin-packing",
			nodes: []Node{halfFull, nd("z", 8, 16, "power", "p2")},
			req:   Request{Shape: shape(1, 1), Policy: Policy{SoftAffinity: []Term{{Key: lk("power"), Values: []string{"p2"}}}}}, n: 1,
			want: []string{"z"},
		},
		{
			name:  "names and labels filter",
			nodes: []Node{nd("a", 8, 16, "ssd", "1"), nd("b", 8, 16, "ssd", "1"), nd("c", 8, 16)},
			req:   Request{Shape: shape(1, 1), Policy: Policy{Nodes: []string{"b", "c"}, Selectors: []Selector{{Key: "ssd", Operator: Exists}}}}, n: 2,
			want:   []string{"b", "b"},
			reason: "",
		},
		{
			name:  "no node matches the label selector: unsatisfiable",
			nodes: []Node{nd("a", 8, 16), with(nd("b", 8, 16), func(n *Node) { n.Cordoned = true })},
			req:   Request{Shape: shape(1, 1), Policy: Policy{Selectors: []Selector{{Key: "gpu", Operator: Exists}}}}, n: 1,
			reason: "0/2 nodes fit: 2 not matching label gpu",
			class:  Unsatisfiable,
		},
		{
			name:  "a request larger than every node is unsatisfiable",
			nodes: []Node{nd("a", 8, 16), nd("b", 4, 64)},
			req:   Request{Shape: shape(6, 32)}, n: 1,
			reason: "0/2 nodes fit: 1 too small for vCPU (need 6 vCPUs; largest has 4 vCPUs), 1 too small for memory (need 32 GiB; largest has 16 GiB)",
			class:  Unsatisfiable,
		},
		{
			name:  "down, stale and draining nodes are NoCapacity",
			nodes: []Node{with(nd("a", 8, 16), func(n *Node) { n.State = Down }), with(nd("b", 8, 16), func(n *Node) { n.State = Stale }), with(nd("c", 8, 16), func(n *Node) { n.Draining = true })},
			req:   Request{Shape: shape(1, 1)}, n: 1,
			reason: "0/3 nodes fit: 1 down, 1 stale, 1 draining",
			class:  NoCapacity,
		},
		{
			name: "no nodes at all is NoCapacity",
			req:  Request{Shape: shape(1, 1)}, n: 1,
			reason: "0/0 nodes fit: no nodes",
			class:  NoCapacity,
		},
		{
			name:  "a zero-size request is unsatisfiable",
			nodes: []Node{nd("a", 8, 16)},
			req:   Request{}, n: 2,
			reason: "invalid request: zero-size replica (vCPUs, memory and disk are all 0)",
			class:  Unsatisfiable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Place(tt.nodes, tt.req, tt.n)
			if got := names(res.Placed); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
				t.Errorf("placed on %v, want %v", got, tt.want)
			}
			if res.Unplaced != tt.n-len(res.Placed) {
				t.Errorf("unplaced = %d with %d placed of %d", res.Unplaced, len(res.Placed), tt.n)
			}
			switch {
			case tt.reason == "" && res.Reason != nil:
				t.Errorf("unexpected reason %q", res.Reason)
			case tt.reason != "" && res.Reason == nil:
				t.Errorf("no reason, want %q", tt.reason)
			case tt.reason != "":
				if got := res.Reason.String(); got != tt.reason {
					t.Errorf("reason\n got %q\nwant %q", got, tt.reason)
				}
				if res.Reason.Class != tt.class {
					t.Errorf("class = %v, want %v", res.Reason.Class, tt.class)
				}
			}
		})
	}
}

// TestReasonExample builds the example and checks it renders word
// for word.
func TestReasonExample(t *testing.T) {
	var nodes []Node
	for i := range 31 {
		nodes = append(nodes, with(nd(fmt.Sprintf("full-%02d", i), 32, 64, "rack", fmt.Sprintf("rack-2-%d", i%4)),
			func(n *Node) { n.Reserved = shape(0, 64-12+int64(i%3)) }))
	}
	for i := range 6 {
		nodes = append(nodes, with(nd(fmt.Sprintf("cordoned-%d", i), 32, 64, "rack", "rack-3-1"), func(n *Node) { n.Cordoned = true }))
	}
	for i := range 3 {
		nodes = append(nodes, nd(fmt.Sprintf("r12-%d", i), 32, 64, "rack", "rack-1-2"))
	}
	req := Request{Service: "db", Shape: shape(4, 16), Policy: Policy{AntiAffinity: []Term{{Key: lk("rack")}}}, Existing: on("r12-0")}
	res := Place(nodes, req, 1)
	const want = "0/40 nodes fit: 31 insufficient memory (need 16 GiB; best node has 12 GiB free), 6 cordoned, 3 anti-affinity on rack (blocking domain rack-1-2)"
	if res.Reason == nil || res.Reason.String() != want {
		t.Fatalf("reason\n got %v\nwant %s", res.Reason, want)
	}
	if res.Reason.Class != NoCapacity {
		t.Errorf("class = %v, want NoCapacity", res.Reason.Class)
	}
	j := res.Reason.Rejections[0]
	if j.Code != CodeInsufficient || j.Resource != Memory || j.Need != 16*gib || j.Best != 12*gib || j.Nodes != 31 {
		t.Errorf("first rejection = %+v", j)
	}
}

func TestPlaceDoesNotModifyNodes(t *testing.T) {
	nodes := []Node{nd("a", 8, 16, "zone", "z1")}
	before := nodes[0]
	Place(nodes, Request{Shape: shape(2, 2)}, 3)
	if nodes[0].Reserved != before.Reserved {
		t.Fatalf("Place changed the caller's node: %+v", nodes[0])
	}
}

func TestPlaceDeterministic(t *testing.T) {
	var nodes []Node
	for i := range 50 {
		nodes = append(nodes, nd(fmt.Sprintf("n%02d", i), 16, 32, "zone", fmt.Sprintf("z%d", i%3), "rack", fmt.Sprintf("r%d", i%7)))
	}
	req := Request{Shape: shape(2, 4), Policy: Policy{SoftAntiAffinity: []Term{{Key: lk("rack")}}}}
	first := names(Place(nodes, req, 20).Placed)
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	if again := names(Place(rev, req, 20).Placed); !slices.Equal(first, again) {
		t.Fatalf("node order changed the answer:\n%v\n%v", first, again)
	}
}
