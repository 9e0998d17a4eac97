package schedule

import "slices"

// cycle is the working state of one Place or Check call: the nodes, the
// policy with its defaults, and the service's replica count per domain of
// every label key a rule mentions. Domains are interned to small integers
// once per call so that the per-replica scan over thousands of nodes is
// slice arithmetic rather than map lookups.
type cycle struct {
	nodes    []Node
	shape    Resources
	pol      Policy
	provider string

	nameSet map[string]bool // Policy.Nodes as a set

	keys     []string       // every key a rule mentions, each once
	keyIdx   map[string]int // key → index into keys
	dom      [][]int32      // dom[k][i]: node i's domain id for key k, -1 if it lacks the key
	domName  [][]string     // domName[k][id]: the domain's value
	count    [][]int        // count[k][id]: replicas of the service in the domain
	present  [][]bool       // present[k][id]: the domain has an eligible node (spread)
	eligible []bool         // node passes names, labels, state and schedulable

	added map[int]Resources // reserved during this call, by node index

	// Key indices of each rule, parallel to the policy's slices.
	aff, anti, softAff, softAnti, spread []int
	spreadMin                            []int // per spread, for the replica being placed

	filters []filter
}

// newCycle prepares one request over a snapshot. Existing placements
// without labels are found among the snapshot's nodes by name; labelled ones
// are counted by their labels.
func newCycle(snap *Snapshot, req *Request) *cycle {
	nodes := snap.nodes
	c := &cycle{nodes: nodes, shape: req.Shape, pol: req.Policy.withDefaults(), provider: req.Provider, keyIdx: map[string]int{}}
	if len(c.pol.Nodes) > 0 {
		c.nameSet = make(map[string]bool, len(c.pol.Nodes))
		for _, n := range c.pol.Nodes {
			c.nameSet[n] = true
		}
	}
	key := func(k string) int {
		if i, ok := c.keyIdx[k]; ok {
			return i
		}
		c.keyIdx[k] = len(c.keys)
		c.keys = append(c.keys, k)
		return len(c.keys) - 1
	}
	for _, t := range c.pol.Affinity {
		c.aff = append(c.aff, key(t.Key))
	}
	for _, t := range c.pol.AntiAffinity {
		c.anti = append(c.anti, key(t.Key))
	}
	for _, t := range c.pol.SoftAffinity {
		c.softAff = append(c.softAff, key(t.Key))
	}
	for _, t := range c.pol.SoftAntiAffinity {
		c.softAnti = append(c.softAnti, key(t.Key))
	}
	for _, s := range c.pol.Spread {
		c.spread = append(c.spread, key(s.Key))
	}
	c.spreadMin = make([]int, len(c.spread))

	nk := len(c.keys)
	idx := make([]*keyIndex, nk)
	for k, name := range c.keys {
		ki := snap.key(name)
		if name != LabelHostname {
			// Labelled placements may name domains no node has.
			for _, p := range req.Existing {
				if v, ok := p.Labels[name]; ok {
					ki.intern(v)
				}
			}
		}
		idx[k] = ki
	}
	c.dom = make([][]int32, nk)
	c.domName = make([][]string, nk)
	c.count = make([][]int, nk)
	c.present = make([][]bool, nk)
	for k, ki := range idx {
		c.dom[k], c.domName[k] = ki.dom, ki.names
		c.count[k] = make([]int, len(ki.names))
		c.present[k] = make([]bool, len(ki.names))
	}
	for _, p := range req.Existing {
		i, listed := snap.byName[p.Node]
		for k, name := range c.keys {
			switch {
			case name == LabelHostname:
				if listed {
					c.count[k][i]++
				}
			case p.Labels != nil:
				if v, ok := p.Labels[name]; ok {
					c.count[k][idx[k].ids[v]]++
				}
			case listed:
				if id := c.dom[k][i]; id >= 0 {
					c.count[k][id]++
				}
			}
		}
	}
	c.eligible = make([]bool, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if n.State != Ready || n.Cordoned || n.Draining || !c.static(n) {
			continue
		}
		c.eligible[i] = true
		for k := range c.keys {
			if id := c.dom[k][i]; id >= 0 {
				c.present[k][id] = true
			}
		}
	}
	c.filters = c.buildFilters()
	return c
}

// static says whether a node passes the policy's name and label filters.
func (c *cycle) static(n *Node) bool {
	return (c.nameSet == nil || c.nameSet[n.Name]) && matchesAll(c.pol.Selectors, n.Labels)
}

// free is node i's capacity left, counting what this call reserved.
func (c *cycle) free(i int) Resources {
	f := c.nodes[i].Free()
	if len(c.added) > 0 {
		f = f.Sub(c.added[i])
	}
	return f
}

// prepare computes what the filters and scores need for the next replica.
func (c *cycle) prepare() {
	for s, k := range c.spread {
		m := -1
		for id, ok := range c.present[k] {
			if ok && (m < 0 || c.count[k][id] < m) {
				m = c.count[k][id]
			}
		}
		c.spreadMin[s] = max(m, 0)
	}
}

// commit counts a replica placed on node i before the next one is placed.
func (c *cycle) commit(i int) {
	if c.added == nil {
		c.added = map[int]Resources{}
	}
	c.added[i] = c.added[i].Add(c.shape)
	for k := range c.keys {
		if id := c.dom[k][i]; id >= 0 {
			c.count[k][id]++
		}
	}
}

// affinityDomains are the domains a hard affinity term allows: its Values,
// or else the domains already holding replicas (none: any domain).
func (c *cycle) affinityDomains(t int) []string {
	term := c.pol.Affinity[t]
	if len(term.Values) > 0 {
		return term.Values
	}
	k := c.aff[t]
	var out []string
	for id, n := range c.count[k] {
		if n > 0 {
			out = append(out, c.domName[k][id])
		}
	}
	slices.Sort(out)
	return out
}
