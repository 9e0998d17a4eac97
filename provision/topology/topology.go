// Package topology says where a node sits: which PhysicalResource of root's
// inventory it is, and the topology.unyo.dev/* labels that follow from that
// resource's rack, floor, datacenter and region. It is pure: root gives it
// the inventory and the nodes, and pushes the answers to the clusters.
package topology

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Prefix starts every topology label; the keys under it are root's alone.
const Prefix = "topology.unyo.dev/"

// The topology labels a node can carry.
const (
	LabelRegion     = Prefix + "region"
	LabelDatacenter = Prefix + "datacenter"
	LabelFloor      = Prefix + "floor"
	LabelRack       = Prefix + "rack"
	LabelPower      = Prefix + "power"   // the rack's power zone
	LabelNetwork    = Prefix + "network" // the rack's network zone
	LabelZone       = Prefix + "zone"    // the rack's logical availability zone
	// LabelModel is the PhysicalResource's machine model: not a place, but
	// root knows it from the same match, and billing prices by it.
	LabelModel = Prefix + "model"
)

// IsTopologyLabel says whether a label key is one only root may set.
func IsTopologyLabel(key string) bool { return strings.HasPrefix(key, Prefix) }

// Identity is what a node offers to be matched by, strongest first.
type Identity struct {
	// Resource is the agent's configured resource name (agent.resource).
	Resource string
	// Hostname is the machine's name (the node's name when it reported
	// none).
	Hostname string
	// Serial is the machine's serial number, when readable.
	Serial string
}

// NodeIdentity is the identity a registered node reported.
func NodeIdentity(n *unyov1.Node) Identity {
	id := Identity{Resource: n.GetAgentResource(), Hostname: n.GetHostname(), Serial: n.GetSerial()}
	if id.Hostname == "" {
		id.Hostname = n.GetName()
	}
	return id
}

// Result is where one node sits.
type Result struct {
	// Resource is the PhysicalResource the node is; "" when none matched.
	Resource string
	// Labels are the node's topology labels; nil without a resource.
	Labels map[string]string
	// Reason says, when Resource is "", why nothing matched.
	Reason string
}

// Inventory indexes root's inventory for matching and deriving labels.
type Inventory struct {
	resources   map[string]*unyov1.PhysicalResource
	byHostname  map[string][]string // resource names, sorted
	bySerial    map[string][]string
	racks       map[string]*unyov1.Rack
	floors      map[string]*unyov1.Floor
	datacenters map[string]*unyov1.Datacenter
}

// NewInventory indexes the inventory objects. A resource is found by
// hostname under its name and under its spec.hostname.
func NewInventory(resources []*unyov1.PhysicalResource, racks []*unyov1.Rack, floors []*unyov1.Floor, datacenters []*unyov1.Datacenter) *Inventory {
	inv := &Inventory{
		resources: map[string]*unyov1.PhysicalResource{}, byHostname: map[string][]string{}, bySerial: map[string][]string{},
		racks: map[string]*unyov1.Rack{}, floors: map[string]*unyov1.Floor{}, datacenters: map[string]*unyov1.Datacenter{},
	}
	add := func(idx map[string][]string, key, name string) {
		if key != "" && !slices.Contains(idx[key], name) {
			idx[key] = append(idx[key], name)
			slices.Sort(idx[key])
		}
	}
	for _, r := range resources {
		inv.resources[r.GetName()] = r
		add(inv.byHostname, strings.ToLower(r.GetName()), r.GetName())
		add(inv.byHostname, strings.ToLower(r.GetSpec().GetHostname()), r.GetName())
		add(inv.bySerial, r.GetSpec().GetSerial(), r.GetName())
	}
	for _, r := range racks {
		inv.racks[r.GetName()] = r
	}
	for _, f := range floors {
		inv.floors[f.GetName()] = f
	}
	for _, d := range datacenters {
		inv.datacenters[d.GetName()] = d
	}
	return inv
}

// Derive finds the resource a node is and its topology labels: by the
// configured resource name when there is one (and only by it: an operator
// who named the resource does not want a guess), else by hostname, else by
// serial number. A hostname or serial shared by several resources matches
// none of them, and the reason names them.
func (inv *Inventory) Derive(id Identity) Result {
	if id.Resource != "" {
		if _, ok := inv.resources[id.Resource]; !ok {
			return Result{Reason: fmt.Sprintf("agent.resource is %q, which the inventory has no PhysicalResource of", id.Resource)}
		}
		return inv.result(id.Resource)
	}
	var why []string
	for _, by := range []struct {
		what, key string
		idx       map[string][]string
	}{
		{"hostname", strings.ToLower(id.Hostname), inv.byHostname},
		{"serial number", id.Serial, inv.bySerial},
	} {
		if by.key == "" {
			continue
		}
		switch names := by.idx[by.key]; len(names) {
		case 0:
			why = append(why, fmt.Sprintf("no PhysicalResource has %s %q", by.what, by.key))
		case 1:
			return inv.result(names[0])
		default:
			why = append(why, fmt.Sprintf("%s %q is ambiguous: PhysicalResources %s all have it", by.what, by.key, strings.Join(names, ", ")))
		}
	}
	if len(why) == 0 {
		return Result{Reason: "the node reported no resource name, hostname or serial number"}
	}
	return Result{Reason: strings.Join(why, "; ")}
}

// DeriveAll derives where each of a set of nodes sits (node name ->
// identity). A resource is one node: when several nodes match the same
// resource, none of them gets it, and the reason names them all.
func (inv *Inventory) DeriveAll(nodes map[string]Identity) map[string]Result {
	out := make(map[string]Result, len(nodes))
	claims := map[string][]string{} // resource -> node names
	for name, id := range nodes {
		r := inv.Derive(id)
		out[name] = r
		if r.Resource != "" {
			claims[r.Resource] = append(claims[r.Resource], name)
		}
	}
	for resource, names := range claims {
		if len(names) < 2 {
			continue
		}
		slices.Sort(names)
		for _, n := range names {
			out[n] = Result{Reason: fmt.Sprintf("PhysicalResource %q matches several nodes (%s); set agent.resource on each", resource, strings.Join(names, ", "))}
		}
	}
	return out
}

// result is the match of a known resource: its labels follow its rack up
// to the region; links the inventory lacks leave their labels out.
func (inv *Inventory) result(name string) Result {
	res := Result{Resource: name, Labels: map[string]string{}}
	set := func(k, v string) {
		if v != "" {
			res.Labels[k] = v
		}
	}
	set(LabelModel, inv.resources[name].GetSpec().GetModel())
	rack, ok := inv.racks[inv.resources[name].GetSpec().GetRack()]
	if !ok {
		return res
	}
	set(LabelRack, rack.GetName())
	set(LabelPower, rack.GetSpec().GetPowerZone())
	set(LabelNetwork, rack.GetSpec().GetNetworkZone())
	set(LabelZone, rack.GetSpec().GetZone())
	floor, ok := inv.floors[rack.GetSpec().GetFloor()]
	if !ok {
		return res
	}
	set(LabelFloor, floor.GetName())
	dc, ok := inv.datacenters[floor.GetSpec().GetDatacenter()]
	if !ok {
		return res
	}
	set(LabelDatacenter, dc.GetName())
	set(LabelRegion, dc.GetSpec().GetRegion())
	return res
}

// Same says whether a node already holds what r says.
func Same(n *unyov1.Node, r Result) bool {
	return n.GetResource() == r.Resource && n.GetTopologyReason() == r.Reason &&
		maps.Equal(n.GetTopologyLabels(), r.Labels)
}

// NodeLabels are the labels a node is selected and its events labelled by:
// the agent's own labels, with the topology labels root derived laid over
// them (an agent's label under the topology prefix never counts).
func NodeLabels(n *unyov1.Node) map[string]string {
	if len(n.GetTopologyLabels()) == 0 {
		return n.GetLabels()
	}
	out := make(map[string]string, len(n.GetLabels())+len(n.GetTopologyLabels()))
	for k, v := range n.GetLabels() {
		if !IsTopologyLabel(k) {
			out[k] = v
		}
	}
	maps.Copy(out, n.GetTopologyLabels())
	return out
}
