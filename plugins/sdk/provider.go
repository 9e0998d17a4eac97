package sdk

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// Resource states.
const (
	Pending = pluginv1.ResourceState_RESOURCE_STATE_PENDING
	Running = pluginv1.ResourceState_RESOURCE_STATE_RUNNING
	Stopped = pluginv1.ResourceState_RESOURCE_STATE_STOPPED
	Broken  = pluginv1.ResourceState_RESOURCE_STATE_FAILED
	Deleted = pluginv1.ResourceState_RESOURCE_STATE_DELETED
)

// Resource is a provider resource as the plugin sees it.
type Resource struct {
	ID         string
	Labels     map[string]string
	Config     map[string]any
	State      pluginv1.ResourceState
	Reason     string
	Handle     Handle
	CreatedAt  time.Time
	Attributes map[string]string
	// Backends of a load-balancer resource, as the provider sees them.
	Backends []*pluginv1.BackendStatus
}

// Handle is what the core stores to find a resource again; the SDK fills in
// the driver name.
type Handle struct {
	Version uint32
	State   []byte
}

// CreateRequest asks for a new resource with a core-assigned id.
type CreateRequest struct {
	ID     string
	Labels map[string]string
	Config map[string]any
}

// ProviderPlugin realizes resources. The SDK serializes calls per resource
// id, makes Create idempotent (it calls Get first and compares configs), and
// answers UNIMPLEMENTED for operations whose optional interface is missing.
type ProviderPlugin interface {
	Plugin
	ResourceType() string
	ResourceSchema() string
	// Validate returns a *ConfigError for a bad resource config.
	Validate(ctx context.Context, config map[string]any) error
	// Create makes the resource. On error it must leave nothing behind.
	Create(ctx context.Context, req CreateRequest) (Resource, error)
	// Get returns ErrNotFound for an unknown id.
	Get(ctx context.Context, id string) (Resource, error)
	// Delete stops and removes the resource; existed=false for unknown ids.
	Delete(ctx context.Context, id string, grace time.Duration) (existed bool, err error)
}

// UpdatePlan is what an update would do.
type UpdatePlan struct {
	Action  pluginv1.UpdateAction
	Changed []string
	Reason  string
}

// ProviderUpdater is optional: PlanUpdate and Update.
type ProviderUpdater interface {
	PlanUpdate(ctx context.Context, current Resource, config map[string]any) (UpdatePlan, error)
	Update(ctx context.Context, current Resource, config map[string]any) (Resource, error)
}

// ProviderLister is optional: List by labels.
type ProviderLister interface {
	List(ctx context.Context, labels map[string]string) ([]Resource, error)
}

// ProviderRecoverer is optional: re-attach from a stored handle. Return
// ErrBadHandle for a handle version it cannot read, ErrNotFound when no trace
// of the resource is left.
type ProviderRecoverer interface {
	Recover(ctx context.Context, id string, h Handle) (Resource, error)
}

// ResourceEvent is a state change reported by Watch.
type ResourceEvent struct {
	ID     string
	State  pluginv1.ResourceState
	Reason string
	At     time.Time
}

// ProviderWatcher is optional: send state changes until ctx ends.
type ProviderWatcher interface {
	Watch(ctx context.Context, ids []string, send func(ResourceEvent) error) error
}

// ProviderStats is optional: usage metrics of one resource.
type ProviderStats interface {
	Stats(ctx context.Context, id string) ([]Metric, error)
}

// Fingerprint is a node's health and capacity for a provider.
type Fingerprint struct {
	Healthy     bool
	Reason      string
	CPUs        int32
	MemoryBytes int64
	DiskBytes   int64
	Attributes  map[string]string
}

// ProviderFingerprinter is optional; the SDK polls it and streams changes.
type ProviderFingerprinter interface {
	Fingerprint(ctx context.Context) (Fingerprint, error)
}

// Operations returns what p offers, derived from the interfaces it
// implements, so that the advertised list cannot drift from the code.
func Operations(p ProviderPlugin) []pluginv1.Operation {
	ops := []pluginv1.Operation{pluginv1.Operation_OPERATION_CREATE, pluginv1.Operation_OPERATION_DELETE}
	if _, ok := p.(ProviderFingerprinter); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_FINGERPRINT)
	}
	if _, ok := p.(ProviderUpdater); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_UPDATE)
	}
	if _, ok := p.(ProviderLister); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_LIST)
	}
	if _, ok := p.(ProviderRecoverer); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_RECOVER)
	}
	if _, ok := p.(ProviderWatcher); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_WATCH)
	}
	if _, ok := p.(ProviderStats); ok {
		ops = append(ops, pluginv1.Operation_OPERATION_STATS)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	return ops
}

type providerServer struct {
	pluginv1.UnimplementedProviderServer
	rt *runtime
	p  ProviderPlugin
}

func (s *providerServer) unimplemented(op string) error {
	return status.Errorf(codes.Unimplemented, "provider %s does not offer %s", s.rt.info.Name, op)
}

func (s *providerServer) toProto(r Resource) (*pluginv1.Resource, error) {
	cfg, err := toStruct(r.Config)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "provider %s returned a config that is not JSON-like: %v", s.rt.info.Name, err)
	}
	out := &pluginv1.Resource{
		Id: r.ID, Labels: r.Labels, Config: cfg, State: r.State, Reason: r.Reason,
		Handle:     &pluginv1.Handle{Version: r.Handle.Version, Driver: s.rt.info.Name, State: r.Handle.State},
		Attributes: r.Attributes, Backends: r.Backends,
	}
	if !r.CreatedAt.IsZero() {
		out.CreatedAt = timestamppb.New(r.CreatedAt)
	}
	return out, nil
}

func (s *providerServer) Schema(context.Context, *pluginv1.SchemaRequest) (*pluginv1.SchemaResponse, error) {
	return &pluginv1.SchemaResponse{ResourceSchema: s.p.ResourceSchema(), ResourceType: s.p.ResourceType(), Operations: Operations(s.p)}, nil
}

func (s *providerServer) Validate(ctx context.Context, req *pluginv1.ValidateRequest) (*pluginv1.ValidateResponse, error) {
	err := s.p.Validate(ctx, req.GetConfig().AsMap())
	if err == nil {
		return &pluginv1.ValidateResponse{Valid: true}, nil
	}
	resp := &pluginv1.ValidateResponse{}
	if ce, ok := err.(*ConfigError); ok {
		for _, v := range ce.Violations {
			resp.Problems = append(resp.Problems, &pluginv1.FieldProblem{Field: v.Field, Description: v.Description})
		}
		return resp, nil
	}
	return nil, s.rt.toStatus(err)
}

func (s *providerServer) Create(ctx context.Context, req *pluginv1.CreateRequest) (*pluginv1.CreateResponse, error) {
	id := req.GetId()
	if id == "" {
		return nil, s.rt.toStatus(Invalid("id", "is required"))
	}
	cfg := req.GetConfig()
	if cfg == nil {
		cfg, _ = toStruct(nil)
	}
	if err := s.p.Validate(ctx, cfg.AsMap()); err != nil {
		return nil, s.rt.toStatus(err)
	}
	defer s.rt.locks.lock(id)()
	existing, err := s.p.Get(ctx, id)
	switch {
	case err == nil:
		ex, err := toStruct(existing.Config)
		if err != nil || !proto.Equal(ex, cfg) {
			return nil, status.Errorf(codes.AlreadyExists, "provider %s: resource %s already exists with a different config; delete it first or use Update", s.rt.info.Name, id)
		}
		r, err := s.toProto(existing)
		if err != nil {
			return nil, err
		}
		return &pluginv1.CreateResponse{Resource: r}, nil
	case status.Code(s.rt.toStatus(err)) != codes.NotFound:
		return nil, s.rt.toStatus(fmt.Errorf("looking for an existing resource %s: %w", id, err))
	}
	created, err := s.p.Create(ctx, CreateRequest{ID: id, Labels: req.GetLabels(), Config: cfg.AsMap()})
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	r, err := s.toProto(created)
	if err != nil {
		return nil, err
	}
	return &pluginv1.CreateResponse{Resource: r, Created: true}, nil
}

func (s *providerServer) Get(ctx context.Context, req *pluginv1.GetRequest) (*pluginv1.GetResponse, error) {
	r, err := s.p.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	pr, err := s.toProto(r)
	if err != nil {
		return nil, err
	}
	return &pluginv1.GetResponse{Resource: pr}, nil
}

func (s *providerServer) Delete(ctx context.Context, req *pluginv1.DeleteRequest) (*pluginv1.DeleteResponse, error) {
	grace := req.GetGrace().AsDuration()
	if grace <= 0 {
		grace = 10 * time.Second
	}
	defer s.rt.locks.lock(req.GetId())()
	existed, err := s.p.Delete(ctx, req.GetId(), grace)
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	return &pluginv1.DeleteResponse{Existed: existed}, nil
}

func (s *providerServer) PlanUpdate(ctx context.Context, req *pluginv1.PlanUpdateRequest) (*pluginv1.PlanUpdateResponse, error) {
	u, ok := s.p.(ProviderUpdater)
	if !ok {
		return nil, s.unimplemented("PlanUpdate")
	}
	cur, err := s.p.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	plan, err := u.PlanUpdate(ctx, cur, req.GetConfig().AsMap())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	return &pluginv1.PlanUpdateResponse{Action: plan.Action, ChangedFields: plan.Changed, Reason: plan.Reason}, nil
}

func (s *providerServer) Update(ctx context.Context, req *pluginv1.UpdateRequest) (*pluginv1.UpdateResponse, error) {
	u, ok := s.p.(ProviderUpdater)
	if !ok {
		return nil, s.unimplemented("Update")
	}
	cfg := req.GetConfig().AsMap()
	if err := s.p.Validate(ctx, cfg); err != nil {
		return nil, s.rt.toStatus(err)
	}
	defer s.rt.locks.lock(req.GetId())()
	cur, err := s.p.Get(ctx, req.GetId())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	plan, err := u.PlanUpdate(ctx, cur, cfg)
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	next, err := u.Update(ctx, cur, cfg)
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	pr, err := s.toProto(next)
	if err != nil {
		return nil, err
	}
	return &pluginv1.UpdateResponse{Resource: pr, Action: plan.Action}, nil
}

func (s *providerServer) List(ctx context.Context, req *pluginv1.ListRequest) (*pluginv1.ListResponse, error) {
	l, ok := s.p.(ProviderLister)
	if !ok {
		return nil, s.unimplemented("List")
	}
	rs, err := l.List(ctx, req.GetLabels())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	resp := &pluginv1.ListResponse{}
	for _, r := range rs {
		pr, err := s.toProto(r)
		if err != nil {
			return nil, err
		}
		resp.Resources = append(resp.Resources, pr)
	}
	return resp, nil
}

func (s *providerServer) Recover(ctx context.Context, req *pluginv1.RecoverRequest) (*pluginv1.RecoverResponse, error) {
	rc, ok := s.p.(ProviderRecoverer)
	if !ok {
		return nil, s.unimplemented("Recover")
	}
	h := req.GetHandle()
	if h == nil {
		return nil, s.rt.toStatus(Invalid("handle", "is required"))
	}
	if h.GetDriver() != s.rt.info.Name {
		return nil, status.Errorf(codes.FailedPrecondition, "provider %s cannot recover a handle written by %q", s.rt.info.Name, h.GetDriver())
	}
	defer s.rt.locks.lock(req.GetId())()
	r, err := rc.Recover(ctx, req.GetId(), Handle{Version: h.GetVersion(), State: h.GetState()})
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	pr, err := s.toProto(r)
	if err != nil {
		return nil, err
	}
	return &pluginv1.RecoverResponse{Resource: pr}, nil
}

func (s *providerServer) Watch(req *pluginv1.WatchRequest, stream pluginv1.Provider_WatchServer) error {
	w, ok := s.p.(ProviderWatcher)
	if !ok {
		return s.unimplemented("Watch")
	}
	err := w.Watch(stream.Context(), req.GetIds(), func(e ResourceEvent) error {
		at := e.At
		if at.IsZero() {
			at = time.Now()
		}
		return stream.Send(&pluginv1.WatchResponse{Id: e.ID, State: e.State, Reason: e.Reason, At: timestamppb.New(at)})
	})
	if err != nil && stream.Context().Err() != nil {
		return nil // the host stopped watching
	}
	return s.rt.toStatus(err)
}

func (s *providerServer) Stats(ctx context.Context, req *pluginv1.StatsRequest) (*pluginv1.StatsResponse, error) {
	st, ok := s.p.(ProviderStats)
	if !ok {
		return nil, s.unimplemented("Stats")
	}
	ms, err := st.Stats(ctx, req.GetId())
	if err != nil {
		return nil, s.rt.toStatus(err)
	}
	return &pluginv1.StatsResponse{Metrics: toMetrics(ms), At: timestamppb.Now()}, nil
}

func (s *providerServer) Fingerprint(req *pluginv1.FingerprintRequest, stream pluginv1.Provider_FingerprintServer) error {
	fp, ok := s.p.(ProviderFingerprinter)
	if !ok {
		return s.unimplemented("Fingerprint")
	}
	interval := req.GetInterval().AsDuration()
	if interval <= 0 {
		interval = 30 * time.Second
	}
	// Poll faster than the interval so that changes go out promptly, and
	// send unchanged fingerprints only once per interval.
	poll := min(interval, time.Second)
	ctx := stream.Context()
	var last *pluginv1.FingerprintResponse
	var lastSent time.Time
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		f, err := fp.Fingerprint(ctx)
		if err != nil {
			f = Fingerprint{Healthy: false, Reason: err.Error()}
		}
		cur := &pluginv1.FingerprintResponse{Healthy: f.Healthy, Reason: f.Reason, Attributes: f.Attributes,
			Capacity: &pluginv1.Capacity{Cpus: f.CPUs, MemoryBytes: f.MemoryBytes, DiskBytes: f.DiskBytes}}
		if last == nil || !proto.Equal(last, cur) || time.Since(lastSent) >= interval {
			last = proto.Clone(cur).(*pluginv1.FingerprintResponse)
			cur.At = timestamppb.Now()
			if err := stream.Send(cur); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
