package builtin

import (
	"fmt"
	"strconv"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	cat "github.com/unyo-ops/unyo/provision/catalog"
)

// catalog is what resources are made of (DESIGN.md, "Catalog"); root owns
// it. Validation is provision/catalog's; a Network's overlaps with other
// networks are checked by root against its store, and its usage is filled
// in by root on reads from IPAM.
func catalog() []kinds.Kind {
	return []kinds.Kind{
		kinds.Define(kinds.Spec[*unyov1.Flavor]{
			Noun: "flavors", Help: "Flavors: the size and price of a compute", Aliases: []string{"flavor"},
			Owner:    kinds.RootTier,
			Validate: func(f *unyov1.Flavor, _ time.Time) error { return cat.Flavor(f) },
			Columns: []kinds.TypedColumn[*unyov1.Flavor]{
				{Header: "NAME", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetName() }},
				{Header: "KIND", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetSpec().GetKind() }},
				{Header: "VCPUS", Cell: func(f *unyov1.Flavor, _ time.Time) string {
					v := fmt.Sprint(f.GetSpec().GetVcpus())
					if f.GetSpec().GetCpuPolicy() == "pinned" {
						v += " pinned"
					}
					return v
				}},
				{Header: "MEMORY", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetSpec().GetMemory() }},
				{Header: "DISK", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetSpec().GetDisk() }},
				{Header: "PRICE", Cell: func(f *unyov1.Flavor, _ time.Time) string {
					p := strconv.FormatFloat(f.GetSpec().GetPricePerHour(), 'f', -1, 64) + "/h"
					if n := len(f.GetSpec().GetModelPrices()); n > 0 {
						p += fmt.Sprintf(" (+%d models)", n)
					}
					return p
				}},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Image]{
			Noun: "images", Help: "Images: VM disks and container images", Aliases: []string{"image"},
			Owner:    kinds.RootTier,
			Validate: func(i *unyov1.Image, _ time.Time) error { return cat.Image(i) },
			Columns: []kinds.TypedColumn[*unyov1.Image]{
				{Header: "NAME", Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetName() }},
				{Header: "KIND", Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetSpec().GetKind() }},
				{Header: "FORMAT", Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetSpec().GetFormat() }},
				{Header: "SOURCE", Width: 40, Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetSpec().GetSource() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Network]{
			Noun: "networks", Help: "Networks and their address management", Aliases: []string{"network", "net"},
			Owner:    kinds.RootTier,
			Validate: func(n *unyov1.Network, _ time.Time) error { return cat.Network(n) },
			// Usage is IPAM's, filled in on reads; a document read back
			// from `get -o yaml` carries it, and it is never stored.
			Prepare: func(n *unyov1.Network) { n.Usage = nil },
			Columns: []kinds.TypedColumn[*unyov1.Network]{
				{Header: "NAME", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetName() }},
				{Header: "CIDR", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetSpec().GetCidr() }},
				{Header: "GATEWAY", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetSpec().GetGateway() }},
				{Header: "SCOPE", Cell: func(n *unyov1.Network, _ time.Time) string { return networkScope(n.GetSpec()) }},
				{Header: "USED", Cell: func(n *unyov1.Network, _ time.Time) string { return usageCell(n, n.GetUsage().GetUsed()) }},
				{Header: "FREE", Cell: func(n *unyov1.Network, _ time.Time) string { return usageCell(n, n.GetUsage().GetFree()) }},
			},
		}),
	}
}

// networkScope is "region tokyo", "cluster c1" or "node".
func networkScope(s *unyov1.NetworkSpec) string {
	switch s.GetScope() {
	case cat.ScopeRegion:
		return "region " + s.GetRegion()
	case cat.ScopeCluster:
		return "cluster " + s.GetCluster()
	}
	return s.GetScope()
}

func usageCell(n *unyov1.Network, v int64) string {
	if n.GetUsage() == nil {
		return ""
	}
	return fmt.Sprint(v)
}
