package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/maintenance"
)

// kind is how the cluster validates and stores one kind of object.
type kind struct {
	validate func(o *unyov1.Object) error
	// prepare, if set, fills in what the cluster decides before storing.
	prepare func(o *unyov1.Object)
	del     func(ctx context.Context, st store.Store, name string) error
	get     func(ctx context.Context, st store.Store, name string) (*unyov1.Object, error)
	list    func(ctx context.Context, st store.Store) ([]*unyov1.Object, error)
}

// kinds are the objects a cluster keeps, by manifest kind name.
func kinds() map[string]kind {
	return map[string]kind{
		"Check": {
			validate: func(o *unyov1.Object) error { _, err := checks.Compile(o.GetCheck()); return err },
			prepare:  func(o *unyov1.Object) { o.GetCheck().Source = "central" },
			del:      func(ctx context.Context, st store.Store, name string) error { return st.DeleteCheck(ctx, name) },
			get: func(ctx context.Context, st store.Store, name string) (*unyov1.Object, error) {
				c, err := st.GetCheck(ctx, name)
				return &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}}, err
			},
			list: func(ctx context.Context, st store.Store) ([]*unyov1.Object, error) {
				cs, err := st.ListChecks(ctx)
				out := make([]*unyov1.Object, len(cs))
				for i, c := range cs {
					out[i] = &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}}
				}
				return out, err
			},
		},
		"EventRule": {
			validate: func(o *unyov1.Object) error { _, err := eventrules.Compile(o.GetEventRule()); return err },
			del:      func(ctx context.Context, st store.Store, name string) error { return st.DeleteEventRule(ctx, name) },
			get: func(ctx context.Context, st store.Store, name string) (*unyov1.Object, error) {
				r, err := st.GetEventRule(ctx, name)
				return &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: r}}, err
			},
			list: func(ctx context.Context, st store.Store) ([]*unyov1.Object, error) {
				rs, err := st.ListEventRules(ctx)
				out := make([]*unyov1.Object, len(rs))
				for i, r := range rs {
					out[i] = &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: r}}
				}
				return out, err
			},
		},
		"Maintenance": {
			validate: func(o *unyov1.Object) error {
				_, err := maintenance.Compile(o.GetMaintenance(), time.Now())
				return err
			},
			del: func(ctx context.Context, st store.Store, name string) error { return st.DeleteMaintenance(ctx, name) },
			get: func(ctx context.Context, st store.Store, name string) (*unyov1.Object, error) {
				m, err := st.GetMaintenance(ctx, name)
				return &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: m}}, err
			},
			list: func(ctx context.Context, st store.Store) ([]*unyov1.Object, error) {
				ms, err := st.ListMaintenance(ctx)
				out := make([]*unyov1.Object, len(ms))
				for i, m := range ms {
					out[i] = &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: m}}
				}
				return out, err
			},
		},
	}
}

// ValidateObjects checks every object before anything is written, so an
// apply with one bad document changes nothing. Root and cluster share it.
func ValidateObjects(objs []*unyov1.Object) error {
	ks := kinds()
	var errs []string
	for i, o := range objs {
		k, ok := ks[manifest.Kind(o)]
		if !ok {
			errs = append(errs, fmt.Sprintf("objects[%d]: no kind set", i))
			continue
		}
		if err := k.validate(o); err != nil {
			errs = append(errs, fmt.Sprintf("objects[%d]: %v", i, err))
		}
		if err := objectLimits(o); err != nil {
			errs = append(errs, fmt.Sprintf("objects[%d] (%s %q): %v", i, manifest.Kind(o), limits.Abbrev(manifest.Name(o)), err))
		}
	}
	if len(errs) > 0 {
		return connect.NewError(connect.CodeInvalidArgument, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// objectService stores the objects operators apply to this cluster.
type objectService struct{ c *Cluster }

func (s *objectService) ownCluster(name string) error {
	if name != "" && name != s.c.opts.Name {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cluster: %q is not this cluster (%q); send it to root or to that cluster", name, s.c.opts.Name))
	}
	return nil
}

func (s *objectService) kind(name string) (kind, string, error) {
	canonical, err := manifest.ParseKind(name)
	if err != nil {
		return kind{}, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind: %w", err))
	}
	k, ok := s.c.kinds[canonical]
	if !ok {
		return kind{}, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind: a cluster does not keep %s objects", canonical))
	}
	return k, canonical, nil
}

func (s *objectService) Apply(ctx context.Context, req *connect.Request[unyov1.ApplyRequest]) (*connect.Response[unyov1.ApplyResponse], error) {
	objs := req.Msg.GetObjects()
	if err := ValidateObjects(objs); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := s.ownCluster(manifest.Cluster(o)); err != nil {
			return nil, err
		}
	}
	if err := s.authorizeApply(ctx, objs); err != nil {
		return nil, err
	}
	previous := s.previous(ctx, objs)
	for _, o := range objs {
		manifest.SetCluster(o, s.c.opts.Name)
		if k := s.c.kinds[manifest.Kind(o)]; k.prepare != nil {
			k.prepare(o)
		}
	}
	// One transaction: a refused or abandoned apply (the client timed out)
	// stores nothing.
	results, err := s.c.store.PutObjects(ctx, objs)
	var audit []rbac.Entry
	for i, o := range objs {
		if err == nil && results[i] == store.Unchanged {
			continue
		}
		name := manifest.Kind(o)
		audit = append(audit, rbac.Entry{Procedure: "ObjectService/Apply", Target: s.target(name, manifest.Name(o)),
			Before: previous[name+"/"+manifest.Name(o)], After: o, Err: err})
	}
	s.c.audit.RecordAll(ctx, audit)
	if err != nil && ctx.Err() != nil {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the apply of %d objects did not finish before the client gave up; nothing was stored: %w", len(objs), err))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("store the apply of %d objects (nothing was stored): %w", len(objs), err))
	}
	resp := &unyov1.ApplyResponse{}
	for i, o := range objs {
		resp.Results = append(resp.Results, &unyov1.ApplyResult{Ref: manifest.Ref(o), Action: string(results[i])})
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(resp), nil
}

func (s *objectService) Delete(ctx context.Context, req *connect.Request[unyov1.DeleteRequest]) (*connect.Response[unyov1.DeleteResponse], error) {
	resp := &unyov1.DeleteResponse{}
	for i, ref := range req.Msg.GetRefs() {
		if err := required(fmt.Sprintf("refs[%d].name", i), ref.GetName()); err != nil {
			return nil, err
		}
	}
	for _, ref := range req.Msg.GetRefs() {
		k, kindName, err := s.kind(ref.GetKind())
		if err != nil {
			return nil, err
		}
		if err := s.ownCluster(ref.GetCluster()); err != nil {
			return nil, err
		}
		target := s.target(kindName, ref.GetName())
		if err := server.RequireWrite(ctx, kindName, s.c.opts.Name, false); err != nil {
			s.c.audit.Record(ctx, "ObjectService/Delete", target, nil, nil, err)
			return nil, err
		}
		before := s.current(ctx, k, ref.GetName())
		action := "deleted"
		err = k.del(ctx, s.c.store, ref.GetName())
		if !errors.Is(err, store.ErrNotFound) {
			s.c.audit.Record(ctx, "ObjectService/Delete", target, before, nil, err)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			action = "not found"
		case err != nil:
			return nil, internal(fmt.Errorf("delete %s %q: %w", kindName, ref.GetName(), err))
		}
		resp.Results = append(resp.Results, &unyov1.ApplyResult{
			Ref:    &unyov1.ObjectRef{Kind: kindName, Name: ref.GetName(), Cluster: s.c.opts.Name},
			Action: action,
		})
	}
	s.c.revisions.invalidate()
	return connect.NewResponse(resp), nil
}

func (s *objectService) Get(ctx context.Context, req *connect.Request[unyov1.GetRequest]) (*connect.Response[unyov1.GetResponse], error) {
	ref := req.Msg.GetRef()
	k, kindName, err := s.kind(ref.GetKind())
	if err != nil {
		return nil, err
	}
	if err := required("ref.name", ref.GetName()); err != nil {
		return nil, err
	}
	if err := s.ownCluster(ref.GetCluster()); err != nil {
		return nil, err
	}
	o, err := k.get(ctx, s.c.store, ref.GetName())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q not found in cluster %q", kindName, ref.GetName(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get %s %q: %w", kindName, ref.GetName(), err))
	}
	return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{o}}), nil
}

func (s *objectService) List(ctx context.Context, req *connect.Request[unyov1.ListRequest]) (*connect.Response[unyov1.ListResponse], error) {
	k, kindName, err := s.kind(req.Msg.GetKind())
	if err != nil {
		return nil, err
	}
	if err := s.ownCluster(req.Msg.GetCluster()); err != nil {
		return nil, err
	}
	objs, err := k.list(ctx, s.c.store)
	if err != nil {
		return nil, internal(fmt.Errorf("list %s objects: %w", kindName, err))
	}
	return connect.NewResponse(&unyov1.ListResponse{Objects: objs}), nil
}
