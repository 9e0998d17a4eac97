package pipeline

import (
	"slices"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/maintenance"
)

// NodeCheck names a node's check: occurrences and reissue windows are kept
// per node/check.
type NodeCheck struct{ Node, Check string }

// GroupID names an open aggregate group: its rule and its GroupKey.
type GroupID struct{ Rule, Key string }

// IDOf is the GroupID of a stored group.
func IDOf(g *unyov1.AggregateGroup) GroupID { return GroupID{Rule: g.GetRule(), Key: g.GetKey()} }

// State is what the stages read: the committed counters, reissue windows
// and open aggregate groups, and the rules and maintenance in force.
type State struct {
	Counters map[NodeCheck]eventrules.Counter
	Issued   map[NodeCheck]eventrules.Issued
	Groups   map[GroupID]*unyov1.AggregateGroup

	Rules       *eventrules.Set
	Maintenance maintenance.Set
	// Cluster names the cluster in action payloads.
	Cluster string
}

// NewState is an empty state: nothing processed yet, no rules.
func NewState() *State {
	return &State{
		Counters: map[NodeCheck]eventrules.Counter{},
		Issued:   map[NodeCheck]eventrules.Issued{},
		Groups:   map[GroupID]*unyov1.AggregateGroup{},
	}
}

// SetGroups replaces the open groups with gs (as loaded from the store).
func (st *State) SetGroups(gs []*unyov1.AggregateGroup) {
	st.Groups = make(map[GroupID]*unyov1.AggregateGroup, len(gs))
	for _, g := range gs {
		st.Groups[IDOf(g)] = g
	}
}

// Apply folds a committed Decision into the state.
func (st *State) Apply(d *Decision) {
	for k, v := range d.Counters {
		st.Counters[k] = v
	}
	for k, v := range d.Issued {
		st.Issued[k] = v
	}
	for _, g := range d.PutGroups {
		st.Groups[IDOf(g)] = g
	}
	for _, g := range d.DeleteGroups {
		delete(st.Groups, IDOf(g))
	}
}

// counter is the occurrences of nc as of the decision so far.
func (st *State) counter(d *Decision, nc NodeCheck) eventrules.Counter {
	if c, ok := d.Counters[nc]; ok {
		return c
	}
	return st.Counters[nc]
}

// issued is the reissue window of nc as of the decision so far.
func (st *State) issued(d *Decision, nc NodeCheck) (eventrules.Issued, bool) {
	if is, ok := d.Issued[nc]; ok {
		return is, true
	}
	is, ok := st.Issued[nc]
	return is, ok
}

// group is the open group id as of the decision so far, copied on first
// change so that st is untouched until the commit.
func (st *State) group(d *Decision, id GroupID) *unyov1.AggregateGroup {
	if g, ok := d.groups[id]; ok {
		return g
	}
	g := st.Groups[id]
	if g == nil {
		return nil
	}
	// Members are never changed once added, so copying the list is enough.
	cp := &unyov1.AggregateGroup{Rule: g.GetRule(), Key: g.GetKey(), OpenedAt: g.GetOpenedAt(), FlushAt: g.GetFlushAt(), Members: slices.Clone(g.GetMembers())}
	return cp
}
