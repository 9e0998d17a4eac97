package cluster

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/objects"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// objectService stores the objects operators apply to this cluster: the
// cluster-owned kinds of the registry.
type objectService struct {
	c     *Cluster
	local *objects.Local
}

func newObjectService(c *Cluster) *objectService {
	return &objectService{c: c, local: &objects.Local{
		Kinds: c.kinds, Store: c.store, Audit: c.audit, Log: c.log, Tier: kinds.ClusterTier, Cluster: c.opts.Name,
	}}
}

func (s *objectService) ownCluster(name string) error {
	if name != "" && name != s.c.opts.Name {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cluster: %q is not this cluster (%q); send it to root or to that cluster", name, s.c.opts.Name))
	}
	return nil
}

func (s *objectService) Apply(ctx context.Context, req *connect.Request[unyov1.ApplyRequest]) (*connect.Response[unyov1.ApplyResponse], error) {
	objs := req.Msg.GetObjects()
	if err := s.c.kinds.Validate(objs, s.c.opts.Now()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	for i, o := range objs {
		if _, err := s.local.Kind(kinds.KindOf(o)); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("objects[%d]: %s", i, connectMessage(err)))
		}
		if err := s.ownCluster(kinds.Cluster(o)); err != nil {
			return nil, err
		}
	}
	if err := s.authorizeApply(ctx, objs); err != nil {
		return nil, err
	}
	if req.Msg.GetDryRun() {
		results, err := s.local.Try(ctx, objs)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&unyov1.ApplyResponse{Results: results}), nil
	}
	results, err := s.local.Apply(ctx, objs)
	if err != nil {
		return nil, err
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(&unyov1.ApplyResponse{Results: results}), nil
}

func (s *objectService) Delete(ctx context.Context, req *connect.Request[unyov1.DeleteRequest]) (*connect.Response[unyov1.DeleteResponse], error) {
	resp := &unyov1.DeleteResponse{}
	for i, ref := range req.Msg.GetRefs() {
		if err := required(fmt.Sprintf("refs[%d].name", i), ref.GetName()); err != nil {
			return nil, err
		}
	}
	for _, ref := range req.Msg.GetRefs() {
		k, err := s.local.Kind(ref.GetKind())
		if err != nil {
			return nil, err
		}
		if err := s.ownCluster(ref.GetCluster()); err != nil {
			return nil, err
		}
		if err := server.RequireWrite(ctx, k.Name, s.c.opts.Name, false); err != nil {
			s.c.audit.Record(ctx, "ObjectService/Delete", s.local.Target(k.Name, ref.GetName()), nil, nil, err)
			return nil, err
		}
		result, err := s.local.Delete(ctx, k, ref.GetName())
		if err != nil {
			return nil, err
		}
		if k.Name == "Check" {
			// From now on this replica drops the check's results still in
			// flight (the others within a second).
			s.c.ingest.ChecksChanged()
			// The check's latest events and alerts go with it; deleting a
			// check that is gone already clears what came back since (a
			// result an agent replayed from its spool long after).
			by, reason := server.PrincipalFrom(ctx).String(), fmt.Sprintf("check %q deleted", ref.GetName())
			if err := s.c.retire(ctx, store.ForgetFilter{Check: ref.GetName()}, by, reason); err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, err)
			}
		}
		resp.Results = append(resp.Results, result)
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(resp), nil
}

func (s *objectService) Get(ctx context.Context, req *connect.Request[unyov1.GetRequest]) (*connect.Response[unyov1.GetResponse], error) {
	ref := req.Msg.GetRef()
	k, err := s.local.Kind(ref.GetKind())
	if err != nil {
		return nil, err
	}
	if err := required("ref.name", ref.GetName()); err != nil {
		return nil, err
	}
	if err := s.ownCluster(ref.GetCluster()); err != nil {
		return nil, err
	}
	o, err := s.local.Get(ctx, k, ref.GetName())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{o}}), nil
}

func (s *objectService) List(ctx context.Context, req *connect.Request[unyov1.ListRequest]) (*connect.Response[unyov1.ListResponse], error) {
	k, err := s.local.Kind(req.Msg.GetKind())
	if err != nil {
		return nil, err
	}
	if err := s.ownCluster(req.Msg.GetCluster()); err != nil {
		return nil, err
	}
	objs, err := s.local.List(ctx, k)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.ListResponse{Objects: objs}), nil
}
