package builtin

import (
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/provision/inventory"
)

// inventory is where hardware sits and how it is cabled (DESIGN.md,
// "Inventory"); root owns it.
func inventoryKinds() []kinds.Kind {
	return []kinds.Kind{
		kinds.Define(kinds.Spec[*unyov1.Region]{
			Noun: "regions", Help: "Regions: datacenters users see as one place", Aliases: []string{"region"},
			Owner:    kinds.RootTier,
			Validate: func(r *unyov1.Region, _ time.Time) error { return inventory.ValidateRegion(r) },
			Columns: []kinds.TypedColumn[*unyov1.Region]{
				{Header: "NAME", Cell: func(r *unyov1.Region, _ time.Time) string { return r.GetName() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Datacenter]{
			Noun: "datacenters", Help: "Datacenters of a region", Aliases: []string{"datacenter", "dc"},
			Owner:    kinds.RootTier,
			Validate: func(d *unyov1.Datacenter, _ time.Time) error { return inventory.ValidateDatacenter(d) },
			Refs:     inventory.RefsDatacenter,
			Columns: []kinds.TypedColumn[*unyov1.Datacenter]{
				{Header: "NAME", Cell: func(d *unyov1.Datacenter, _ time.Time) string { return d.GetName() }},
				{Header: "REGION", Cell: func(d *unyov1.Datacenter, _ time.Time) string { return d.GetSpec().GetRegion() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Floor]{
			Noun: "floors", Help: "Floors of a datacenter", Aliases: []string{"floor"},
			Owner:    kinds.RootTier,
			Validate: func(f *unyov1.Floor, _ time.Time) error { return inventory.ValidateFloor(f) },
			Refs:     inventory.RefsFloor,
			Columns: []kinds.TypedColumn[*unyov1.Floor]{
				{Header: "NAME", Cell: func(f *unyov1.Floor, _ time.Time) string { return f.GetName() }},
				{Header: "DATACENTER", Cell: func(f *unyov1.Floor, _ time.Time) string { return f.GetSpec().GetDatacenter() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Rack]{
			Noun: "racks", Help: "Racks of a floor", Aliases: []string{"rack"},
			Owner:    kinds.RootTier,
			Validate: func(r *unyov1.Rack, _ time.Time) error { return inventory.ValidateRack(r) },
			Refs:     inventory.RefsRack,
			Rules:    inventory.RulesRack,
			Prepare: func(r *unyov1.Rack) {
				if r.GetSpec().GetUnits() == 0 {
					if r.Spec == nil {
						r.Spec = &unyov1.RackSpec{}
					}
					r.Spec.Units = inventory.DefaultUnits
				}
			},
			Columns: []kinds.TypedColumn[*unyov1.Rack]{
				{Header: "NAME", Cell: func(r *unyov1.Rack, _ time.Time) string { return r.GetName() }},
				{Header: "FLOOR", Cell: func(r *unyov1.Rack, _ time.Time) string { return r.GetSpec().GetFloor() }},
				{Header: "UNITS", Cell: func(r *unyov1.Rack, _ time.Time) string { return fmt.Sprint(r.GetSpec().GetUnits()) }},
				{Header: "ZONE", Cell: func(r *unyov1.Rack, _ time.Time) string { return r.GetSpec().GetZone() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.PhysicalResource]{
			Noun: "resources", Help: "Physical resources: servers, switches, routers, PDUs",
			Aliases:  []string{"resource", "physicalresource"},
			Owner:    kinds.RootTier,
			Validate: func(p *unyov1.PhysicalResource, _ time.Time) error { return inventory.ValidateResource(p) },
			Refs:     inventory.RefsResource,
			Rules:    inventory.RulesResource,
			Columns: []kinds.TypedColumn[*unyov1.PhysicalResource]{
				{Header: "NAME", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return p.GetName() }},
				{Header: "KIND", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return p.GetSpec().GetKind() }},
				{Header: "RACK", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return p.GetSpec().GetRack() }},
				{Header: "UNIT", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return fmt.Sprint(p.GetSpec().GetUnit()) }},
				{Header: "ROLE", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return p.GetSpec().GetRole() }},
				{Header: "CONTRACT ENDS", Cell: func(p *unyov1.PhysicalResource, _ time.Time) string { return p.GetSpec().GetContractEnds() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Cluster]{
			// The noun is the hand-written `unyo clusters` (cmd/unyo), which
			// shows registrations and these attributes together.
			Noun: "clusters", Help: "Clusters: registration (unyo clusters add) and attributes (kind Cluster)",
			Owner:    kinds.RootTier,
			Validate: func(c *unyov1.Cluster, _ time.Time) error { return inventory.ValidateCluster(c) },
			Refs:     inventory.RefsCluster,
			Columns: []kinds.TypedColumn[*unyov1.Cluster]{
				{Header: "NAME", Cell: func(c *unyov1.Cluster, _ time.Time) string { return c.GetName() }},
				{Header: "REGION", Cell: func(c *unyov1.Cluster, _ time.Time) string { return c.GetSpec().GetRegion() }},
				{Header: "DATACENTER", Cell: func(c *unyov1.Cluster, _ time.Time) string { return c.GetSpec().GetDatacenter() }},
				{Header: "WEIGHT", Cell: func(c *unyov1.Cluster, _ time.Time) string { return fmt.Sprint(max(c.GetSpec().GetWeight(), 1)) }},
			},
		}),
	}
}
