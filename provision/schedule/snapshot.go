package schedule

// Snapshot indexes a set of nodes for many Place calls: the nodes by name
// and, built the first time a rule mentions a label key, each node's domain
// for that key. A cluster's scheduler keeps one per scheduling pass, as the
// Kubernetes scheduler keeps its cache snapshot, so that a placement costs
// one scan over the nodes rather than a re-index of their labels.
//
// The snapshot reads each node's capacity, reservations, state and
// schedulability live from the slice it was given, so the caller may update
// those in place between calls (to count what it committed); it must make a
// new Snapshot when nodes are added or removed or their labels change. A
// Snapshot is not safe for concurrent use.
type Snapshot struct {
	nodes  []Node
	byName map[string]int
	keys   map[string]*keyIndex
}

// keyIndex interns one label key's values: dom[i] is node i's domain id (-1
// when it lacks the key), names[id] the value. Domains known only from
// labelled placements get ids past the nodes' own.
type keyIndex struct {
	dom   []int32
	names []string
	ids   map[string]int32
}

// NewSnapshot indexes nodes; the slice is kept, not copied.
func NewSnapshot(nodes []Node) *Snapshot {
	s := &Snapshot{nodes: nodes, byName: make(map[string]int, len(nodes)), keys: map[string]*keyIndex{}}
	for i := range nodes {
		s.byName[nodes[i].Name] = i
	}
	return s
}

// Nodes returns the snapshot's nodes.
func (s *Snapshot) Nodes() []Node { return s.nodes }

// key returns the index of one label key, building it on first use.
func (s *Snapshot) key(key string) *keyIndex {
	if ki, ok := s.keys[key]; ok {
		return ki
	}
	ki := &keyIndex{dom: make([]int32, len(s.nodes))}
	if key == LabelHostname {
		// Every node is its own domain; ids are node indices.
		ki.names = make([]string, len(s.nodes))
		for i := range s.nodes {
			ki.dom[i] = int32(i)
			ki.names[i] = s.nodes[i].Name
		}
		ki.ids = s.hostIDs()
	} else {
		ki.ids = map[string]int32{}
		for i := range s.nodes {
			v, ok := s.nodes[i].Labels[key]
			if !ok {
				ki.dom[i] = -1
				continue
			}
			ki.dom[i] = ki.intern(v)
		}
	}
	s.keys[key] = ki
	return ki
}

func (s *Snapshot) hostIDs() map[string]int32 {
	ids := make(map[string]int32, len(s.byName))
	for n, i := range s.byName {
		ids[n] = int32(i)
	}
	return ids
}

// intern returns a value's domain id, adding it if new.
func (ki *keyIndex) intern(v string) int32 {
	id, ok := ki.ids[v]
	if !ok {
		id = int32(len(ki.names))
		ki.ids[v] = id
		ki.names = append(ki.names, v)
	}
	return id
}
