package diagram

import (
	"fmt"
	"io"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// bigFloor is a floor "big" of n racks in rows of ten, each of its 42
// units full: two 1U leaf routers, twenty 2U servers.
func bigFloor(n int) Inventory {
	var inv Inventory
	inv.Floors = append(inv.Floors, &unyov1.Floor{Name: "big"})
	for i := range n {
		name := fmt.Sprintf("floor-1-1-1-rack-%d-%d", i/10+1, i%10+1)
		inv.Racks = append(inv.Racks, rack(name, "big", string(rune('A'+i/10)), int32(i%10+1), 42))
		for j := range 2 {
			inv.Resources = append(inv.Resources, &unyov1.PhysicalResource{Name: fmt.Sprintf("%s-rack-leaf-router%02d", name, j+1),
				Spec: &unyov1.PhysicalResourceSpec{Kind: "router", Role: "rack-leaf-router", Rack: name, Unit: int32(42 - j), Height: 1}})
		}
		for j := range 20 {
			inv.Resources = append(inv.Resources, &unyov1.PhysicalResource{Name: fmt.Sprintf("%s-server%02d", name, j+1),
				Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Model: "R650", Rack: name, Unit: int32(1 + 2*j), Height: 2}})
		}
	}
	return inv
}

// BenchmarkRackDiagram40Racks lays out and renders a full 40-rack floor
// (880 resources), the goal being under 200 ms per render.
func BenchmarkRackDiagram40Racks(b *testing.B) {
	inv := bigFloor(40)
	render := map[string]func(io.Writer, *Racks) error{
		"text": func(w io.Writer, v *Racks) error { return RacksText(w, v, TextOptions{Width: 200}) },
		"svg":  RacksSVG,
	}
	for _, format := range []string{"text", "svg"} {
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				v, err := FloorRacks(inv, "big", RackOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := render[format](io.Discard, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
