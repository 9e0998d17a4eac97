package schedule

import "slices"

// Score weights. Each score is in [0, 1] and is multiplied by its weight: a
// soft term by its own Weight (default 1), each spread by SpreadWeight, the
// strategy by StrategyWeight. Spread outweighs the strategy so that the
// default zone spread wins over bin-packing, which then only chooses among
// the nodes of the best zones.
const (
	SpreadWeight   = 10
	StrategyWeight = 1
)

// scorer adds one term to a feasible node's score.
type scorer interface {
	score(c *cycle, i int) float64
}

func (c *cycle) scorers() []scorer {
	var ss []scorer
	for t := range c.softAff {
		ss = append(ss, softAffinityScore{t: t})
	}
	for t, term := range c.pol.SoftAntiAffinity {
		ss = append(ss, softAntiAffinityScore{k: c.softAnti[t], max: term.maxPerDomain(), weight: term.weight()})
	}
	for s := range c.spread {
		ss = append(ss, spreadScore{s: s})
	}
	return append(ss, strategyScore{spread: c.pol.Strategy == SpreadNodes})
}

func (c *cycle) score(ss []scorer, i int) float64 {
	var total float64
	for _, s := range ss {
		total += s.score(c, i)
	}
	return total
}

// softAffinityScore prefers the domains already holding replicas (or the
// term's Values). A node lacking the key scores nothing.
type softAffinityScore struct{ t int }

func (s softAffinityScore) score(c *cycle, i int) float64 {
	term, k := c.pol.SoftAffinity[s.t], c.softAff[s.t]
	id := c.dom[k][i]
	if id < 0 {
		return 0
	}
	var match bool
	if len(term.Values) > 0 {
		match = slices.Contains(term.Values, c.domName[k][id])
	} else {
		match = c.count[k][id] > 0 || !anyPlaced(c.count[k])
	}
	if match {
		return term.weight()
	}
	return 0
}

// softAntiAffinityScore prefers domains holding fewer than MaxPerDomain
// replicas, less the more they exceed it. A node lacking the key scores
// nothing: an unknown domain is no evidence of separation.
type softAntiAffinityScore struct {
	k      int // key index
	max    int
	weight float64
}

func (s softAntiAffinityScore) score(c *cycle, i int) float64 {
	id := c.dom[s.k][i]
	if id < 0 {
		return 0
	}
	over := c.count[s.k][id] - (s.max - 1)
	if over <= 0 {
		return s.weight
	}
	return s.weight / float64(1+over)
}

// spreadScore prefers the least loaded domains of a spread's key.
type spreadScore struct{ s int }

func (s spreadScore) score(c *cycle, i int) float64 {
	k := c.spread[s.s]
	id := c.dom[k][i]
	if id < 0 {
		return 0
	}
	return SpreadWeight / float64(1+max(c.count[k][id]-c.spreadMin[s.s], 0))
}

// strategyScore is bin-packing (the fullest node after placement wins) or,
// for the spread strategy, its opposite.
type strategyScore struct{ spread bool }

func (s strategyScore) score(c *cycle, i int) float64 {
	capa := &c.nodes[i].Capacity
	after := capa.Sub(c.free(i)).Add(c.shape)
	var used float64
	var dims int
	if capa.VCPUs > 0 {
		used += float64(after.VCPUs) / float64(capa.VCPUs)
		dims++
	}
	if capa.MemoryBytes > 0 {
		used += float64(after.MemoryBytes) / float64(capa.MemoryBytes)
		dims++
	}
	if capa.DiskBytes > 0 {
		used += float64(after.DiskBytes) / float64(capa.DiskBytes)
		dims++
	}
	if dims > 0 {
		used /= float64(dims)
	}
	if s.spread {
		used = 1 - used
	}
	return StrategyWeight * used
}
