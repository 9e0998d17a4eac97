package diagram

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// defaultUnits is a rack's height when its spec gives none; maxUnits is
// the most drawn, so that a mistyped height cannot make a drawing (and its
// memory) without bound.
const (
	defaultUnits = 42
	maxUnits     = 100
)

// Racks is a rack elevation drawing: racks grouped in rows, each drawn unit
// by unit, and what could not be drawn listed apart.
type Racks struct {
	// Title says what is drawn: "floor floor-1-1-1", "cluster c1".
	Title string
	Rows  []RackRow
	// Apart are resources of the view not drawn in any rack, each with the
	// reason (no rack, unknown rack, units overlapping another resource or
	// beyond the rack's height): reported rather than drawn over.
	Apart []Apart
	// Notes are facts about the view that are not resources (a cluster
	// node with no inventory entry).
	Notes []string
}

// RackRow is the racks of one row of a floor, by column.
type RackRow struct {
	// Label names the row: "row A", or "floor-1-1-1 row A" when the view
	// spans floors.
	Label string
	Racks []Rack
}

// Rack is one rack's elevation.
type Rack struct {
	Name        string
	Floor       string
	Row         string
	Column      int
	Units       int
	Zone        string
	PowerZone   string
	NetworkZone string
	// Slots cover every unit from the top (Units) down to 1: a resource
	// spanning its units, or one empty unit.
	Slots []Slot
}

// Slot is one resource in its units, or one empty unit (Item nil).
type Slot struct {
	Top, Bottom int
	Item        *Item
	// Foreign marks units held by a resource outside the view (in a
	// cluster's view, another cluster's server or the rack's switches):
	// occupied, but not the view's. Item is nil then.
	Foreign bool
}

// Item is a resource as drawn.
type Item struct {
	Name   string
	Kind   string
	Role   string
	Model  string
	Rack   string
	Unit   int
	Height int
	// Children are what runs on the resource (a cluster view will show
	// the computes on each node); filled through RackOptions.Children.
	Children []Child
	// State and Href, when set (the web console sets them after layout),
	// add the class "state-STATE" to the resource's box and make it a link;
	// the CLI leaves them empty, so its drawings do not change.
	State string
	Href  string
}

// Child is something drawn on a resource.
type Child struct {
	Name, Kind string
}

// Apart is a resource of the view that is not drawn in a rack.
type Apart struct {
	Item   Item
	Reason string
}

// RackOptions adjust a rack view.
type RackOptions struct {
	// Children, if set, lists what runs on a resource; a cluster view
	// passes the computes placed on each node.
	Children func(resource string) []Child
}

// FloorRacks lays out a floor's racks with every resource in its units.
// A floor is known when a Floor object or a rack names it.
func FloorRacks(inv Inventory, floor string, opt RackOptions) (*Racks, error) {
	var racks []*unyov1.Rack
	known := make([]string, 0, len(inv.Floors))
	for _, f := range inv.Floors {
		known = append(known, f.GetName())
	}
	exists := slices.Contains(known, floor)
	for _, r := range inv.Racks {
		known = append(known, r.GetSpec().GetFloor())
		if r.GetSpec().GetFloor() == floor {
			racks = append(racks, r)
			exists = true
		}
	}
	if !exists {
		return nil, unknownName("floor", floor, known)
	}
	onFloor := make(map[string]bool, len(racks))
	for _, r := range racks {
		onFloor[r.GetName()] = true
	}
	var items []*unyov1.PhysicalResource
	for _, p := range inv.Resources {
		if onFloor[p.GetSpec().GetRack()] {
			items = append(items, p)
		}
	}
	v := layoutRacks("floor "+floor, racks, items, nil, false, opt)
	return v, nil
}

// ClusterRacks lays out a cluster's virtual rack view: the physical
// resources its nodes are (Node.resource) in their racks, only those racks.
// Units other resources hold are drawn as occupied (Foreign) without them.
func ClusterRacks(inv Inventory, cluster string, nodes []*unyov1.Node, opt RackOptions) *Racks {
	byName := make(map[string]*unyov1.PhysicalResource, len(inv.Resources))
	for _, p := range inv.Resources {
		byName[p.GetName()] = p
	}
	rackByName := make(map[string]*unyov1.Rack, len(inv.Racks))
	for _, r := range inv.Racks {
		rackByName[r.GetName()] = r
	}
	var notes []string
	var items []*unyov1.PhysicalResource
	inView := map[string]bool{}
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b *unyov1.Node) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, n := range nodes {
		switch p := byName[n.GetResource()]; {
		case n.GetResource() == "":
			notes = append(notes, fmt.Sprintf("node %s has no inventory entry", n.GetName()))
		case p == nil:
			notes = append(notes, fmt.Sprintf("node %s is resource %s, which is not in the inventory", n.GetName(), n.GetResource()))
		case !inView[p.GetName()]:
			inView[p.GetName()] = true
			items = append(items, p)
		}
	}
	if len(nodes) == 0 {
		notes = append(notes, fmt.Sprintf("cluster %s has no nodes", cluster))
	}
	var racks []*unyov1.Rack
	seen := map[string]bool{}
	for _, p := range items {
		name := p.GetSpec().GetRack()
		if r := rackByName[name]; r != nil && !seen[name] {
			seen[name] = true
			racks = append(racks, r)
		}
	}
	var foreign []*unyov1.PhysicalResource
	for _, p := range inv.Resources {
		if seen[p.GetSpec().GetRack()] && !inView[p.GetName()] {
			foreign = append(foreign, p)
		}
	}
	v := layoutRacks("cluster "+cluster, racks, items, foreign, true, opt)
	v.Notes = append(notes, v.Notes...)
	return v
}

// layoutRacks places items (then foreign, in what units are left) in
// racks. Items are placed lowest unit first, by name on a tie, so that
// when two overlap the same one is drawn and the other reported, whatever
// the order the store listed them in.
func layoutRacks(title string, racks []*unyov1.Rack, items, foreign []*unyov1.PhysicalResource, floorInLabel bool, opt RackOptions) *Racks {
	v := &Racks{Title: title}
	racks = slices.Clone(racks)
	slices.SortFunc(racks, func(a, b *unyov1.Rack) int {
		pa, pb := a.GetSpec().GetPosition(), b.GetSpec().GetPosition()
		return cmp.Or(
			cmp.Compare(a.GetSpec().GetFloor(), b.GetSpec().GetFloor()),
			cmpRow(pa.GetRow(), pb.GetRow()),
			cmp.Compare(pa.GetColumn(), pb.GetColumn()),
			cmp.Compare(a.GetName(), b.GetName()))
	})
	byRack := map[string][]*unyov1.PhysicalResource{}
	for _, p := range items {
		byRack[p.GetSpec().GetRack()] = append(byRack[p.GetSpec().GetRack()], p)
	}
	foreignByRack := map[string][]*unyov1.PhysicalResource{}
	for _, p := range foreign {
		foreignByRack[p.GetSpec().GetRack()] = append(foreignByRack[p.GetSpec().GetRack()], p)
	}
	placed := map[string]bool{}
	for _, r := range racks {
		rack, apart := layoutRack(r, byRack[r.GetName()], foreignByRack[r.GetName()], opt)
		if n := r.GetSpec().GetUnits(); n > maxUnits {
			v.Notes = append(v.Notes, fmt.Sprintf("rack %s has %d units; only the lowest %d are drawn", r.GetName(), n, maxUnits))
		}
		placed[r.GetName()] = true
		v.Apart = append(v.Apart, apart...)
		label := "row " + rack.Row
		if rack.Row == "" {
			label = "no row"
		}
		if floorInLabel {
			label = rack.Floor + " " + label
		}
		if n := len(v.Rows); n == 0 || v.Rows[n-1].Label != label {
			v.Rows = append(v.Rows, RackRow{Label: label})
		}
		v.Rows[len(v.Rows)-1].Racks = append(v.Rows[len(v.Rows)-1].Racks, rack)
	}
	for _, p := range items {
		name := p.GetSpec().GetRack()
		switch {
		case name == "":
			v.Apart = append(v.Apart, Apart{Item: item(p, opt), Reason: "no rack"})
		case !placed[name]:
			v.Apart = append(v.Apart, Apart{Item: item(p, opt), Reason: fmt.Sprintf("rack %s is not in the inventory", name)})
		}
	}
	slices.SortStableFunc(v.Apart, func(a, b Apart) int {
		return cmp.Or(cmp.Compare(a.Item.Rack, b.Item.Rack), cmp.Compare(a.Item.Unit, b.Item.Unit), cmp.Compare(a.Item.Name, b.Item.Name))
	})
	return v
}

// cmpRow orders rows by name, racks without a row last.
func cmpRow(a, b string) int {
	if (a == "") != (b == "") {
		if a == "" {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

func item(p *unyov1.PhysicalResource, opt RackOptions) Item {
	s := p.GetSpec()
	it := Item{
		Name: p.GetName(), Kind: s.GetKind(), Role: s.GetRole(), Model: s.GetModel(),
		Rack: s.GetRack(), Unit: int(s.GetUnit()), Height: max(1, int(s.GetHeight())),
	}
	if opt.Children != nil {
		it.Children = opt.Children(p.GetName())
	}
	return it
}

// layoutRack places one rack's resources, returning those that do not fit.
func layoutRack(r *unyov1.Rack, items, foreign []*unyov1.PhysicalResource, opt RackOptions) (Rack, []Apart) {
	s := r.GetSpec()
	rack := Rack{
		Name: r.GetName(), Floor: s.GetFloor(), Row: s.GetPosition().GetRow(), Column: int(s.GetPosition().GetColumn()),
		Units: int(s.GetUnits()), Zone: s.GetZone(), PowerZone: s.GetPowerZone(), NetworkZone: s.GetNetworkZone(),
	}
	if rack.Units <= 0 {
		rack.Units = defaultUnits
	}
	rack.Units = min(rack.Units, maxUnits)
	// holder[u] is the index into placed of what holds unit u, or -1.
	holder := make([]int, rack.Units+1)
	for i := range holder {
		holder[i] = -1
	}
	type placement struct {
		it      Item
		foreign bool
	}
	var placed []placement
	var apart []Apart
	place := func(ps []*unyov1.PhysicalResource, isForeign bool) {
		its := make([]Item, 0, len(ps))
		for _, p := range ps {
			its = append(its, item(p, opt))
		}
		slices.SortFunc(its, func(a, b Item) int { return cmp.Or(cmp.Compare(a.Unit, b.Unit), cmp.Compare(a.Name, b.Name)) })
		for _, it := range its {
			top := it.Unit + it.Height - 1
			reason := ""
			switch {
			case it.Unit < 1:
				reason = fmt.Sprintf("no unit in rack %s", rack.Name)
			case top > rack.Units:
				reason = fmt.Sprintf("units %s beyond rack %s's %d", unitSpan(it.Unit, top), rack.Name, rack.Units)
			default:
				for u := it.Unit; u <= top; u++ {
					if h := holder[u]; h >= 0 {
						o := placed[h].it
						reason = fmt.Sprintf("units %s overlap %s (units %s)", unitSpan(it.Unit, top), o.Name, unitSpan(o.Unit, o.Unit+o.Height-1))
						break
					}
				}
			}
			if reason != "" {
				if !isForeign {
					apart = append(apart, Apart{Item: it, Reason: reason})
				}
				continue
			}
			for u := it.Unit; u <= top; u++ {
				holder[u] = len(placed)
			}
			placed = append(placed, placement{it: it, foreign: isForeign})
		}
	}
	place(items, false)
	place(foreign, true)
	for u := rack.Units; u >= 1; {
		h := holder[u]
		if h < 0 {
			rack.Slots = append(rack.Slots, Slot{Top: u, Bottom: u})
			u--
			continue
		}
		p := placed[h]
		sl := Slot{Top: u, Bottom: p.it.Unit, Foreign: p.foreign}
		if !p.foreign {
			it := p.it
			sl.Item = &it
		}
		rack.Slots = append(rack.Slots, sl)
		u = p.it.Unit - 1
	}
	return rack, apart
}

func unitSpan(bottom, top int) string {
	if bottom == top {
		return fmt.Sprint(bottom)
	}
	return fmt.Sprintf("%d-%d", bottom, top)
}
