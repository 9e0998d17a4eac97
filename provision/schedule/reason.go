package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/unyo-ops/unyo/core/printer/cell"
	"github.com/unyo-ops/unyo/provision/topology"
)

// Class says whether waiting can help a replica that was not placed.
type Class int

const (
	// NoCapacity: some node could take the replica if capacity appeared
	// (a node joins or comes back, is uncordoned, a service shrinks).
	// The replica is Blocked and retried when capacity changes.
	NoCapacity Class = iota
	// Unsatisfiable: every node is refused by a rule no capacity changes
	// (a missing label, a name or label filter, more replicas than the
	// domains allow, a node too small, a zero-size request). It fails at
	// once.
	Unsatisfiable
)

func (c Class) String() string {
	if c == Unsatisfiable {
		return "Unsatisfiable"
	}
	return "NoCapacity"
}

// Reason says why a replica was not placed: how many nodes each rule
// refused, and for capacity the best candidate's shortfall.
type Reason struct {
	Class Class
	// Nodes is how many nodes were considered.
	Nodes int
	// Invalid is set when the request itself is wrong; then there are no
	// Rejections.
	Invalid string
	// Rejections count the nodes by the first rule that refused them,
	// most nodes first.
	Rejections []Rejection
}

// Rejection is one rule and the nodes it refused.
type Rejection struct {
	Code  Code
	Nodes int
	// Key is the label key of label, missing-label, affinity,
	// anti-affinity and spread rejections.
	Key string
	// Resource, Need and Best describe too-small and insufficient
	// rejections: what the replica needs and the most the best refused
	// node has (whole capacity for too-small, free for insufficient).
	Resource Resource
	Need     int64
	Best     int64
	// Domains are the blocking domains (anti-affinity, spread) or the
	// domains the replicas are bound to (affinity), sorted.
	Domains []string
	// MaxSkew is the spread's limit.
	MaxSkew int
}

// Error makes a Reason usable as an error (Check returns one).
func (r *Reason) Error() string { return r.String() }

// String renders the reason for operators, for example "0/40 nodes fit: 31
// insufficient memory (need 16 GiB; best node has 12 GiB free), 6 cordoned,
// 3 anti-affinity on rack (blocking domain rack-1-2)".
func (r *Reason) String() string {
	if r.Invalid != "" {
		return "invalid request: " + r.Invalid
	}
	if r.Nodes == 0 {
		return "0/0 nodes fit: no nodes"
	}
	parts := make([]string, len(r.Rejections))
	for i, j := range r.Rejections {
		parts[i] = j.String()
	}
	return fmt.Sprintf("0/%d nodes fit: %s", r.Nodes, strings.Join(parts, ", "))
}

func (j Rejection) String() string {
	n := strconv.Itoa(j.Nodes) + " "
	key := strings.TrimPrefix(j.Key, topology.Prefix)
	switch j.Code {
	case CodeNodeName:
		return n + "not in the policy's nodes"
	case CodeLabel:
		return n + "not matching label " + j.Key
	case CodeMissingLabel:
		return n + "missing label " + j.Key
	case CodeTooSmall:
		return fmt.Sprintf("%stoo small for %s (need %s; largest has %s)", n, j.Resource,
			quantity(j.Resource, j.Need), quantity(j.Resource, j.Best))
	case CodeAffinity:
		if len(j.Domains) == 0 {
			return n + "affinity on " + key
		}
		return fmt.Sprintf("%saffinity on %s (bound to %s)", n, key, cell.FirstFew(j.Domains, 3))
	case CodeAntiAffinity:
		return fmt.Sprintf("%santi-affinity on %s (blocking %s)", n, key, domainList(j.Domains))
	case CodeDown:
		return n + "down"
	case CodeStale:
		return n + "stale"
	case CodeCordoned:
		return n + "cordoned"
	case CodeDraining:
		return n + "draining"
	case CodeNoProvider:
		return n + "without a healthy provider"
	case CodeSpread:
		return fmt.Sprintf("%sspread on %s (max skew %d; blocking %s)", n, key, j.MaxSkew, domainList(j.Domains))
	default:
		return fmt.Sprintf("%sinsufficient %s (need %s; best node has %s free)", n, j.Resource,
			quantity(j.Resource, j.Need), quantity(j.Resource, j.Best))
	}
}

// domainList renders blocking domains: "domain rack-1-2", "domains a, b, c
// and 4 more".
func domainList(ds []string) string {
	if len(ds) == 1 {
		return "domain " + ds[0]
	}
	return "domains " + cell.FirstFew(ds, 3)
}

// quantity renders an amount of one resource: vCPUs as a count, memory and
// disk in GiB (MiB below one GiB).
func quantity(r Resource, v int64) string {
	if r == VCPU {
		if v == 1 {
			return "1 vCPU"
		}
		return fmt.Sprintf("%d vCPUs", v)
	}
	const mib, gib = 1 << 20, 1 << 30
	if v != 0 && v < gib {
		return strconv.FormatFloat(float64(v)/mib, 'f', -1, 64) + " MiB"
	}
	return strconv.FormatFloat(float64(v)/gib, 'f', -1, 64) + " GiB"
}

// diagnose explains why no node took the replica being placed: each node's
// first rejection, counted per rule, with the details an operator needs.
func (c *cycle) diagnose() *Reason {
	type group struct {
		code Code
		key  string
		res  Resource
	}
	byGroup := map[group]*Rejection{}
	doms := map[group]map[string]bool{}
	r := &Reason{Class: Unsatisfiable, Nodes: len(c.nodes)}
	if len(c.nodes) == 0 {
		r.Class = NoCapacity // a node may join
	}
	for i := range c.nodes {
		rej := c.check(i)
		if rej.code == pass {
			continue
		}
		if !rej.code.Static() {
			r.Class = NoCapacity
		}
		var key string
		switch rej.code {
		case CodeLabel:
			key = c.pol.Selectors[rej.k].Key
		case CodeMissingLabel, CodeAffinity, CodeAntiAffinity, CodeSpread:
			key = c.keys[rej.k]
		}
		g := group{rej.code, key, rej.res}
		j := byGroup[g]
		if j == nil {
			j = &Rejection{Code: rej.code, Key: key, Resource: rej.res, Need: c.shape.Get(rej.res), Best: -1}
			byGroup[g] = j
			doms[g] = map[string]bool{}
		}
		j.Nodes++
		switch rej.code {
		case CodeInsufficient:
			j.Best = max(j.Best, c.free(i).Get(rej.res))
		case CodeTooSmall:
			j.Best = max(j.Best, c.nodes[i].Capacity.Get(rej.res))
		case CodeAntiAffinity, CodeSpread:
			doms[g][c.domName[rej.k][rej.dom]] = true
		}
	}
	for g, j := range byGroup {
		switch g.code {
		case CodeInsufficient, CodeTooSmall:
		default:
			j.Need, j.Best = 0, 0
		}
		switch g.code {
		case CodeAntiAffinity, CodeSpread:
			for d := range doms[g] {
				j.Domains = append(j.Domains, d)
			}
			slices.Sort(j.Domains)
		case CodeAffinity:
			if t := slices.IndexFunc(c.pol.Affinity, func(t Term) bool { return t.Key == g.key }); t >= 0 {
				j.Domains = slices.Sorted(slices.Values(c.affinityDomains(t)))
			}
		}
		if g.code == CodeSpread {
			if s := slices.IndexFunc(c.pol.Spread, func(s Spread) bool { return s.Key == g.key && s.hard() }); s >= 0 {
				j.MaxSkew = c.pol.Spread[s].maxSkew()
			}
		}
		r.Rejections = append(r.Rejections, *j)
	}
	slices.SortFunc(r.Rejections, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Key, b.Key), cmp.Compare(a.Resource, b.Resource))
	})
	return r
}
