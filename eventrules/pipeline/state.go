package pipeline

import (
	"slices"
	"strings"
	"time"

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

// HookID names one notifying action (api_hook or plugin): its rule and
// its place in the rule's actions.
type HookID struct {
	Rule   string
	Action int
}

// Notified is what a notifying action last told its receiver about one
// node/check while it fires: notifications follow changes, not results.
type Notified struct {
	// Level is the firing level last notified.
	Level unyov1.Level
	// Since is the event time of the first firing notification: when the
	// condition began, as receivers see it (startsAt).
	Since time.Time
	// SentAt is the processing time of the last notification; the next one
	// at the same level waits for the action's repeat interval from here.
	SentAt time.Time
}

// State is what the stages read: the committed counters, reissue windows
// and open aggregate groups, and the rules and maintenance in force.
type State struct {
	Counters map[NodeCheck]eventrules.Counter
	Issued   map[NodeCheck]eventrules.Issued
	Groups   map[GroupID]*unyov1.AggregateGroup
	// Notified is what each notifying action last sent per node/check that
	// is firing; a resolved notification removes the entry.
	Notified map[NodeCheck]map[HookID]Notified

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
		Notified: map[NodeCheck]map[HookID]Notified{},
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
	if st.Notified == nil {
		st.Notified = map[NodeCheck]map[HookID]Notified{}
	}
	for nc, hooks := range d.Notified {
		for h, n := range hooks {
			if n == nil {
				delete(st.Notified[nc], h)
				continue
			}
			if st.Notified[nc] == nil {
				st.Notified[nc] = map[HookID]Notified{}
			}
			st.Notified[nc][h] = *n
		}
		if len(st.Notified[nc]) == 0 {
			delete(st.Notified, nc)
		}
	}
}

// notified is what hook last sent about nc as of the decision so far.
func (st *State) notified(d *Decision, nc NodeCheck, h HookID) (Notified, bool) {
	if n, ok := d.Notified[nc][h]; ok {
		if n == nil {
			return Notified{}, false
		}
		return *n, true
	}
	n, ok := st.Notified[nc][h]
	return n, ok
}

// firingHooks lists the hooks that notified nc firing and have not sent
// its resolution, as of the decision so far, in a stable order.
func (st *State) firingHooks(d *Decision, nc NodeCheck) []HookID {
	var out []HookID
	for h := range st.Notified[nc] {
		if _, changed := d.Notified[nc][h]; !changed {
			out = append(out, h)
		}
	}
	for h, n := range d.Notified[nc] {
		if n != nil {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b HookID) int {
		if a.Rule != b.Rule {
			return strings.Compare(a.Rule, b.Rule)
		}
		return a.Action - b.Action
	})
	return out
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
