package diagram

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// routerTiers are the router roles of the datacenter network (seed 001),
// from the internet down; anything else (servers, switches without a role)
// is drawn in a last tier, hosts.
func routerTiers() [hostTier]string {
	return [...]string{"gateway-router", "floor-spine-router", "floor-leaf-router", "rack-spine-router", "rack-leaf-router"}
}

// hostTier is the level of resources with no router role.
const hostTier = 5

// tierOf is a resource's level: 0 for a gateway router, hostTier for
// anything without a router role.
func tierOf(p *unyov1.PhysicalResource) int {
	tiers := routerTiers()
	if i := slices.Index(tiers[:], p.GetSpec().GetRole()); i >= 0 {
		return i
	}
	return hostTier
}

// TierName names a level.
func TierName(level int) string {
	if level >= 0 && level < hostTier {
		return routerTiers()[level]
	}
	return "hosts"
}

// Network is the drawing of the network a resource belongs to: the
// resources on the way up from it through the router tiers to the gateway
// routers, the links between them, and the networks its ports carry with
// the resources on each.
type Network struct {
	// From is the resource the drawing starts at.
	From string
	// Tiers are the levels that have resources, top (gateway) first; each
	// tier's nodes are in drawing order (by their links to the tier above,
	// then by name), which Text, SVG and Dot all keep.
	Tiers []Tier
	// Links are every cable between two drawn resources, each once, the
	// upper end first.
	Links []Link
	// Networks are those the start's ports carry, by name.
	Networks []NetGroup
	// Notes report links the drawing could not follow.
	Notes []string
}

// Tier is one level of the drawing.
type Tier struct {
	Level int
	Name  string
	Nodes []NetNode
}

// NetNode is one resource in the network drawing.
type NetNode struct {
	Name  string
	Kind  string
	Role  string
	Level int
	// Start marks the resource the drawing starts at.
	Start bool
	// Member marks a resource drawn because it carries one of the start's
	// networks rather than because it is on the way up; Networks are those
	// networks.
	Member   bool
	Networks []string
	// State and Href, as Item's: set by the web console after layout.
	State string
	Href  string
}

// Link is one cable: A is the upper end (or, between equals, the first by
// name).
type Link struct {
	A, APort string
	B, BPort string
}

// NetGroup is one network the start's ports carry.
type NetGroup struct {
	Name    string
	CIDR    string
	Gateway string
	// Known is false when no Network object has this name (the port names
	// it anyway).
	Known   bool
	Members []Member
}

// Member is a port carrying a network.
type Member struct {
	Resource, Port, Address string
}

// halfLink is a link seen from one end.
type halfLink struct {
	port, peer, peerPort string
}

// NetworkFrom lays out the network resource from belongs to. The walk goes
// up only (to a strictly higher tier, or from a host to a switch without a
// role), visiting each resource once, so loops in the cabling end it.
func NetworkFrom(inv Inventory, from string) (*Network, error) {
	byName := make(map[string]*unyov1.PhysicalResource, len(inv.Resources))
	names := make([]string, 0, len(inv.Resources))
	for _, p := range inv.Resources {
		byName[p.GetName()] = p
		names = append(names, p.GetName())
	}
	start := byName[from]
	if start == nil {
		return nil, unknownName("resource", from, names)
	}
	n := &Network{From: from}
	adj, notes := links(inv.Resources, byName)
	drawn := walkUp(from, adj, byName)
	var member map[string][]string
	n.Networks, member = networksOf(start, inv, drawn)
	for name := range member {
		drawn[name] = true
	}
	n.Links = drawnLinks(adj, drawn, byName)
	for _, note := range notes {
		if drawn[note.resource] {
			n.Notes = append(n.Notes, note.text)
		}
	}
	slices.Sort(n.Notes)
	n.Notes = slices.Compact(n.Notes)
	n.Tiers = orderTiers(drawn, byName, n.Links, from, member)
	return n, nil
}

// walkUp is the set of resources reached from the start going upward.
func walkUp(from string, adj map[string][]halfLink, byName map[string]*unyov1.PhysicalResource) map[string]bool {
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		cur := byName[queue[0]]
		queue = queue[1:]
		for _, h := range adj[cur.GetName()] {
			if !seen[h.peer] && upward(cur, byName[h.peer]) {
				seen[h.peer] = true
				queue = append(queue, h.peer)
			}
		}
	}
	return seen
}

// networksOf are the networks start's ports carry, each with every port
// carrying it, and the resources those ports are on that are not drawn
// yet, with the networks they share with start.
func networksOf(start *unyov1.PhysicalResource, inv Inventory, drawn map[string]bool) ([]NetGroup, map[string][]string) {
	groups := map[string]*NetGroup{}
	for _, pt := range start.GetSpec().GetPorts() {
		for _, name := range pt.GetNetworks() {
			groups[name] = &NetGroup{Name: name}
		}
	}
	if len(groups) == 0 {
		return nil, nil
	}
	for _, nw := range inv.Networks {
		if g := groups[nw.GetName()]; g != nil {
			g.Known, g.CIDR, g.Gateway = true, nw.GetSpec().GetCidr(), nw.GetSpec().GetGateway()
		}
	}
	member := map[string][]string{}
	for _, p := range inv.Resources {
		for _, pt := range p.GetSpec().GetPorts() {
			for _, name := range pt.GetNetworks() {
				g := groups[name]
				if g == nil {
					continue
				}
				g.Members = append(g.Members, Member{Resource: p.GetName(), Port: pt.GetName(), Address: pt.GetAddress()})
				if !drawn[p.GetName()] && !slices.Contains(member[p.GetName()], name) {
					member[p.GetName()] = append(member[p.GetName()], name)
				}
			}
		}
	}
	for _, nets := range member {
		slices.Sort(nets)
	}
	out := make([]NetGroup, 0, len(groups))
	for _, g := range groups {
		slices.SortFunc(g.Members, func(a, b Member) int {
			return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Port, b.Port))
		})
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b NetGroup) int { return cmp.Compare(a.Name, b.Name) })
	return out, member
}

// drawnLinks are the cables between drawn resources, each once, the upper
// end first.
func drawnLinks(adj map[string][]halfLink, drawn map[string]bool, byName map[string]*unyov1.PhysicalResource) []Link {
	var out []Link
	for a, hs := range adj {
		if !drawn[a] {
			continue
		}
		for _, h := range hs {
			if !drawn[h.peer] {
				continue
			}
			ta, tb := tierOf(byName[a]), tierOf(byName[h.peer])
			if ta > tb || (ta == tb && (a > h.peer || (a == h.peer && h.port > h.peerPort))) {
				continue // the same cable seen from its other end
			}
			out = append(out, Link{A: a, APort: h.port, B: h.peer, BPort: h.peerPort})
		}
	}
	slices.SortFunc(out, func(x, y Link) int {
		return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.APort, y.APort), cmp.Compare(x.B, y.B), cmp.Compare(x.BPort, y.BPort))
	})
	return out
}

// upward reports whether the walk goes on from cur to peer: to a higher
// tier, or from a host to an unmanaged switch (an L2 switch between a
// server and its leaf router).
func upward(cur, peer *unyov1.PhysicalResource) bool {
	if peer == nil {
		return false
	}
	tc, tp := tierOf(cur), tierOf(peer)
	if tp < tc {
		return true
	}
	return tc == hostTier && tp == hostTier && peer.GetSpec().GetKind() == "switch" && cur.GetSpec().GetKind() != "switch"
}

type linkNote struct {
	resource, text string
}

// links indexes every cable from both ends: a link declared on one side
// only, or on both, is one cable. Links to unknown resources are noted.
func links(resources []*unyov1.PhysicalResource, byName map[string]*unyov1.PhysicalResource) (map[string][]halfLink, []linkNote) {
	adj := map[string][]halfLink{}
	seen := map[[4]string]bool{}
	var notes []linkNote
	add := func(a, ap, b, bp string) {
		k := [4]string{a, ap, b, bp}
		if seen[k] {
			return
		}
		seen[k] = true
		adj[a] = append(adj[a], halfLink{port: ap, peer: b, peerPort: bp})
	}
	for _, p := range resources {
		for _, pt := range p.GetSpec().GetPorts() {
			l := pt.GetLink()
			if l.GetResource() == "" {
				continue
			}
			if byName[l.GetResource()] == nil {
				notes = append(notes, linkNote{p.GetName(), fmt.Sprintf("%s port %s links to %s, which is not in the inventory", p.GetName(), pt.GetName(), l.GetResource())})
				continue
			}
			add(p.GetName(), pt.GetName(), l.GetResource(), l.GetPort())
			add(l.GetResource(), l.GetPort(), p.GetName(), pt.GetName())
		}
	}
	for name := range adj {
		slices.SortFunc(adj[name], func(x, y halfLink) int {
			return cmp.Or(cmp.Compare(x.port, y.port), cmp.Compare(x.peer, y.peer), cmp.Compare(x.peerPort, y.peerPort))
		})
	}
	return adj, notes
}

// orderTiers groups drawn resources by level and orders each level for a
// layered drawing: the top by name, each level below by the mean position
// of its links to the levels above (a barycenter pass, which keeps crossed
// lines few), then by name.
func orderTiers(drawn map[string]bool, byName map[string]*unyov1.PhysicalResource, ls []Link, from string, member map[string][]string) []Tier {
	var levels [hostTier + 1][]string
	for name := range drawn {
		t := tierOf(byName[name])
		levels[t] = append(levels[t], name)
	}
	up := map[string][]string{}
	for _, l := range ls {
		if tierOf(byName[l.A]) < tierOf(byName[l.B]) {
			up[l.B] = append(up[l.B], l.A)
		}
	}
	pos := map[string]float64{}
	var tiers []Tier
	for lv, names := range levels {
		if len(names) == 0 {
			continue
		}
		key := make(map[string]float64, len(names))
		for _, name := range names {
			sum, cnt := 0.0, 0
			for _, a := range up[name] {
				if p, ok := pos[a]; ok {
					sum += p
					cnt++
				}
			}
			key[name] = 2 // nothing above: after the others (keys are < 1), by name
			if cnt > 0 {
				key[name] = sum / float64(cnt)
			}
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(key[a], key[b]), cmp.Compare(a, b)) })
		t := Tier{Level: lv, Name: TierName(lv)}
		for i, name := range names {
			p := byName[name]
			pos[name] = float64(i) / float64(len(names))
			t.Nodes = append(t.Nodes, NetNode{
				Name: name, Kind: p.GetSpec().GetKind(), Role: p.GetSpec().GetRole(), Level: lv,
				Start: name == from, Member: member[name] != nil, Networks: member[name],
			})
		}
		tiers = append(tiers, t)
	}
	return tiers
}

// portsByResource joins a network's members per resource: "eth10,eth11"
// for a router carrying it on several ports, so that a drawing joins each
// resource to the network once.
func portsByResource(g NetGroup) (resources, ports []string) {
	for _, m := range g.Members {
		if n := len(resources); n > 0 && resources[n-1] == m.Resource {
			ports[n-1] += "," + m.Port
			continue
		}
		resources = append(resources, m.Resource)
		ports = append(ports, m.Port)
	}
	return resources, ports
}
