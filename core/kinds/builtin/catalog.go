package builtin

import (
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// catalog is what resources are made of (DESIGN.md, "Catalog"); root owns
// it.
func catalog() []kinds.Kind {
	return []kinds.Kind{
		kinds.Define(kinds.Spec[*unyov1.Flavor]{
			Noun: "flavors", Help: "Flavors: the size and price of a compute", Aliases: []string{"flavor"},
			Owner: kinds.RootTier,
			Columns: []kinds.TypedColumn[*unyov1.Flavor]{
				{Header: "NAME", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetName() }},
				{Header: "KIND", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetSpec().GetKind() }},
				{Header: "VCPUS", Cell: func(f *unyov1.Flavor, _ time.Time) string { return fmt.Sprint(f.GetSpec().GetVcpus()) }},
				{Header: "MEMORY", Cell: func(f *unyov1.Flavor, _ time.Time) string { return f.GetSpec().GetMemory() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Image]{
			Noun: "images", Help: "Images: VM disks and container images", Aliases: []string{"image"},
			Owner: kinds.RootTier,
			Columns: []kinds.TypedColumn[*unyov1.Image]{
				{Header: "NAME", Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetName() }},
				{Header: "KIND", Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetSpec().GetKind() }},
				{Header: "SOURCE", Width: 40, Cell: func(i *unyov1.Image, _ time.Time) string { return i.GetSpec().GetSource() }},
			},
		}),
		kinds.Define(kinds.Spec[*unyov1.Network]{
			Noun: "networks", Help: "Networks and their address management", Aliases: []string{"network", "net"},
			Owner: kinds.RootTier,
			Columns: []kinds.TypedColumn[*unyov1.Network]{
				{Header: "NAME", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetName() }},
				{Header: "CIDR", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetSpec().GetCidr() }},
				{Header: "SCOPE", Cell: func(n *unyov1.Network, _ time.Time) string { return n.GetSpec().GetScope() }},
			},
		}),
	}
}
