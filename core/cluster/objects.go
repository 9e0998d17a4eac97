package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/store"
)

// nodeService answers operators' node reads.
type nodeService struct{ c *Cluster }

func (s *nodeService) ListNodes(ctx context.Context, req *connect.Request[unyov1.ListNodesRequest]) (*connect.Response[unyov1.ListNodesResponse], error) {
	if req.Msg.GetCluster() != "" && req.Msg.GetCluster() != s.c.opts.Name {
		return connect.NewResponse(&unyov1.ListNodesResponse{}), nil
	}
	nodes, err := s.c.store.ListNodes(ctx)
	if err != nil {
		return nil, internal(fmt.Errorf("list nodes: %w", err))
	}
	for _, n := range nodes {
		s.c.withEffectiveAuto(n)
	}
	return connect.NewResponse(&unyov1.ListNodesResponse{Nodes: nodes}), nil
}

func (s *nodeService) GetNode(ctx context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	if err := required("name", req.Msg.GetName()); err != nil {
		return nil, err
	}
	n, err := s.c.store.GetNode(ctx, req.Msg.GetName())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in cluster %q", req.Msg.GetName(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get node %q: %w", req.Msg.GetName(), err))
	}
	s.c.withEffectiveAuto(n)
	return connect.NewResponse(&unyov1.GetNodeResponse{Nodes: []*unyov1.Node{n}}), nil
}

// eventService answers operators' event reads.
type eventService struct{ c *Cluster }

func (s *eventService) ListEvents(ctx context.Context, req *connect.Request[unyov1.ListEventsRequest]) (*connect.Response[unyov1.ListEventsResponse], error) {
	m := req.Msg
	if err := limits.ListLimit("limit", m.GetLimit()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if m.GetCluster() != "" && m.GetCluster() != s.c.opts.Name {
		return connect.NewResponse(&unyov1.ListEventsResponse{}), nil
	}
	events, err := s.c.store.ListEvents(ctx, store.EventFilter{
		Node: m.GetNode(), Check: m.GetCheck(), Levels: m.GetLevels(), History: m.GetHistory(), Limit: int(m.GetLimit()),
	})
	if err != nil {
		return nil, internal(fmt.Errorf("list events: %w", err))
	}
	if !m.GetHistory() {
		if err := s.markStale(ctx, events); err != nil {
			return nil, internal(fmt.Errorf("list events: %w", err))
		}
	}
	return connect.NewResponse(&unyov1.ListEventsResponse{Events: events}), nil
}

// markStale marks the latest results of nodes that are Stale or Down: no
// result arrives from them, so an OK there is only the last thing known,
// not the node's state now.
func (s *eventService) markStale(ctx context.Context, events []*unyov1.Event) error {
	if len(events) == 0 {
		return nil
	}
	nodes, err := s.c.store.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("read node states: %w", err)
	}
	why := map[string]string{}
	for _, n := range nodes {
		switch n.GetState() {
		case unyov1.NodeState_NODE_STATE_STALE, unyov1.NodeState_NODE_STATE_DOWN:
			why[n.GetName()] = fmt.Sprintf("node %s is %s: its results stopped arriving", n.GetName(), n.GetState().DisplayName())
		}
	}
	for _, e := range events {
		if e.GetCheck() != ingest.LivenessCheck {
			e.Stale = why[e.GetNode()]
		}
	}
	return nil
}

func (s *eventService) GetEvent(ctx context.Context, req *connect.Request[unyov1.GetEventRequest]) (*connect.Response[unyov1.GetEventResponse], error) {
	if err := required("id", req.Msg.GetId()); err != nil {
		return nil, err
	}
	e, err := s.c.store.GetEvent(ctx, req.Msg.GetId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("event %q not found in cluster %q", req.Msg.GetId(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get event %q: %w", req.Msg.GetId(), err))
	}
	return connect.NewResponse(&unyov1.GetEventResponse{Events: []*unyov1.Event{e}}), nil
}

// statusService tells who this server is and which leases it holds.
type statusService struct{ c *Cluster }

func (s *statusService) GetStatus(ctx context.Context, _ *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	resp := &unyov1.GetStatusResponse{
		Role: "cluster", Version: s.c.opts.Version, Cluster: s.c.opts.Name,
		Replica: s.c.opts.Replica, StartedAt: timestamppb.New(s.c.started),
	}
	if s.c.lease.Held() {
		resp.Leases = append(resp.Leases, s.c.lease.Name)
	}
	sort.Strings(resp.Leases)
	resp.Plugins = s.c.pluginStatus()
	resp.Health = s.c.health(ctx)
	return connect.NewResponse(resp), nil
}
