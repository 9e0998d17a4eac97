package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/topology"
)

// SetNodeTopology records where root's inventory says nodes sit. Root calls
// it when a node registers, when the inventory changes, and on its periodic
// pass; nodes this cluster does not have are skipped (root learns of them
// with its next pass).
func (s *nodeService) SetNodeTopology(ctx context.Context, req *connect.Request[unyov1.SetNodeTopologyRequest]) (*connect.Response[unyov1.SetNodeTopologyResponse], error) {
	if p := server.PrincipalFrom(ctx); !p.InCluster(s.c.opts.Name) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not set the topology of nodes of cluster %q", p, s.c.opts.Name))
	}
	for i, t := range req.Msg.GetNodes() {
		if err := validTopology(fmt.Sprintf("nodes[%d]", i), t); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
	}
	resp := &unyov1.SetNodeTopologyResponse{}
	for _, t := range req.Msg.GetNodes() {
		changed, err := s.c.store.SetNodeTopology(ctx, t.GetNode(), t)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		if !changed {
			continue
		}
		resp.Changed = append(resp.Changed, t.GetNode())
		// The node's cached copy gives heartbeats and results its labels.
		if n, err := s.c.store.GetNode(ctx, t.GetNode()); err == nil {
			s.c.remember(n)
		}
		s.c.log.Info("node topology changed", "node", t.GetNode(), "resource", t.GetResource(), "labels", t.GetLabels(), "reason", t.GetReason())
	}
	return connect.NewResponse(resp), nil
}

func validTopology(field string, t *unyov1.NodeTopology) error {
	if err := validate.Name(t.GetNode()); err != nil {
		return fmt.Errorf("%s.node: %w", field, err)
	}
	if t.GetResource() != "" {
		if err := validate.Name(t.GetResource()); err != nil {
			return fmt.Errorf("%s.resource: %w", field, err)
		}
	}
	if err := limits.Labels(field+".labels", t.GetLabels()); err != nil {
		return err
	}
	for k := range t.GetLabels() {
		if !topology.IsTopologyLabel(k) {
			return fmt.Errorf("%s.labels: %q is not a topology label (%s*)", field, k, topology.Prefix)
		}
	}
	return limits.Text(field+".reason", t.GetReason(), limits.MaxText)
}

// checksRevisionFor is the checks revision a node's agent is told: the
// revision of the checks, changed also when the node's topology labels
// change, since check selectors may select by them. The agent only
// compares it for equality.
func checksRevisionFor(rev int64, n *unyov1.Node) int64 {
	labels := n.GetTopologyLabels()
	if len(labels) == 0 {
		return rev
	}
	h := fnv.New32a()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(h, "%s=%s\n", k, labels[k])
	}
	return rev ^ int64(h.Sum32())<<32
}

// topologyRefresh is how often a replica checks whether the nodes'
// topology changed: root records it through one replica, and the others
// answer heartbeats and take results from the nodes they keep in memory.
const topologyRefresh = 10 * time.Second

// topologyRefresher keeps the nodes a replica remembers up to date with
// the topology root records through any replica. Every topologyRefresh it
// reads the store's topology generation, one row, and reads the nodes only
// when that moved: at 10,000 nodes reading them all every 10 s was a
// tenth of a heartbeating cluster's CPU, for a topology that changes when
// root's inventory does.
//
// The nodes are also read every topologyFullRefresh whatever the
// generation says: a replica that read a node (to answer its first
// heartbeat) just before a change and remembered it just after a refresh
// would otherwise keep the old topology until the next change.
type topologyRefresher struct {
	c *Cluster
	// seen is the generation the remembered nodes are up to date with,
	// valid once read is set; passes counts refreshes since the nodes were
	// last read.
	seen   int64
	read   bool
	passes int
}

// topologyFullRefresh is how many refreshes may pass without reading the
// nodes (5 minutes).
const topologyFullRefresh = 30

func (r *topologyRefresher) Run(ctx context.Context) { every(ctx, topologyRefresh, r.refresh) }

// refresh replaces the remembered nodes whose resource or topology labels
// changed in the store since the last refresh.
func (r *topologyRefresher) refresh(ctx context.Context) {
	c := r.c
	gen, err := c.store.NodeTopologyGeneration(ctx)
	if r.passes++; err == nil && r.read && gen == r.seen && r.passes < topologyFullRefresh {
		return
	}
	// Read before the nodes: a change committed in between moves the
	// generation again, and the next refresh reads the nodes again.
	var nodes []*unyov1.Node
	if err == nil {
		nodes, err = c.store.ListNodes(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("reading the nodes' topology failed; will retry", "err", err)
		}
		return
	}
	c.knownMu.Lock()
	defer c.knownMu.Unlock()
	for _, n := range nodes {
		k, ok := c.known[n.GetName()]
		if ok && (k.GetResource() != n.GetResource() || !maps.Equal(k.GetTopologyLabels(), n.GetTopologyLabels())) {
			c.known[n.GetName()] = n
		}
	}
	r.seen, r.read, r.passes = gen, true, 0
}
