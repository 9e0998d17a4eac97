package schedule

import (
	"slices"
	"testing"
)

// free is a node's free capacity with ample disk.
func free(vcpu, mem int64) Resources {
	return Resources{VCPUs: vcpu, MemoryBytes: mem * gib, DiskBytes: 100 * gib}
}

func TestClusterFits(t *testing.T) {
	// Summed free memory holds 4 replicas of 8 GiB, but no node holds one
	// whole and the other only one: per node, 1 fits.
	c := Cluster{Free: []Resources{free(8, 6), free(8, 6), free(8, 6), free(8, 14)}}
	if got := c.Fits(shape(2, 8)); got != 1 {
		t.Errorf("Fits = %d, want 1 (per node, not summed)", got)
	}
	c = Cluster{Free: []Resources{free(8, 16), {VCPUs: -1}, free(3, 64)}}
	if got := c.Fits(shape(2, 4)); got != 4+0+1 {
		t.Errorf("Fits = %d, want 5", got)
	}
}

func TestPlaceClusters(t *testing.T) {
	node := free(8, 16)
	cl := func(name, region string, weight, nodes int, labels ...string) Cluster {
		c := Cluster{Name: name, Region: region, Weight: weight, Labels: map[string]string{}}
		for i := 0; i+1 < len(labels); i += 2 {
			c.Labels[labels[i]] = labels[i+1]
		}
		for range nodes {
			c.Free = append(c.Free, node)
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
			res := PlaceClusters(clusters, shape(2, 4), tt.replicas, tt.pol)
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
			switch {
			case tt.reason == "" && res.Reason != nil:
				t.Errorf("unexpected reason %q", res.Reason)
			case tt.reason != "" && (res.Reason == nil || res.Reason.String() != tt.reason):
				t.Errorf("reason\n got %v\nwant %s", res.Reason, tt.reason)
			case tt.reason != "" && res.Reason.Class != tt.class:
				t.Errorf("class = %v, want %v", res.Reason.Class, tt.class)
			}
		})
	}
}

func TestPlaceClustersZeroShape(t *testing.T) {
	res := PlaceClusters([]Cluster{{Name: "c", Free: []Resources{shape(1, 1)}}}, Resources{}, 1, ClusterPolicy{})
	if res.Reason == nil || res.Reason.Class != Unsatisfiable || res.Unplaced != 1 {
		t.Fatalf("zero-size shape: %+v", res)
	}
}
