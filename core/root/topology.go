package root

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/provision/topology"
)

// Root derives where every node sits from its inventory (a node is one
// PhysicalResource: provision/topology) and records it in the node's
// cluster. It does so in the loop that brings clusters up to date with
// root's objects (globals.go): when a cluster registers (which a cluster
// does again when one of its nodes registers), every SyncInterval, and for
// every cluster when an inventory object is applied or deleted.

// inventoryKinds are the kinds a node's topology is derived from.
var inventoryKinds = [...]string{"PhysicalResource", "Rack", "Floor", "Datacenter"}

// isInventoryKind says whether applying or deleting an object of kind
// changes where nodes sit.
func isInventoryKind(kind string) bool {
	for _, k := range inventoryKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// inventoryChanged asks the sync loop to bring every cluster's node
// topology up to date soon.
func (r *Root) inventoryChanged() {
	select {
	case r.nudgeAll <- struct{}{}:
	default: // one is pending already
	}
}

// loadInventory reads root's inventory; nil when root never kept any, so
// that a root without an inventory leaves nodes alone.
func (r *Root) loadInventory(ctx context.Context) (*topology.Inventory, error) {
	if rev, err := r.store.ObjectsRevision(ctx, inventoryKinds[:]...); err != nil || rev == 0 {
		return nil, err
	}
	var (
		resources   []*unyov1.PhysicalResource
		racks       []*unyov1.Rack
		floors      []*unyov1.Floor
		datacenters []*unyov1.Datacenter
	)
	for _, k := range inventoryKinds {
		objs, err := r.store.ListObjects(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("list root's %s objects: %w", k, err)
		}
		for _, o := range objs {
			switch m := o.GetKind().(type) {
			case *unyov1.Object_PhysicalResource:
				resources = append(resources, m.PhysicalResource)
			case *unyov1.Object_Rack:
				racks = append(racks, m.Rack)
			case *unyov1.Object_Floor:
				floors = append(floors, m.Floor)
			case *unyov1.Object_Datacenter:
				datacenters = append(datacenters, m.Datacenter)
			}
		}
	}
	return topology.NewInventory(resources, racks, floors, datacenters), nil
}

// syncTopology records in a cluster where each of its nodes sits, sending
// only the nodes whose resource or labels differ from what the cluster has.
func (r *Root) syncTopology(ctx context.Context, name string, cl *client.Clients) error {
	inv, err := r.loadInventory(ctx)
	if err != nil || inv == nil {
		return err
	}
	resp, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: name}))
	if err != nil {
		return fmt.Errorf("list the cluster's nodes: %w", err)
	}
	ids := map[string]topology.Identity{}
	for _, n := range resp.Msg.GetNodes() {
		ids[n.GetName()] = topology.NodeIdentity(n)
	}
	derived := inv.DeriveAll(ids)
	var set []*unyov1.NodeTopology
	for _, n := range resp.Msg.GetNodes() {
		res := derived[n.GetName()]
		if topology.Same(n, res) {
			continue
		}
		set = append(set, &unyov1.NodeTopology{Node: n.GetName(), Resource: res.Resource, Labels: res.Labels, Reason: res.Reason})
	}
	if len(set) == 0 {
		return nil
	}
	out, err := cl.Nodes.SetNodeTopology(ctx, connect.NewRequest(&unyov1.SetNodeTopologyRequest{Nodes: set}))
	if err != nil {
		return fmt.Errorf("set the topology of %d nodes: %w", len(set), err)
	}
	for _, node := range out.Msg.GetChanged() {
		r.log.Info("recorded a node's topology in its cluster", "cluster", name, "node", node)
	}
	return nil
}

// SetNodeTopology is the clusters' to answer: root derives node topology
// from its inventory itself.
func (s *nodeService) SetNodeTopology(context.Context, *connect.Request[unyov1.SetNodeTopologyRequest]) (*connect.Response[unyov1.SetNodeTopologyResponse], error) {
	return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("root derives where nodes sit from its inventory and records it in their clusters; apply PhysicalResource, Rack, Floor and Datacenter objects instead"))
}
