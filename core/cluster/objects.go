package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// objectService stores the objects operators apply to this cluster.
type objectService struct{ c *Cluster }

// ValidateObjects checks every object before anything is written, so an
// apply with one bad document changes nothing. Root and cluster share it.
func ValidateObjects(objs []*unyov1.Object) error {
	var errs []string
	for i, o := range objs {
		switch k := o.GetKind().(type) {
		case *unyov1.Object_Check:
			if _, err := checks.Compile(k.Check); err != nil {
				errs = append(errs, fmt.Sprintf("objects[%d]: %v", i, err))
			}
		default:
			errs = append(errs, fmt.Sprintf("objects[%d]: no kind set", i))
		}
	}
	if len(errs) > 0 {
		return connect.NewError(connect.CodeInvalidArgument, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

func (s *objectService) ownCluster(name string) error {
	if name != "" && name != s.c.opts.Name {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cluster: %q is not this cluster (%q); send it to root or to that cluster", name, s.c.opts.Name))
	}
	return nil
}

func (s *objectService) Apply(ctx context.Context, req *connect.Request[unyov1.ApplyRequest]) (*connect.Response[unyov1.ApplyResponse], error) {
	objs := req.Msg.GetObjects()
	if err := ValidateObjects(objs); err != nil {
		return nil, err
	}
	resp := &unyov1.ApplyResponse{}
	for _, o := range objs {
		ch := o.GetCheck()
		if err := s.ownCluster(ch.GetCluster()); err != nil {
			return nil, err
		}
		ch.Cluster = s.c.opts.Name
		ch.Source = "central"
		res, err := s.c.store.PutCheck(ctx, ch)
		if err != nil {
			return nil, internal(fmt.Errorf("store Check %q: %w", ch.GetName(), err))
		}
		resp.Results = append(resp.Results, &unyov1.ApplyResult{
			Ref:    &unyov1.ObjectRef{Kind: "Check", Name: ch.GetName(), Cluster: s.c.opts.Name},
			Action: string(res),
		})
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(resp), nil
}

func checkKind(ref *unyov1.ObjectRef) error {
	if !strings.EqualFold(ref.GetKind(), "Check") {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind: unknown kind %q (known kinds: Check)", ref.GetKind()))
	}
	return nil
}

func (s *objectService) Delete(ctx context.Context, req *connect.Request[unyov1.DeleteRequest]) (*connect.Response[unyov1.DeleteResponse], error) {
	resp := &unyov1.DeleteResponse{}
	for _, ref := range req.Msg.GetRefs() {
		if err := checkKind(ref); err != nil {
			return nil, err
		}
		if err := s.ownCluster(ref.GetCluster()); err != nil {
			return nil, err
		}
		action := "deleted"
		err := s.c.store.DeleteCheck(ctx, ref.GetName())
		switch {
		case errors.Is(err, store.ErrNotFound):
			action = "not found"
		case err != nil:
			return nil, internal(fmt.Errorf("delete Check %q: %w", ref.GetName(), err))
		}
		resp.Results = append(resp.Results, &unyov1.ApplyResult{
			Ref:    &unyov1.ObjectRef{Kind: "Check", Name: ref.GetName(), Cluster: s.c.opts.Name},
			Action: action,
		})
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(resp), nil
}

func (s *objectService) Get(ctx context.Context, req *connect.Request[unyov1.GetRequest]) (*connect.Response[unyov1.GetResponse], error) {
	ref := req.Msg.GetRef()
	if err := checkKind(ref); err != nil {
		return nil, err
	}
	if err := s.ownCluster(ref.GetCluster()); err != nil {
		return nil, err
	}
	ch, err := s.c.store.GetCheck(ctx, ref.GetName())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("Check %q not found in cluster %q", ref.GetName(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get Check %q: %w", ref.GetName(), err))
	}
	return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{{Kind: &unyov1.Object_Check{Check: ch}}}}), nil
}

func (s *objectService) List(ctx context.Context, req *connect.Request[unyov1.ListRequest]) (*connect.Response[unyov1.ListResponse], error) {
	if err := checkKind(&unyov1.ObjectRef{Kind: req.Msg.GetKind()}); err != nil {
		return nil, err
	}
	if err := s.ownCluster(req.Msg.GetCluster()); err != nil {
		return nil, err
	}
	all, err := s.c.store.ListChecks(ctx)
	if err != nil {
		return nil, internal(fmt.Errorf("list checks: %w", err))
	}
	resp := &unyov1.ListResponse{}
	for _, ch := range all {
		resp.Objects = append(resp.Objects, &unyov1.Object{Kind: &unyov1.Object_Check{Check: ch}})
	}
	return connect.NewResponse(resp), nil
}

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
	return connect.NewResponse(&unyov1.ListNodesResponse{Nodes: nodes}), nil
}

func (s *nodeService) GetNode(ctx context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	n, err := s.c.store.GetNode(ctx, req.Msg.GetName())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in cluster %q", req.Msg.GetName(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get node %q: %w", req.Msg.GetName(), err))
	}
	return connect.NewResponse(&unyov1.GetNodeResponse{Nodes: []*unyov1.Node{n}}), nil
}

// eventService answers operators' event reads.
type eventService struct{ c *Cluster }

func (s *eventService) ListEvents(ctx context.Context, req *connect.Request[unyov1.ListEventsRequest]) (*connect.Response[unyov1.ListEventsResponse], error) {
	m := req.Msg
	if m.GetCluster() != "" && m.GetCluster() != s.c.opts.Name {
		return connect.NewResponse(&unyov1.ListEventsResponse{}), nil
	}
	events, err := s.c.store.ListEvents(ctx, store.EventFilter{
		Node: m.GetNode(), Check: m.GetCheck(), Levels: m.GetLevels(), History: m.GetHistory(), Limit: int(m.GetLimit()),
	})
	if err != nil {
		return nil, internal(fmt.Errorf("list events: %w", err))
	}
	return connect.NewResponse(&unyov1.ListEventsResponse{Events: events}), nil
}

func (s *eventService) GetEvent(ctx context.Context, req *connect.Request[unyov1.GetEventRequest]) (*connect.Response[unyov1.GetEventResponse], error) {
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

func (s *statusService) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	resp := &unyov1.GetStatusResponse{
		Role: "cluster", Version: s.c.opts.Version, Cluster: s.c.opts.Name,
		Replica: s.c.opts.Replica, StartedAt: timestamppb.New(s.c.started),
	}
	if s.c.lease.Held() {
		resp.Leases = append(resp.Leases, s.c.lease.Name)
	}
	sort.Strings(resp.Leases)
	return connect.NewResponse(resp), nil
}
