package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Cluster is one cluster as root's cluster stage sees it.
type Cluster struct {
	Name   string
	Region string
	Labels map[string]string
	// Weight orders clusters, higher first (the seeds' Cluster Weight).
	Weight int
	// Free is the free capacity of each of the cluster's schedulable
	// nodes (Ready, not cordoned or draining): what fits is computed node
	// by node, because free capacity summed over nodes holds replicas no
	// single node can.
	Free []Resources
}

// ClusterPolicy is the cluster stage's part of a schedule policy.
type ClusterPolicy struct {
	Region string
	// Clusters, when set, are the only clusters allowed (ClusterFilters).
	Clusters []string
	// Selectors must all match a cluster's labels (ClusterLabelFilters).
	Selectors []Selector
	// AllowSplit lets one replica set span clusters; by default it does
	// not, since clusters may share power or network zones.
	AllowSplit bool
	// Exclude are clusters that already turned this replica set down; the
	// caller bounds how many times it passes a set on.
	Exclude []string
}

// Fits counts the replicas of shape that still fit in a cluster, node by
// node.
func (c *Cluster) Fits(shape Resources) int {
	total := 0
	for _, f := range c.Free {
		n := -1
		for _, d := range [...]Resource{VCPU, Memory, Disk} {
			if need := shape.Get(d); need > 0 {
				k := int(max(f.Get(d), 0) / need)
				if n < 0 || k < n {
					n = k
				}
			}
		}
		total += max(n, 0)
	}
	return total
}

// ClusterAssignment gives replicas to a cluster.
type ClusterAssignment struct {
	Cluster  string
	Replicas int
}

// ClusterCode says why a cluster was not given replicas.
type ClusterCode int

// Cluster rejection codes; only ClusterCapacity and ClusterExcluded may
// change with time.
const (
	ClusterRegion ClusterCode = iota + 1
	ClusterName
	ClusterLabel
	ClusterExcluded
	ClusterCapacity
)

// ClusterRejection is one cluster that was not given (all of) the replicas.
type ClusterRejection struct {
	Cluster string
	Code    ClusterCode
	Key     string // the label selector's key, for ClusterLabel
	Region  string // the cluster's region, for ClusterRegion
	Fits    int    // for ClusterCapacity
}

func (r ClusterRejection) String() string {
	switch r.Code {
	case ClusterRegion:
		return fmt.Sprintf("%s in region %q", r.Cluster, r.Region)
	case ClusterName:
		return r.Cluster + " not in the policy's clusters"
	case ClusterLabel:
		return r.Cluster + " not matching label " + r.Key
	case ClusterExcluded:
		return r.Cluster + " turned them down"
	default:
		return fmt.Sprintf("%s fits %d", r.Cluster, r.Fits)
	}
}

// ClusterReason says why replicas were not given to any cluster.
type ClusterReason struct {
	Class      Class
	Replicas   int // how many were not placed
	Clusters   int // how many were considered
	Invalid    string
	Rejections []ClusterRejection // in cluster name order
}

// Error makes a ClusterReason usable as an error.
func (r *ClusterReason) Error() string { return r.String() }

// String renders the reason, for example "0/3 clusters fit 5 replicas: c1
// fits 2, c2 in region "osaka", c3 not matching label env".
func (r *ClusterReason) String() string {
	if r.Invalid != "" {
		return "invalid request: " + r.Invalid
	}
	if r.Clusters == 0 {
		return fmt.Sprintf("0/0 clusters fit %d replicas: no clusters", r.Replicas)
	}
	parts := make([]string, len(r.Rejections))
	for i, j := range r.Rejections {
		parts[i] = j.String()
	}
	return fmt.Sprintf("0/%d clusters fit %d replicas: %s", r.Clusters, r.Replicas, strings.Join(parts, ", "))
}

// ClusterResult is the outcome of the cluster stage.
type ClusterResult struct {
	// Assignments give the replicas to clusters, in rank order.
	Assignments []ClusterAssignment
	// Ranked are the clusters that passed the filters, best first, with
	// how many replicas fit in each.
	Ranked []ClusterAssignment
	// Unplaced replicas found no cluster; Reason says why.
	Unplaced int
	Reason   *ClusterReason
}

// PlaceClusters gives a replica set to clusters: filter by region, names and
// labels; rank by weight (higher first), then by how many replicas of the
// shape still fit (node by node), then by name; give the whole set to the
// first cluster that holds it, or, when the policy allows a split, fill the
// clusters in rank order.
func PlaceClusters(clusters []Cluster, shape Resources, replicas int, pol ClusterPolicy) ClusterResult {
	if err := validShape(Request{Shape: shape}); err != nil {
		return ClusterResult{Unplaced: replicas, Reason: &ClusterReason{Class: Unsatisfiable, Replicas: replicas, Clusters: len(clusters), Invalid: err.Error()}}
	}
	var res ClusterResult
	var rejected []ClusterRejection
	for i := range clusters {
		c := &clusters[i]
		if j, ok := filterCluster(c, pol); !ok {
			rejected = append(rejected, j)
			continue
		}
		res.Ranked = append(res.Ranked, ClusterAssignment{Cluster: c.Name, Replicas: c.Fits(shape)})
	}
	weight := make(map[string]int, len(clusters))
	for _, c := range clusters {
		weight[c.Name] = c.Weight
	}
	slices.SortFunc(res.Ranked, func(a, b ClusterAssignment) int {
		return cmp.Or(cmp.Compare(weight[b.Cluster], weight[a.Cluster]), cmp.Compare(b.Replicas, a.Replicas), strings.Compare(a.Cluster, b.Cluster))
	})

	left := replicas
	if pol.AllowSplit {
		for _, r := range res.Ranked {
			if left == 0 {
				break
			}
			if k := min(r.Replicas, left); k > 0 {
				res.Assignments = append(res.Assignments, ClusterAssignment{Cluster: r.Cluster, Replicas: k})
				left -= k
			}
		}
	} else if i := slices.IndexFunc(res.Ranked, func(r ClusterAssignment) bool { return r.Replicas >= replicas }); i >= 0 && replicas > 0 {
		res.Assignments = []ClusterAssignment{{Cluster: res.Ranked[i].Cluster, Replicas: replicas}}
		left = 0
	}
	if left == 0 {
		return res
	}
	res.Unplaced = left
	res.Reason = &ClusterReason{Class: Unsatisfiable, Replicas: left, Clusters: len(clusters)}
	for _, r := range res.Ranked {
		// A cluster that got a share under a split was full by then.
		fits := r.Replicas
		for _, a := range res.Assignments {
			if a.Cluster == r.Cluster {
				fits -= a.Replicas
			}
		}
		rejected = append(rejected, ClusterRejection{Cluster: r.Cluster, Code: ClusterCapacity, Fits: fits})
	}
	for _, j := range rejected {
		if j.Code == ClusterCapacity || j.Code == ClusterExcluded {
			res.Reason.Class = NoCapacity
		}
	}
	slices.SortFunc(rejected, func(a, b ClusterRejection) int { return strings.Compare(a.Cluster, b.Cluster) })
	res.Reason.Rejections = rejected
	return res
}

// filterCluster applies the policy's cluster filters, returning the first
// that refuses the cluster.
func filterCluster(c *Cluster, pol ClusterPolicy) (ClusterRejection, bool) {
	switch {
	case pol.Region != "" && c.Region != pol.Region:
		return ClusterRejection{Cluster: c.Name, Code: ClusterRegion, Region: c.Region}, false
	case len(pol.Clusters) > 0 && !slices.Contains(pol.Clusters, c.Name):
		return ClusterRejection{Cluster: c.Name, Code: ClusterName}, false
	}
	for _, s := range pol.Selectors {
		if !s.Matches(c.Labels) {
			return ClusterRejection{Cluster: c.Name, Code: ClusterLabel, Key: s.Key}, false
		}
	}
	if slices.Contains(pol.Exclude, c.Name) {
		return ClusterRejection{Cluster: c.Name, Code: ClusterExcluded}, false
	}
	return ClusterRejection{}, true
}
