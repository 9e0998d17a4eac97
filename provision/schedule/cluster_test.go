package schedule

import (
	"slices"
	"strconv"
	"testing"
)

// nodes are Ready nodes named prefix-0, prefix-1, ... of vcpu vCPUs and
// mem GiB, nothing reserved, with ample disk.
func nodes(prefix string, n int, vcpu, mem int64, kv ...string) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = nd(prefix+"-"+strconv.Itoa(i), vcpu, mem, kv...)
	}
	return out
}

func TestClusterFits(t *testing.T) {
	// Summed free memory holds 4 replicas of 8 GiB, but no node holds one
	// whole and the other only one: per node, 1 fits.
	c := Cluster{Nodes: []Node{nd("a", 8, 6), nd("b", 8, 6), nd("c", 8, 6), nd("d", 8, 14)}}
	if got := c.Fits(shape(2, 8)); got != 1 {
		t.Errorf("Fits = %d, want 1 (per node, not summed)", got)
	}
	// Reservations count; an unschedulable node counts for nothing.
	c = Cluster{Nodes: []Node{nd("a", 8, 16), with(nd("b", 8, 16), func(n *Node) { n.Cordoned = true }),
		with(nd("c", 9, 64), func(n *Node) { n.Reserved = Resources{VCPUs: 6} }), with(nd("d", 8, 16), func(n *Node) { n.State = Down })}}
	if got := c.Fits(shape(2, 4)); got != 4+0+1+0 {
		t.Errorf("Fits = %d, want 5", got)
	}
}

func TestPlaceClusters(t *testing.T) {
	cl := func(name, region string, weight, n int, labels ...string) Cluster {
		c := Cluster{Name: name, Region: region, Weight: weight, Labels: map[string]string{}, Nodes: nodes(name, n, 8, 16)}
		for i := 0; i+1 < len(labels); i += 2 {
			c.Labels[labels[i]] = labels[i+1]
		}
		return c
	}
	clusters := []Cluster{
		cl("c-small", "tokyo", 10, 1, "env", "prod"), // heaviest but holds 4 of shape(2,4)
		cl("c-big", "tokyo", 5, 4, "env", "prod"),    // holds 16
		cl("c-mid", "tokyo", 5, 2, "env", "dev"),     // holds 8
		cl("c-osaka", "osaka", 50, 9),
	}
	tests := []struct {
		name     string
		pol      ClusterPolicy
		replicas int
		want     []ClusterAssignment
		ranked   []string
		reason   string
		class    Class
	}{
		{
			name: "weight first", pol: ClusterPolicy{Region: "tokyo"}, replicas: 3,
			want:   []ClusterAssignment{{"c-small", 3}},
			ranked: []string{"c-small", "c-big", "c-mid"},
		},
		{
			name: "same weight: more replicas fit first; a set is not split", pol: ClusterPolicy{Region: "tokyo"}, replicas: 6,
			want:   []ClusterAssignment{{"c-big", 6}},
			ranked: []string{"c-small", "c-big", "c-mid"},
		},
		{
			name: "labels and names", pol: ClusterPolicy{Region: "tokyo", Clusters: []string{"c-mid", "c-big"}, Selectors: []Selector{{Key: "env", Operator: In, Values: []string{"dev"}}}}, replicas: 2,
			want:   []ClusterAssignment{{"c-mid", 2}},
			ranked: []string{"c-mid"},
		},
		{
			name: "a cluster that turned the set down is skipped", pol: ClusterPolicy{Region: "tokyo", Exclude: []string{"c-small"}}, replicas: 2,
			want:   []ClusterAssignment{{"c-big", 2}},
			ranked: []string{"c-big", "c-mid"},
		},
		{
			name: "too many for any one cluster", pol: ClusterPolicy{Region: "tokyo"}, replicas: 20,
			ranked: []string{"c-small", "c-big", "c-mid"},
			reason: `0/4 clusters fit 20 replicas: c-big fits 16, c-mid fits 8, c-osaka in region "osaka", c-small fits 4`,
			class:  NoCapacity,
		},
		{
			name: "split allowed: fill in rank order", pol: ClusterPolicy{Region: "tokyo", AllowSplit: true}, replicas: 22,
			want:   []ClusterAssignment{{"c-small", 4}, {"c-big", 16}, {"c-mid", 2}},
			ranked: []string{"c-small", "c-big", "c-mid"},
		},
		{
			name: "split allowed but not enough: the rest is unplaced", pol: ClusterPolicy{Region: "tokyo", AllowSplit: true}, replicas: 30,
			want:   []ClusterAssignment{{"c-small", 4}, {"c-big", 16}, {"c-mid", 8}},
			ranked: []string{"c-small", "c-big", "c-mid"},
			reason: `0/4 clusters fit 2 replicas: c-big fits 0, c-mid fits 0, c-osaka in region "osaka", c-small fits 0`,
			class:  NoCapacity,
		},
		{
			name: "no cluster matches: unsatisfiable", pol: ClusterPolicy{Region: "tokyo", Selectors: []Selector{{Key: "gpu", Operator: Exists}}}, replicas: 1,
			reason: `0/4 clusters fit 1 replicas: c-big not matching label gpu, c-mid not matching label gpu, c-osaka in region "osaka", c-small not matching label gpu`,
			class:  Unsatisfiable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PlaceClusters(clusters, Request{Service: "web", Shape: shape(2, 4), Policy: Policy{NoDefaultSpread: true}}, tt.replicas, tt.pol)
			if !slices.Equal(res.Assignments, tt.want) {
				t.Errorf("assignments = %v, want %v", res.Assignments, tt.want)
			}
			var ranked []string
			for _, r := range res.Ranked {
				ranked = append(ranked, r.Cluster)
			}
			if !slices.Equal(ranked, tt.ranked) {
				t.Errorf("ranked = %v, want %v", ranked, tt.ranked)
			}
			checkClusterReason(t, res.Reason, tt.reason, tt.class)
		})
	}
}

func TestPlaceClustersZeroShape(t *testing.T) {
	res := PlaceClusters([]Cluster{{Name: "c", Nodes: []Node{nd("n", 1, 1)}}}, Request{}, 1, ClusterPolicy{})
	if res.Reason == nil || res.Reason.Class != Unsatisfiable || res.Unplaced != 1 {
		t.Fatalf("zero-size shape: %+v", res)
	}
}

// The cluster stage runs the node stage's rules over each cluster's nodes
// (issue 14, item 2; session 9): a set of one-per-node replicas is not
// given to a cluster with fewer nodes, and a shape larger than every node
// fails at once instead of waiting.
func TestPlaceClustersNodeRules(t *testing.T) {
	perHost := Policy{NoDefaultSpread: true, AntiAffinity: []Term{{Key: LabelHostname}}}
	zoneSpread := Policy{NoDefaultSpread: true, Spread: []Spread{{Key: lk("zone"), MaxSkew: 1}}}
	full := func(ns []Node) []Node {
		for i := range ns {
			ns[i].Reserved = ns[i].Capacity
		}
		return ns
	}
	two := func(name string) Cluster {
		return Cluster{Name: name, Region: "tokyo", Weight: 1, Nodes: nodes(name, 2, 8, 16)}
	}
	tests := []struct {
		name     string
		clusters []Cluster
		req      Request
		pol      ClusterPolicy
		replicas int
		want     []ClusterAssignment
		reason   string
		class    Class
	}{
		{
			name: "one per node, split allowed: two clusters of two", clusters: []Cluster{two("c1"), two("c2")},
			req: Request{Shape: shape(1, 1), Policy: perHost}, pol: ClusterPolicy{AllowSplit: true}, replicas: 4,
			want: []ClusterAssignment{{"c1", 2}, {"c2", 2}},
		},
		{
			name: "one per node, no split: no cluster has the domains", clusters: []Cluster{two("c1"), two("c2")},
			req: Request{Shape: shape(1, 1), Policy: perHost}, replicas: 4,
			reason: "0/2 clusters fit 4 replicas: c1 fits 2 (0/2 nodes fit: 2 anti-affinity on hostname (blocking domains c1-0, c1-1)), " +
				"c2 fits 2 (0/2 nodes fit: 2 anti-affinity on hostname (blocking domains c2-0, c2-1))",
			class: Unsatisfiable,
		},
		{
			name: "one per node, no split: the larger cluster takes the set", clusters: []Cluster{two("c1"), {Name: "c3", Weight: 1, Nodes: nodes("c3", 4, 2, 2)}},
			req: Request{Shape: shape(1, 1), Policy: perHost}, replicas: 4,
			want: []ClusterAssignment{{"c3", 4}},
		},
		{
			name: "replicas already placed and pending count against max_per_domain", clusters: []Cluster{two("c1"), two("c2")},
			req: Request{Shape: shape(1, 1), Policy: perHost}, replicas: 2,
			pol:  ClusterPolicy{AllowSplit: true, Placed: map[string][]Placement{"c1": on("c1-0")}, Pending: map[string]int{"c2": 1}},
			want: []ClusterAssignment{{"c1", 1}, {"c2", 1}},
		},
		{
			name: "a hard spread over zones bounds what a one-zone-full cluster takes",
			clusters: []Cluster{{Name: "c1", Weight: 2, Nodes: slices.Concat(nodes("a", 1, 8, 16, "zone", "az1"), full(nodes("b", 1, 8, 16, "zone", "az2")))},
				{Name: "c2", Weight: 1, Nodes: slices.Concat(nodes("c", 1, 8, 16, "zone", "az1"), nodes("d", 1, 8, 16, "zone", "az2"))}},
			req: Request{Shape: shape(1, 1), Policy: zoneSpread}, pol: ClusterPolicy{AllowSplit: true}, replicas: 3,
			want: []ClusterAssignment{{"c1", 1}, {"c2", 2}},
		},
		{
			name: "larger than every node: unsatisfiable at once", clusters: []Cluster{two("c1"), two("c2")},
			req: Request{Shape: shape(4, 64)}, replicas: 1,
			reason: "0/2 clusters fit 1 replicas: c1 fits 0 (0/2 nodes fit: 2 too small for memory (need 64 GiB; largest has 16 GiB)), " +
				"c2 fits 0 (0/2 nodes fit: 2 too small for memory (need 64 GiB; largest has 16 GiB))",
			class: Unsatisfiable,
		},
		{
			name: "fits a node's whole capacity but not its free: waits", clusters: []Cluster{{Name: "c1", Nodes: full(nodes("c1", 2, 8, 16))}, two("c2")},
			req: Request{Shape: shape(4, 12)}, pol: ClusterPolicy{Clusters: []string{"c1"}}, replicas: 1,
			reason: "0/2 clusters fit 1 replicas: c1 fits 0, c2 not in the policy's clusters",
			class:  NoCapacity,
		},
		{
			name: "a cluster without nodes may get some", clusters: []Cluster{{Name: "c1"}},
			req: Request{Shape: shape(1, 1)}, replicas: 1,
			reason: "0/1 clusters fit 1 replicas: c1 fits 0 (0/0 nodes fit: no nodes)",
			class:  NoCapacity,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PlaceClusters(tt.clusters, tt.req, tt.replicas, tt.pol)
			if !slices.Equal(res.Assignments, tt.want) {
				t.Errorf("assignments = %v, want %v (%v)", res.Assignments, tt.want, res.Reason)
			}
			for _, a := range res.Assignments {
				if len(res.Chosen[a.Cluster]) != a.Replicas {
					t.Errorf("chosen in %s = %v, want %d nodes", a.Cluster, res.Chosen[a.Cluster], a.Replicas)
				}
			}
			checkClusterReason(t, res.Reason, tt.reason, tt.class)
		})
	}
}

// checkClusterReason compares a cluster stage's reason with the one wanted
// ("" for none).
func checkClusterReason(t *testing.T, got *ClusterReason, want string, class Class) {
	t.Helper()
	switch {
	case want == "" && got != nil:
		t.Errorf("unexpected reason %q", got)
	case want != "" && (got == nil || got.String() != want):
		t.Errorf("reason\n got %v\nwant %s", got, want)
	case want != "" && got.Class != class:
		t.Errorf("class = %v, want %v", got.Class, class)
	}
}
