package web

import (
	"bytes"
	"net/http"
	"net/url"
	"sort"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/diagram"
)

// fleetState is what the diagrams colour resources by: each resource's
// node (from the nodes' inventory entries) and that node's worst open
// alert.
type fleetState struct {
	nodes map[string]*unyov1.Node // by resource
	worst map[string]string       // "cluster/node" -> state class
}

func (c *Console) fleet(r *http.Request, q *request, cluster string) (fleetState, []*unyov1.Node, []string) {
	fs := fleetState{nodes: map[string]*unyov1.Node{}, worst: map[string]string{}}
	var errs []string
	var nodes []*unyov1.Node
	if resp, err := q.api.nodes.ListNodes(r.Context(), connect.NewRequest(&unyov1.ListNodesRequest{Cluster: cluster})); err != nil {
		errs = append(errs, "nodes: "+message(err))
	} else {
		errs = append(errs, clusterErrors(resp.Msg.GetClusterErrors())...)
		nodes = resp.Msg.GetNodes()
		for _, n := range nodes {
			if n.GetResource() != "" {
				fs.nodes[n.GetResource()] = n
			}
		}
	}
	if resp, err := q.api.alerts.ListAlerts(r.Context(), connect.NewRequest(&unyov1.ListAlertsRequest{Cluster: cluster, Limit: 10000})); err != nil {
		errs = append(errs, "alerts: "+message(err))
	} else {
		rank := map[string]unyov1.AlertLevel{}
		for _, a := range resp.Msg.GetAlerts() {
			if a.GetState() == unyov1.AlertState_ALERT_STATE_RESOLVED || a.GetState() == unyov1.AlertState_ALERT_STATE_CLOSED {
				continue
			}
			k := a.GetCluster() + "/" + a.GetNode()
			if a.GetLevel() > rank[k] {
				rank[k] = a.GetLevel()
				fs.worst[k] = a.GetLevel().Name()
			}
		}
	}
	return fs, nodes, errs
}

// decorate gives a resource the state of its node and a link to it (or,
// for a resource that is no node, to its network).
func (fs fleetState) decorate(resource string) (state, href string) {
	n, ok := fs.nodes[resource]
	if !ok {
		return "", "/networks?" + url.Values{"from": {resource}}.Encode()
	}
	state = "ok"
	if w := fs.worst[n.GetCluster()+"/"+n.GetName()]; w != "" {
		state = w
	}
	if n.GetState() != unyov1.NodeState_NODE_STATE_READY {
		state = "down"
	}
	return state, "/node?" + url.Values{"name": {n.GetName()}, "cluster": {n.GetCluster()}}.Encode()
}

func (c *Console) inventory(r *http.Request, q *request, kinds ...string) (diagram.Inventory, []string, error) {
	var objs []*unyov1.Object
	var errs []string
	for _, k := range kinds {
		o, e, err := c.listObjects(r, q, k, "")
		if err != nil {
			return diagram.Inventory{}, nil, err
		}
		objs = append(objs, o...)
		errs = append(errs, e...)
	}
	return diagram.FromObjects(objs), errs, nil
}

// racksPage draws a floor's rack elevation or a cluster's virtual rack
// view with the layout of `unyo racks diagram`, each resource coloured
// by its node's alerts and linked to it.
func (c *Console) racksPage(w http.ResponseWriter, r *http.Request, q *request) {
	floor, cluster := r.URL.Query().Get("floor"), r.URL.Query().Get("cluster")
	inv, errs, err := c.inventory(r, q, "Floor", "Rack", "PhysicalResource")
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	floors := map[string]bool{}
	for _, f := range inv.Floors {
		floors[f.GetName()] = true
	}
	for _, rk := range inv.Racks {
		if f := rk.GetSpec().GetFloor(); f != "" {
			floors[f] = true
		}
	}
	d := map[string]any{"Floor": floor, "Cluster": cluster, "Floors": sortedKeys(floors)}
	if cl, err := q.api.clusters.ListClusters(r.Context(), connect.NewRequest(&unyov1.ListClustersRequest{})); err == nil {
		var names []string
		for _, ci := range cl.Msg.GetClusters() {
			names = append(names, ci.GetName())
		}
		d["Clusters"] = names
	}
	if floor != "" || cluster != "" {
		fs, nodes, ferrs := c.fleet(r, q, cluster)
		errs = append(errs, ferrs...)
		// Each server lists the computes it runs: in its box (the count
		// and names, all of them in its title) and in the table under the
		// drawing, linked to their services.
		cs, cerrs, err := c.computes(r, q)
		if err != nil {
			errs = append(errs, "computes: "+message(err))
		}
		errs = append(errs, cerrs...)
		on := computesOn(cs)
		opt := diagram.RackOptions{Children: func(resource string) []diagram.Child {
			n, ok := fs.nodes[resource]
			if !ok {
				return nil
			}
			var out []diagram.Child
			for _, cp := range on[n.GetCluster()+"/"+n.GetName()] {
				out = append(out, diagram.Child{Name: cp.GetName(), Kind: "Compute"})
			}
			return out
		}}
		var v *diagram.Racks
		if cluster != "" {
			v = diagram.ClusterRacks(inv, cluster, nodes, opt)
		} else if v, err = diagram.FloorRacks(inv, floor, opt); err != nil {
			errs = append(errs, err.Error())
		}
		if v != nil {
			for i := range v.Rows {
				for j := range v.Rows[i].Racks {
					for k := range v.Rows[i].Racks[j].Slots {
						if it := v.Rows[i].Racks[j].Slots[k].Item; it != nil {
							it.State, it.Href = fs.decorate(it.Name)
						}
					}
				}
			}
			var b bytes.Buffer
			if err := diagram.RacksSVG(&b, v); err != nil {
				errs = append(errs, err.Error())
			}
			d["SVG"] = b.String()
			d["Placed"] = placedIn(v, fs, on)
			d["Apart"] = v.Apart
			d["Notes"] = v.Notes
		}
	}
	c.render(w, r, q, "racks.html", "Racks", "racks", d, errs)
}

// networksPage draws a resource's network from its links, each resource
// linked through to itself.
func (c *Console) networksPage(w http.ResponseWriter, r *http.Request, q *request) {
	from := r.URL.Query().Get("from")
	inv, errs, err := c.inventory(r, q, "PhysicalResource", "Network")
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	var names []string
	for _, p := range inv.Resources {
		names = append(names, p.GetName())
	}
	sort.Strings(names)
	d := map[string]any{"From": from, "Resources": names}
	if from != "" {
		n, err := diagram.NetworkFrom(inv, from)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			fs, _, ferrs := c.fleet(r, q, "")
			errs = append(errs, ferrs...)
			for i := range n.Tiers {
				for j := range n.Tiers[i].Nodes {
					nd := &n.Tiers[i].Nodes[j]
					nd.State, nd.Href = fs.decorate(nd.Name)
					if _, isNode := fs.nodes[nd.Name]; !isNode && nd.Name == from {
						nd.Href = ""
					}
				}
			}
			var b bytes.Buffer
			if err := diagram.NetworkSVG(&b, n); err != nil {
				errs = append(errs, err.Error())
			}
			d["SVG"] = b.String()
		}
	}
	c.render(w, r, q, "networks.html", "Networks", "networks", d, errs)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// placement is a drawn server and the computes it runs.
type placement struct {
	Resource string
	Node     *unyov1.Node
	Computes []*unyov1.Compute
}

// placedIn lists the view's servers that run computes, in drawing order.
func placedIn(v *diagram.Racks, fs fleetState, on map[string][]*unyov1.Compute) []placement {
	var out []placement
	for _, row := range v.Rows {
		for _, rk := range row.Racks {
			for _, sl := range rk.Slots {
				if sl.Item == nil {
					continue
				}
				n, ok := fs.nodes[sl.Item.Name]
				if !ok {
					continue
				}
				if cs := on[n.GetCluster()+"/"+n.GetName()]; len(cs) > 0 {
					out = append(out, placement{Resource: sl.Item.Name, Node: n, Computes: cs})
				}
			}
		}
	}
	return out
}
