package diagram

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func rack(name, floor, row string, col, units int32) *unyov1.Rack {
	return &unyov1.Rack{Name: name, Spec: &unyov1.RackSpec{Floor: floor, Units: units, Position: &unyov1.RackPosition{Row: row, Column: col}}}
}

func res(name, kind, rackName string, unit, height int32, ports ...*unyov1.Port) *unyov1.PhysicalResource {
	return &unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{Kind: kind, Rack: rackName, Unit: unit, Height: height, Ports: ports}}
}

func router(name, role string, ports ...*unyov1.Port) *unyov1.PhysicalResource {
	return &unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{Kind: "router", Role: role, Ports: ports}}
}

func port(name, toResource, toPort string, networks ...string) *unyov1.Port {
	p := &unyov1.Port{Name: name, Networks: networks}
	if toResource != "" {
		p.Link = &unyov1.PortLink{Resource: toResource, Port: toPort}
	}
	return p
}

// slots renders a rack's slots as "top-bottom:name" (empty units ".",
// foreign "/"), top first.
func slots(r Rack) string {
	var parts []string
	for _, s := range r.Slots {
		switch {
		case s.Foreign:
			parts = append(parts, fmt.Sprintf("%s:/", unitSpan(s.Bottom, s.Top)))
		case s.Item == nil:
			parts = append(parts, fmt.Sprintf("%d:.", s.Top))
		default:
			parts = append(parts, fmt.Sprintf("%s:%s", unitSpan(s.Bottom, s.Top), s.Item.Name))
		}
	}
	return strings.Join(parts, " ")
}

func apart(v *Racks) string {
	var parts []string
	for _, a := range v.Apart {
		parts = append(parts, a.Item.Name+": "+a.Reason)
	}
	return strings.Join(parts, "; ")
}

func TestRackUnits(t *testing.T) {
	tests := []struct {
		name      string
		resources []*unyov1.PhysicalResource
		slots     string
		apart     string
	}{
		{
			name:  "empty rack: every unit drawn empty",
			slots: "6:. 5:. 4:. 3:. 2:. 1:.",
		},
		{
			name:      "resources in their units, height 0 meaning 1",
			resources: []*unyov1.PhysicalResource{res("sw", "switch", "r1", 6, 0), res("s1", "server", "r1", 2, 3)},
			slots:     "6:sw 5:. 2-4:s1 1:.",
		},
		{
			name: "an overlap is reported, not drawn over: the lower unit wins, then the name; what is left is drawn",
			resources: []*unyov1.PhysicalResource{
				res("s2", "server", "r1", 3, 2), res("s1", "server", "r1", 2, 2), res("s0", "server", "r1", 2, 1),
			},
			slots: "6:. 5:. 3-4:s2 2:s0 1:.",
			apart: "s1: units 2-3 overlap s0 (units 2)",
		},
		{
			name:      "beyond the rack's height, or no unit",
			resources: []*unyov1.PhysicalResource{res("tall", "server", "r1", 5, 4), res("loose", "other", "r1", 0, 1)},
			slots:     "6:. 5:. 4:. 3:. 2:. 1:.",
			apart:     "loose: no unit in rack r1; tall: units 5-8 beyond rack r1's 6",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := Inventory{Racks: []*unyov1.Rack{rack("r1", "f1", "A", 1, 6)}, Resources: tt.resources}
			v, err := FloorRacks(inv, "f1", RackOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := slots(v.Rows[0].Racks[0]); got != tt.slots {
				t.Errorf("slots:\n got %s\nwant %s", got, tt.slots)
			}
			if got := apart(v); got != tt.apart {
				t.Errorf("apart:\n got %s\nwant %s", got, tt.apart)
			}
			var b bytes.Buffer
			if err := RacksText(&b, v, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, a := range v.Apart {
				if !strings.Contains(b.String(), a.Item.Name+" ("+a.Item.Kind+"): "+a.Reason) {
					t.Errorf("text does not list %s apart:\n%s", a.Item.Name, b.String())
				}
			}
		})
	}
}

func TestRackRowsAndOrder(t *testing.T) {
	inv := Inventory{
		Floors: []*unyov1.Floor{{Name: "f1"}, {Name: "empty"}},
		Racks: []*unyov1.Rack{
			rack("b1", "f1", "B", 1, 4), rack("a2", "f1", "A", 2, 4), rack("a1", "f1", "A", 1, 4),
			rack("x", "f1", "", 0, 4), rack("other", "f2", "A", 1, 4),
		},
	}
	v, err := FloorRacks(inv, "f1", RackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range v.Rows {
		var names []string
		for _, r := range row.Racks {
			names = append(names, r.Name)
		}
		got = append(got, row.Label+": "+strings.Join(names, ","))
	}
	if want := "row A: a1,a2 | row B: b1 | no row: x"; strings.Join(got, " | ") != want {
		t.Errorf("rows: got %q, want %q", strings.Join(got, " | "), want)
	}
	// A mistyped height does not make a drawing without bound.
	inv.Racks = append(inv.Racks, rack("huge", "f3", "A", 1, 1<<30))
	v, err = FloorRacks(inv, "f3", RackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(v.Rows[0].Racks[0].Slots); got != maxUnits || len(v.Notes) != 1 || v.Notes[0] != "rack huge has 1073741824 units; only the lowest 100 are drawn" {
		t.Errorf("a rack of 2^30 units: %d slots, notes %q", got, v.Notes)
	}
	// A floor with no racks is drawn empty; f2 is known from its rack.
	for _, f := range []string{"empty", "f2"} {
		if _, err := FloorRacks(inv, f, RackOptions{}); err != nil {
			t.Errorf("floor %s: %v", f, err)
		}
	}
}

func TestUnknownNamesListKnownOnes(t *testing.T) {
	inv := fixture(t)
	_, err := FloorRacks(inv, "floor-1-1-9", RackOptions{})
	if err == nil || err.Error() != `floor "floor-1-1-9" is not in the inventory (known: floor-1-1-1, floor-1-2-1)` {
		t.Errorf("unknown floor: %v", err)
	}
	_, err = NetworkFrom(inv, "rack-1-1-server9")
	if err == nil || !strings.HasPrefix(err.Error(), `resource "rack-1-1-server9" is not in the inventory (known: rack-1-1-server1, rack-1-1-server2, rack-1-1-pdu1, `) ||
		!strings.HasSuffix(err.Error(), "and 10 more)") {
		t.Errorf("unknown resource: %v", err)
	}
	_, err = NetworkFrom(Inventory{}, "x")
	if err == nil || err.Error() != `resource "x" is not in the inventory, which has none` {
		t.Errorf("empty inventory: %v", err)
	}
}

func TestClusterRacks(t *testing.T) {
	inv := Inventory{
		Racks: []*unyov1.Rack{rack("r1", "f1", "A", 1, 4), rack("r2", "f1", "A", 2, 4), rack("r3", "f2", "A", 1, 4)},
		Resources: []*unyov1.PhysicalResource{
			res("s1", "server", "r1", 1, 2), res("sw1", "switch", "r1", 4, 1), res("s2", "server", "r1", 3, 1),
			res("other", "server", "r2", 1, 1), // another cluster's rack: not drawn
			res("s3", "server", "r3", 2, 1),
			res("loose", "server", "", 0, 0),
			res("lost", "server", "r9", 1, 1),
		},
	}
	nodes := []*unyov1.Node{
		{Name: "n3", Resource: "s3"}, {Name: "n1", Resource: "s1"}, {Name: "n2", Resource: "s2"},
		{Name: "n4", Resource: "loose"}, {Name: "n5", Resource: "lost"}, {Name: "n6"}, {Name: "n7", Resource: "gone"},
	}
	v := ClusterRacks(inv, "c1", nodes, RackOptions{Children: func(r string) []Child {
		if r == "s1" {
			return []Child{{Name: "web-0", Kind: "compute"}}
		}
		return nil
	}})
	var got []string
	for _, row := range v.Rows {
		for _, r := range row.Racks {
			got = append(got, row.Label+" "+r.Name+" "+slots(r))
		}
	}
	want := []string{"f1 row A r1 4:/ 3:s2 1-2:s1", "f2 row A r3 4:. 3:. 2:s3 1:."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("racks:\n got %q\nwant %q", got, want)
	}
	if got, want := apart(v), "loose: no rack; lost: rack r9 is not in the inventory"; got != want {
		t.Errorf("apart:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(v.Notes, "; "), "node n6 has no inventory entry; node n7 is resource gone, which is not in the inventory"; got != want {
		t.Errorf("notes:\n got %s\nwant %s", got, want)
	}
	if c := v.Rows[0].Racks[0].Slots[2].Item.Children; len(c) != 1 || c[0].Name != "web-0" {
		t.Errorf("s1's children: %v", c)
	}
	if v := ClusterRacks(inv, "c2", nil, RackOptions{}); len(v.Rows) != 0 || strings.Join(v.Notes, "") != "cluster c2 has no nodes" {
		t.Errorf("a cluster with no nodes: %+v", v)
	}
}

// tiers renders a network's tiers as "tier: node,node | ...".
func tiers(n *Network) string {
	var parts []string
	for _, t := range n.Tiers {
		var names []string
		for _, node := range t.Nodes {
			names = append(names, node.Name)
		}
		parts = append(parts, t.Name+": "+strings.Join(names, ","))
	}
	return strings.Join(parts, " | ")
}

func TestNetworkWalk(t *testing.T) {
	inv := Inventory{Resources: []*unyov1.PhysicalResource{
		router("gw", "gateway-router", port("e0", "", "")),
		// Two spines cabled to each other and both to the gateway: a loop.
		router("fs1", "floor-spine-router", port("up", "gw", "e0"), port("peer", "fs2", "peer")),
		router("fs2", "floor-spine-router", port("up", "gw", "e1"), port("peer", "fs1", "peer")),
		router("fl", "floor-leaf-router", port("u1", "fs1", "d"), port("u2", "fs2", "d")),
		router("rs", "rack-spine-router", port("u", "fl", "d")),
		// The leaf links down to its server and up to rs, declared from both
		// ends: one cable each.
		router("rl", "rack-leaf-router", port("u", "rs", "d"), port("s1", "srv", "eth0", "net-a"), port("s2", "", "", "net-b")),
		res("srv", "server", "", 0, 0, port("eth0", "rl", "s1", "net-a"), port("eth1", "l2", "p1")),
		// An unmanaged switch between another server and the leaf.
		res("l2", "switch", "", 0, 0, port("up", "rl", "s3")),
		res("srv2", "server", "", 0, 0, port("eth0", "l2", "p2", "net-b"), port("bad", "nowhere", "x")),
		// Not on the way up from srv: another leaf.
		router("rl2", "rack-leaf-router", port("u", "rs", "d2")),
	}}
	done := make(chan struct{})
	var n *Network
	var err error
	go func() { defer close(done); n, err = NetworkFrom(inv, "srv2") }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the walk did not end on a loop of links")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tiers(n), "gateway-router: gw | floor-spine-router: fs1,fs2 | floor-leaf-router: fl | rack-spine-router: rs | rack-leaf-router: rl | hosts: l2,srv2"; got != want {
		t.Errorf("from srv2:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(n.Notes, "; "), "srv2 port bad links to nowhere, which is not in the inventory"; got != want {
		t.Errorf("notes: %s", got)
	}

	// From the leaf, an L3 router holding two networks: each is shown with
	// the resources carrying it, drawn too.
	n, err = NetworkFrom(inv, "rl")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tiers(n), "gateway-router: gw | floor-spine-router: fs1,fs2 | floor-leaf-router: fl | rack-spine-router: rs | rack-leaf-router: rl | hosts: srv,srv2"; got != want {
		t.Errorf("from rl:\n got %s\nwant %s", got, want)
	}
	var nets []string
	for _, g := range n.Networks {
		var ms []string
		for _, m := range g.Members {
			ms = append(ms, m.Resource+":"+m.Port)
		}
		nets = append(nets, fmt.Sprintf("%s(known=%v) %s", g.Name, g.Known, strings.Join(ms, ",")))
	}
	if got, want := strings.Join(nets, " | "), "net-a(known=false) rl:s1,srv:eth0 | net-b(known=false) rl:s2,srv2:eth0"; got != want {
		t.Errorf("networks:\n got %s\nwant %s", got, want)
	}
	var links []string
	for _, l := range n.Links {
		links = append(links, l.A+":"+l.APort+"-"+l.B+":"+l.BPort)
	}
	if got, want := strings.Join(links, " "), "fl:d-rs:u fs1:d-fl:u1 fs1:peer-fs2:peer fs2:d-fl:u2 gw:e0-fs1:up gw:e1-fs2:up rl:s1-srv:eth0 rs:d-rl:u"; got != want {
		t.Errorf("links:\n got %s\nwant %s", got, want)
	}
	var b bytes.Buffer
	if err := NetworkText(&b, n, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  srv2 (server; on net-b)\n") || !strings.Contains(b.String(), "network net-b (no Network object of that name)\n") {
		t.Errorf("text:\n%s", b.String())
	}
}

// TestWidth: the text fits the terminal, from 80 to 200 columns, however
// many racks a row has.
func TestWidth(t *testing.T) {
	inv := bigFloor(12)
	v, err := FloorRacks(inv, "big", RackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{0, 40, 80, 97, 120, 200, 400} {
		var b bytes.Buffer
		if err := RacksText(&b, v, TextOptions{Width: w}); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, b.Bytes(), TextOptions{Width: w}.width())
	}
}
