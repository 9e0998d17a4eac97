package root

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

// Operators' writes of services and computes: an apply keeps the status
// root derived (a document never sets it), and deletes go through the
// controller, which removes a service's replicas from their clusters
// before it removes the records (Deleting → Deleted).

// keepServiceStatus gives every RegionService of an apply the status root
// holds for it, so that applying an unchanged document changes nothing
// and a document's own status is never stored; an autoscaled service keeps
// the replicas its autoscaler set. The caller holds svcMu.
func (r *Root) keepServiceStatus(ctx context.Context, objs []*unyov1.Object) error {
	for _, o := range objs {
		s, ok := kinds.Message(o).(*unyov1.RegionService)
		if !ok {
			continue
		}
		s.Status = nil
		stored, err := r.store.GetObject(ctx, service.KindService, s.GetName())
		switch {
		case errors.Is(err, store.ErrNotFound):
			// An autoscaled service may leave replicas out: it starts at min.
			if a := s.GetSpec().GetCompute().GetAutoscale(); a != nil && s.GetSpec().GetCompute().GetReplicas() == 0 {
				s.Spec.Compute.Replicas = a.GetMin()
			}
			continue
		case err != nil:
			return connect.NewError(connect.CodeInternal, fmt.Errorf("read service %q: %w", s.GetName(), err))
		}
		was := stored.GetRegionService()
		s.Status = was.GetStatus()
		// The autoscaler owns an autoscaled service's replicas, as a
		// HorizontalPodAutoscaler owns its Deployment's: a document's
		// replicas is only the count a new service starts at, and applying
		// the document again keeps the autoscaler's count.
		if s.GetSpec().GetCompute().GetAutoscale() != nil && was.GetSpec().GetCompute().GetAutoscale() != nil && !deleting(was) {
			s.Spec.Compute.Replicas = was.GetSpec().GetCompute().GetReplicas()
		}
	}
	return nil
}

// touchesServices says whether an apply or delete changed a service or a
// compute, so that the controller should run soon.
func touchesServices(results []*unyov1.ApplyResult) bool {
	for _, res := range results {
		if k := res.GetRef().GetKind(); (k == service.KindService || k == service.KindCompute) && res.GetAction() != "unchanged" && res.GetAction() != "not found" {
			return true
		}
	}
	return false
}

// deleteService marks a service Deleting; the controller deletes its
// computes from their clusters, then the records, then the service.
func (r *Root) deleteService(ctx context.Context, name string) (*unyov1.ApplyResult, error) {
	r.svcMu.Lock()
	defer r.svcMu.Unlock()
	ref := &unyov1.ObjectRef{Kind: service.KindService, Name: name}
	o, err := r.store.GetObject(ctx, service.KindService, name)
	if errors.Is(err, store.ErrNotFound) {
		return &unyov1.ApplyResult{Ref: ref, Action: "not found"}, nil
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("read service %q: %w", name, err))
	}
	before := proto.Clone(o)
	s := o.GetRegionService()
	if s.GetStatus().GetPhase() == service.PhaseDeleting {
		return &unyov1.ApplyResult{Ref: ref, Action: "deleting"}, nil
	}
	st := proto.Clone(s.GetStatus()).(*unyov1.RegionServiceStatus)
	if st == nil {
		st = &unyov1.RegionServiceStatus{}
	}
	st.Phase, st.Reason, st.Message, st.UpdatedAt = service.PhaseDeleting, "", "deleting its computes", timestamppb.Now()
	s.Status = st
	_, err = r.store.PutObjects(ctx, []*unyov1.Object{o})
	r.audit.Record(ctx, "ObjectService/Delete", rbac.Target{Kind: service.KindService, Name: name}, before, o, err)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("mark service %q deleting: %w", name, err))
	}
	r.servicesChanged()
	return &unyov1.ApplyResult{Ref: ref, Action: "deleting"}, nil
}

// deleteCompute removes one replica: its service wants one fewer (the
// other replicas keep their indexes) and the replica is marked Deleting;
// a service left with none is deleted.
func (r *Root) deleteCompute(ctx context.Context, name string) (*unyov1.ApplyResult, error) {
	r.svcMu.Lock()
	defer r.svcMu.Unlock()
	ref := &unyov1.ObjectRef{Kind: service.KindCompute, Name: name}
	co, err := r.store.GetObject(ctx, service.KindCompute, name)
	if errors.Is(err, store.ErrNotFound) {
		return &unyov1.ApplyResult{Ref: ref, Action: "not found"}, nil
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("read compute %q: %w", name, err))
	}
	c := co.GetCompute()
	if c.GetStatus().GetPhase() == service.PhaseDeleting {
		return &unyov1.ApplyResult{Ref: ref, Action: "deleting"}, nil
	}
	beforeCompute := proto.Clone(co)
	put := []*unyov1.Object{co}
	var so *unyov1.Object
	var beforeService proto.Message
	so, err = r.store.GetObject(ctx, service.KindService, c.GetService())
	switch {
	case errors.Is(err, store.ErrNotFound):
		so = nil // an orphan; the controller deletes it anyway
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("read service %q of compute %q: %w", c.GetService(), name, err))
	default:
		beforeService = proto.Clone(so)
		if spec := so.GetRegionService().GetSpec().GetCompute(); spec != nil && spec.Replicas > 0 {
			spec.Replicas--
		}
		put = append(put, so)
	}
	c.Status = &unyov1.ComputeStatus{Phase: service.PhaseDeleting, Node: c.GetStatus().GetNode(), Address: c.GetStatus().GetAddress(),
		Handle: c.GetStatus().GetHandle(), UpdatedAt: timestamppb.Now()}
	_, err = r.store.PutObjects(ctx, put)
	r.audit.Record(ctx, "ObjectService/Delete", rbac.Target{Kind: service.KindCompute, Name: name}, beforeCompute, co, err)
	if so != nil {
		r.audit.Record(ctx, "ObjectService/Delete", rbac.Target{Kind: service.KindService, Name: c.GetService()}, beforeService, so, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("mark compute %q deleting: %w", name, err))
	}
	r.servicesChanged()
	return &unyov1.ApplyResult{Ref: ref, Action: "deleting"}, nil
}
