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
	// Nodes are the cluster's nodes as its node stage sees them (root
	// lists them). The cluster stage runs the node stage's rules over them
	// without reserving anything, so that it gives a cluster only replicas
	// its nodes can take: node by node (free capacity summed over nodes
	// holds replicas no single node can), under the hard rules
	// (anti-affinity's max_per_domain, a do_not_schedule spread, names,
	// labels, the provider), and with each node's whole capacity, so that a
	// shape larger than every node is Unsatisfiable rather than waiting.
	Nodes []Node
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
	// Placed are, per cluster, the set's replicas already on one of its
	// nodes: the hard rules count them. Pending counts, per cluster, the
	// replicas given to it that are not on a node yet: they are placed
	// first in the cluster's simulation, since they will take their room.
	Placed  map[string][]Placement
	Pending map[string]int
}

// Fits counts the replicas of shape that still fit in a cluster's
// schedulable nodes (Ready, not cordoned or draining), node by node and
// by capacity alone: it ranks the clusters.
func (c *Cluster) Fits(shape Resources) int {
	total := 0
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.State != Ready || n.Cordoned || n.Draining {
			continue
		}
		total += fitCount(shape, n.Free())
	}
	return total
}

// fitCount is how many replicas of shape fit in free.
func fitCount(shape, f Resources) int {
	n := -1
	for _, d := range [...]Resource{VCPU, Memory, Disk} {
		if need := shape.Get(d); need > 0 {
			k := int(max(f.Get(d), 0) / need)
			if n < 0 || k < n {
				n = k
			}
		}
	}
	return max(n, 0)
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
	// Fits, for ClusterCapacity, is how many more of the set the cluster's
	// nodes take; Nodes says why not one more (its Class is the
	// rejection's: waiting helps or not).
	Fits  int
	Nodes *Reason
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
		// "fits N" says all there is when only free capacity is short.
		if r.Nodes == nil || len(r.Nodes.Rejections) > 0 && !slices.ContainsFunc(r.Nodes.Rejections, func(j Rejection) bool { return j.Code != CodeInsufficient }) {
			return fmt.Sprintf("%s fits %d", r.Cluster, r.Fits)
		}
		return fmt.Sprintf("%s fits %d (%s)", r.Cluster, r.Fits, r.Nodes)
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
	// Chosen are, per assigned cluster, the nodes its simulated node stage
	// chose for the assigned replicas, so that a caller placing several
	// sets in one pass can count them taken before the next set.
	Chosen map[string][]Choice
	// Ranked are the clusters that passed the filters, best first, with
	// how many replicas fit in each by capacity.
	Ranked []ClusterAssignment
	// Unplaced replicas found no cluster; Reason says why.
	Unplaced int
	Reason   *ClusterReason
}

// PlaceClusters gives a replica set to clusters: filter by region, names and
// labels; rank by weight (higher first), then by how many replicas of the
// shape still fit (node by node), then by name; give the whole set to the
// first cluster whose nodes take it under the request's node policy (the
// node stage simulated: hard anti-affinity and spread, names, labels,
// provider, fit), or, when the policy allows a split, fill the clusters in
// rank order with what each takes. A cluster no node of which is large
// enough, or whose hard rules leave no room, refuses the set for good
// (Unsatisfiable); one short of free capacity refuses it for now
// (NoCapacity).
func PlaceClusters(clusters []Cluster, req Request, replicas int, pol ClusterPolicy) ClusterResult {
	if err := validShape(req); err != nil {
		return ClusterResult{Unplaced: replicas, Reason: &ClusterReason{Class: Unsatisfiable, Replicas: replicas, Clusters: len(clusters), Invalid: err.Error()}}
	}
	var res ClusterResult
	var rejected []ClusterRejection
	byName := make(map[string]*Cluster, len(clusters))
	for i := range clusters {
		c := &clusters[i]
		byName[c.Name] = c
		if j, ok := filterCluster(c, pol); !ok {
			rejected = append(rejected, j)
			continue
		}
		res.Ranked = append(res.Ranked, ClusterAssignment{Cluster: c.Name, Replicas: c.Fits(req.Shape)})
	}
	slices.SortFunc(res.Ranked, func(a, b ClusterAssignment) int {
		return cmp.Or(cmp.Compare(byName[b.Cluster].Weight, byName[a.Cluster].Weight), cmp.Compare(b.Replicas, a.Replicas), strings.Compare(a.Cluster, b.Cluster))
	})

	// try simulates the node stage placing k more of the set in a
	// cluster, after the replicas already given to it.
	tried := map[string]ClusterRejection{}
	try := func(name string, k int) []Choice {
		c := byName[name]
		r := req
		r.Existing = pol.Placed[name]
		pending := pol.Pending[name]
		got := NewSnapshot(c.Nodes).Place(r, pending+k)
		chosen := got.Placed[min(pending, len(got.Placed)):]
		if len(chosen) < k {
			tried[name] = ClusterRejection{Cluster: name, Code: ClusterCapacity, Fits: len(chosen), Nodes: got.Reason}
		}
		return chosen
	}
	give := func(name string, chosen []Choice) {
		res.Assignments = append(res.Assignments, ClusterAssignment{Cluster: name, Replicas: len(chosen)})
		if res.Chosen == nil {
			res.Chosen = map[string][]Choice{}
		}
		res.Chosen[name] = chosen
	}
	left := replicas
	for _, r := range res.Ranked {
		if left == 0 {
			break
		}
		chosen := try(r.Cluster, left)
		switch {
		case pol.AllowSplit && len(chosen) > 0:
			give(r.Cluster, chosen)
			left -= len(chosen)
		case len(chosen) == left:
			give(r.Cluster, chosen)
			left = 0
		}
	}
	if left == 0 {
		return res
	}
	res.Unplaced = left
	res.Reason = &ClusterReason{Class: Unsatisfiable, Replicas: left, Clusters: len(clusters)}
	for _, r := range res.Ranked {
		// Every ranked cluster was tried, since replicas are left.
		j := tried[r.Cluster]
		if pol.AllowSplit {
			j.Fits = 0 // it took what it could
		}
		rejected = append(rejected, j)
	}
	for _, j := range rejected {
		if j.Code == ClusterExcluded || j.Code == ClusterCapacity && (j.Nodes == nil || j.Nodes.Class == NoCapacity) {
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
