// Package diagram lays out the inventory as drawings: rack elevations (a
// floor's racks, or the racks a cluster's nodes sit in) and the network a
// resource belongs to, up through the router tiers. Layouts are plain data
// the web console can reuse; Text, SVG and Dot render them. The package is
// pure: callers fetch the objects, and every output is sorted so that it is
// the same for the same inventory.
package diagram

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Inventory is what diagrams are drawn from: the objects of the inventory
// and catalog kinds, as root lists them.
type Inventory struct {
	Floors    []*unyov1.Floor
	Racks     []*unyov1.Rack
	Resources []*unyov1.PhysicalResource
	Networks  []*unyov1.Network
}

// FromObjects sorts objects of any kinds into an Inventory; other kinds
// are ignored.
func FromObjects(objs []*unyov1.Object) Inventory {
	var inv Inventory
	for _, o := range objs {
		switch k := o.GetKind().(type) {
		case *unyov1.Object_Floor:
			inv.Floors = append(inv.Floors, k.Floor)
		case *unyov1.Object_Rack:
			inv.Racks = append(inv.Racks, k.Rack)
		case *unyov1.Object_PhysicalResource:
			inv.Resources = append(inv.Resources, k.PhysicalResource)
		case *unyov1.Object_Network:
			inv.Networks = append(inv.Networks, k.Network)
		}
	}
	return inv
}

// unknownName is the error for a name the inventory does not hold: it
// names a few known ones, the closest (longest common prefix) first, so
// that a typo shows its fix.
func unknownName(what, name string, known []string) error {
	known = slices.Clone(known)
	slices.Sort(known)
	known = slices.Compact(known)
	if len(known) == 0 {
		return fmt.Errorf("%s %q is not in the inventory, which has none", what, name)
	}
	slices.SortStableFunc(known, func(a, b string) int {
		return cmp.Compare(commonPrefix(b, name), commonPrefix(a, name))
	})
	const few = 5
	list := strings.Join(known[:min(few, len(known))], ", ")
	if len(known) > few {
		list += fmt.Sprintf(", and %d more", len(known)-few)
	}
	return fmt.Errorf("%s %q is not in the inventory (known: %s)", what, name, list)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
