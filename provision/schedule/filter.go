package schedule

import "slices"

// Code says why a node was rejected.
type Code uint8

// The rejection codes, in the order the filters run. The static ones come
// first: a node they reject could not take the replica whatever capacity
// appears, so a replica rejected by them everywhere is Unsatisfiable.
const (
	pass Code = iota
	CodeNodeName
	CodeLabel
	CodeMissingLabel
	CodeTooSmall
	CodeAffinity
	CodeAntiAffinity
	// Transient from here on: the answer changes when nodes come back,
	// are uncordoned, or release capacity.
	CodeDown
	CodeStale
	CodeCordoned
	CodeDraining
	// The node does not offer the replica's provider, or its provider's
	// fingerprint says it is unhealthy (dockerd down).
	CodeNoProvider
	CodeSpread
	CodeInsufficient
)

// String is the code's stable name, for events and metrics labels.
func (c Code) String() string {
	switch c {
	case pass:
		return "pass"
	case CodeNodeName:
		return "node_name"
	case CodeLabel:
		return "label"
	case CodeMissingLabel:
		return "missing_label"
	case CodeTooSmall:
		return "too_small"
	case CodeAffinity:
		return "affinity"
	case CodeAntiAffinity:
		return "anti_affinity"
	case CodeDown:
		return "down"
	case CodeStale:
		return "stale"
	case CodeCordoned:
		return "cordoned"
	case CodeDraining:
		return "draining"
	case CodeNoProvider:
		return "no_provider"
	case CodeSpread:
		return "spread"
	default:
		return "insufficient"
	}
}

// Static says whether the rejection holds whatever capacity appears.
func (c Code) Static() bool { return c < CodeDown }

// rejection is one node's first failure, kept small because the scan
// returns one per node and filter; diagnose turns it into words.
type rejection struct {
	code Code
	res  Resource // of too-small and insufficient
	k    int32    // index into cycle.keys, or into Policy.Selectors for CodeLabel
	dom  int32    // the node's domain id for key k (anti-affinity, spread)
}

var ok = rejection{}

// filter rejects a node that cannot take the next replica.
type filter interface {
	check(c *cycle, i int) rejection
}

// buildFilters returns the filters the policy needs, static ones first.
func (c *cycle) buildFilters() []filter {
	var fs []filter
	if c.nameSet != nil {
		fs = append(fs, nameFilter{})
	}
	if len(c.pol.Selectors) > 0 {
		fs = append(fs, labelFilter{})
	}
	var hardKeys []int
	for _, k := range slices.Concat(c.aff, c.anti) {
		hardKeys = append(hardKeys, k)
	}
	for s, sp := range c.pol.Spread {
		if sp.hard() {
			hardKeys = append(hardKeys, c.spread[s])
		}
	}
	slices.Sort(hardKeys)
	if hardKeys = slices.Compact(hardKeys); len(hardKeys) > 0 {
		fs = append(fs, requiredKeysFilter{keys: hardKeys})
	}
	fs = append(fs, sizeFilter{})
	if len(c.aff) > 0 {
		fs = append(fs, newAffinityFilter(c))
	}
	if len(c.anti) > 0 {
		f := antiAffinityFilter{max: make([]int, len(c.anti))}
		for t, term := range c.pol.AntiAffinity {
			f.max[t] = term.maxPerDomain()
		}
		fs = append(fs, f)
	}
	fs = append(fs, stateFilter{}, schedulableFilter{})
	if c.provider != "" {
		fs = append(fs, providerFilter{})
	}
	for s, sp := range c.pol.Spread {
		if sp.hard() {
			fs = append(fs, spreadFilter{s: s, maxSkew: sp.maxSkew()})
		}
	}
	return append(fs, fitFilter{})
}

// check runs the filters in order and returns the first rejection.
func (c *cycle) check(i int) rejection {
	for _, f := range c.filters {
		if r := f.check(c, i); r.code != pass {
			return r
		}
	}
	return ok
}

// nameFilter keeps the nodes the policy names.
type nameFilter struct{}

func (nameFilter) check(c *cycle, i int) rejection {
	if !c.nameSet[c.nodes[i].Name] {
		return rejection{code: CodeNodeName}
	}
	return ok
}

// labelFilter keeps the nodes matching every selector.
type labelFilter struct{}

func (labelFilter) check(c *cycle, i int) rejection {
	for j, s := range c.pol.Selectors {
		if !s.Matches(c.nodes[i].Labels) {
			return rejection{code: CodeLabel, k: int32(j)}
		}
	}
	return ok
}

// requiredKeysFilter rejects a node lacking the key of a hard rule: it
// belongs to no domain, so the rule cannot be checked and is not trusted.
type requiredKeysFilter struct{ keys []int }

func (f requiredKeysFilter) check(c *cycle, i int) rejection {
	for _, k := range f.keys {
		if c.dom[k][i] < 0 {
			return rejection{code: CodeMissingLabel, k: int32(k)}
		}
	}
	return ok
}

// sizeFilter rejects a node whose whole capacity is smaller than the shape:
// no release of reservations would make it fit.
type sizeFilter struct{}

func (sizeFilter) check(c *cycle, i int) rejection {
	if r, short := shortOf(c.shape, c.nodes[i].Capacity); short {
		return rejection{code: CodeTooSmall, res: r}
	}
	return ok
}

// affinityFilter keeps the replicas of a service in one domain of each hard
// affinity key (or in the term's Values). The first replica may go to any
// domain; the rest follow it.
type affinityFilter struct {
	allowed [][]bool // per term: domain ids its Values allow (nil: no Values)
}

func newAffinityFilter(c *cycle) affinityFilter {
	f := affinityFilter{allowed: make([][]bool, len(c.aff))}
	for t, term := range c.pol.Affinity {
		if len(term.Values) == 0 {
			continue
		}
		k := c.aff[t]
		f.allowed[t] = make([]bool, len(c.domName[k]))
		for id, v := range c.domName[k] {
			f.allowed[t][id] = slices.Contains(term.Values, v)
		}
	}
	return f
}

func (f affinityFilter) check(c *cycle, i int) rejection {
	for t, k := range c.aff {
		id := c.dom[k][i]
		if f.allowed[t] != nil {
			if !f.allowed[t][id] {
				return rejection{code: CodeAffinity, k: int32(k)}
			}
			continue
		}
		if c.count[k][id] == 0 && anyPlaced(c.count[k]) {
			return rejection{code: CodeAffinity, k: int32(k)}
		}
	}
	return ok
}

// anyPlaced says whether any domain holds a replica. Domains per key are
// few (hostname aside), so scanning beats keeping a total.
func anyPlaced(counts []int) bool {
	for _, n := range counts {
		if n > 0 {
			return true
		}
	}
	return false
}

// antiAffinityFilter allows at most MaxPerDomain replicas of the service in
// a domain.
type antiAffinityFilter struct {
	max []int // per term, its MaxPerDomain
}

func (f antiAffinityFilter) check(c *cycle, i int) rejection {
	for t, k := range c.anti {
		id := c.dom[k][i]
		if c.count[k][id] >= f.max[t] {
			return rejection{code: CodeAntiAffinity, k: int32(k), dom: id}
		}
	}
	return ok
}

// stateFilter keeps Ready nodes.
type stateFilter struct{}

func (stateFilter) check(c *cycle, i int) rejection {
	switch c.nodes[i].State {
	case Ready:
		return ok
	case Stale:
		return rejection{code: CodeStale}
	default:
		return rejection{code: CodeDown}
	}
}

// schedulableFilter rejects cordoned and draining nodes.
type schedulableFilter struct{}

func (schedulableFilter) check(c *cycle, i int) rejection {
	switch n := &c.nodes[i]; {
	case n.Cordoned:
		return rejection{code: CodeCordoned}
	case n.Draining:
		return rejection{code: CodeDraining}
	}
	return ok
}

// providerFilter keeps the nodes whose agent offers the replica's provider
// healthy. A node that reported no providers at all (Providers nil) is not
// filtered: its agent predates provider fingerprints.
type providerFilter struct{}

func (providerFilter) check(c *cycle, i int) rejection {
	if ps := c.nodes[i].Providers; ps != nil && !ps[c.provider] {
		return rejection{code: CodeNoProvider}
	}
	return ok
}

// spreadFilter enforces a do_not_schedule spread: after placement, the
// node's domain may exceed the least loaded domain by at most MaxSkew.
type spreadFilter struct{ s, maxSkew int }

func (f spreadFilter) check(c *cycle, i int) rejection {
	k := c.spread[f.s]
	id := c.dom[k][i]
	if c.count[k][id]+1-c.spreadMin[f.s] > f.maxSkew {
		return rejection{code: CodeSpread, k: int32(k), dom: id}
	}
	return ok
}

// fitFilter is the no-overcommit rule: vCPUs, memory and disk each fit in
// capacity minus every reservation.
type fitFilter struct{}

func (fitFilter) check(c *cycle, i int) rejection {
	if r, short := shortOf(c.shape, c.free(i)); short {
		return rejection{code: CodeInsufficient, res: r}
	}
	return ok
}

// shortOf returns the first dimension in which need exceeds have.
func shortOf(need, have Resources) (Resource, bool) {
	switch {
	case need.VCPUs > have.VCPUs:
		return VCPU, true
	case need.MemoryBytes > have.MemoryBytes:
		return Memory, true
	case need.DiskBytes > have.DiskBytes:
		return Disk, true
	}
	return 0, false
}
