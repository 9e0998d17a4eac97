package main

// The provider: resources are files in the configured state directory, one
// per resource, so that they outlive the plugin process as a provider's
// real resources do. Resource config: {"size": N}; size 13 fails Create.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// The provider defects.
const (
	watchUnimplemented       = "watch-unimplemented"       // advertises Watch, answers UNIMPLEMENTED
	fingerprintUnimplemented = "fingerprint-unimplemented" // advertises Fingerprint, answers UNIMPLEMENTED
	createNotIdempotent      = "create-not-idempotent"     // a retried Create makes a second resource (answering as if it did not)
	listAnyLabel             = "list-any-label"            // List matches ANY of the labels instead of ALL
)

const providerConfigSchema = `{"type":"object","properties":{"state_dir":{"type":"string"}},"required":["state_dir"],"additionalProperties":false}`

// providerConfig is the state directory of a provider config.
func providerConfig(cfg *structpb.Struct) (string, error) {
	dir := cfg.GetFields()["state_dir"].GetStringValue()
	if !filepath.IsAbs(dir) {
		return "", status.Errorf(codes.InvalidArgument, "config.state_dir: must be an absolute path, got %q", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", status.Errorf(codes.InvalidArgument, "config.state_dir: %v", err)
	}
	return dir, nil
}

type providerServer struct {
	pluginv1.UnimplementedProviderServer
	p *server
	// mu makes Create and Update of one id atomic under parallel calls.
	mu sync.Mutex
}

// dir is the state directory, or FAILED_PRECONDITION before Configure.
func (s *providerServer) dir() (string, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.stateDir == "" {
		return "", status.Error(codes.FailedPrecondition, "not configured")
	}
	return s.p.stateDir, nil
}

func (s *providerServer) Schema(context.Context, *pluginv1.SchemaRequest) (*pluginv1.SchemaResponse, error) {
	return &pluginv1.SchemaResponse{ResourceType: "file", ResourceSchema: `{"type":"object","properties":{"size":{"type":"number","minimum":0}}}`,
		Operations: []pluginv1.Operation{pluginv1.Operation_OPERATION_FINGERPRINT, pluginv1.Operation_OPERATION_CREATE, pluginv1.Operation_OPERATION_UPDATE,
			pluginv1.Operation_OPERATION_DELETE, pluginv1.Operation_OPERATION_LIST, pluginv1.Operation_OPERATION_RECOVER,
			pluginv1.Operation_OPERATION_WATCH, pluginv1.Operation_OPERATION_STATS}}, nil
}

func (s *providerServer) Validate(_ context.Context, req *pluginv1.ValidateRequest) (*pluginv1.ValidateResponse, error) {
	if size := req.GetConfig().GetFields()["size"].GetNumberValue(); size < 0 {
		return &pluginv1.ValidateResponse{Problems: []*pluginv1.FieldProblem{{Field: "size", Description: "must not be negative"}}}, nil
	}
	return &pluginv1.ValidateResponse{Valid: true}, nil
}

// load reads the resource id; NOT_FOUND when there is none.
func (s *providerServer) load(id string) (*pluginv1.Resource, error) {
	dir, err := s.dir()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "resource %s: not found", id)
	}
	if err != nil {
		return nil, err
	}
	r := &pluginv1.Resource{}
	if err := protojson.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("resource %s: %w", id, err)
	}
	return r, nil
}

func (s *providerServer) store(r *pluginv1.Resource) error {
	dir, err := s.dir()
	if err != nil {
		return err
	}
	b, err := protojson.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.GetId()+".json"), b, 0o600)
}

func (s *providerServer) Create(_ context.Context, req *pluginv1.CreateRequest) (*pluginv1.CreateResponse, error) {
	if _, err := s.dir(); err != nil {
		return nil, err
	}
	if req.GetConfig().GetFields()["size"].GetNumberValue() == 13 {
		return nil, status.Error(codes.Unavailable, "size 13: the backend refuses it")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, err := s.load(req.GetId()); err == nil {
		if !proto.Equal(old.GetConfig(), req.GetConfig()) {
			return nil, status.Errorf(codes.AlreadyExists, "resource %s exists with another config", req.GetId())
		}
		if s.p.defect == createNotIdempotent {
			// The backend was asked again and made a second resource,
			// which only a List of the labels shows.
			dup := proto.Clone(old).(*pluginv1.Resource)
			dup.Id = fmt.Sprintf("%s-dup-%d", old.GetId(), time.Now().UnixNano())
			if err := s.store(dup); err != nil {
				return nil, err
			}
		}
		return &pluginv1.CreateResponse{Resource: old}, nil
	} else if status.Code(err) != codes.NotFound {
		return nil, err
	}
	r := &pluginv1.Resource{Id: req.GetId(), Labels: req.GetLabels(), Config: req.GetConfig(), State: pluginv1.ResourceState_RESOURCE_STATE_RUNNING,
		Handle: &pluginv1.Handle{Version: 1, Driver: s.p.name, State: []byte(req.GetId())}, CreatedAt: timestamppb.Now()}
	if err := s.store(r); err != nil {
		return nil, err
	}
	return &pluginv1.CreateResponse{Resource: r, Created: true}, nil
}

func (s *providerServer) Get(_ context.Context, req *pluginv1.GetRequest) (*pluginv1.GetResponse, error) {
	r, err := s.load(req.GetId())
	if err != nil {
		return nil, err
	}
	return &pluginv1.GetResponse{Resource: r}, nil
}

func (s *providerServer) PlanUpdate(_ context.Context, req *pluginv1.PlanUpdateRequest) (*pluginv1.PlanUpdateResponse, error) {
	r, err := s.load(req.GetId())
	if err != nil {
		return nil, err
	}
	if proto.Equal(r.GetConfig(), req.GetConfig()) {
		return &pluginv1.PlanUpdateResponse{Action: pluginv1.UpdateAction_UPDATE_ACTION_NOOP}, nil
	}
	return &pluginv1.PlanUpdateResponse{Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE, ChangedFields: []string{"size"}}, nil
}

func (s *providerServer) Update(_ context.Context, req *pluginv1.UpdateRequest) (*pluginv1.UpdateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.load(req.GetId())
	if err != nil {
		return nil, err
	}
	r.Config = req.GetConfig()
	if err := s.store(r); err != nil {
		return nil, err
	}
	return &pluginv1.UpdateResponse{Resource: r, Action: pluginv1.UpdateAction_UPDATE_ACTION_IN_PLACE}, nil
}

func (s *providerServer) Delete(_ context.Context, req *pluginv1.DeleteRequest) (*pluginv1.DeleteResponse, error) {
	dir, err := s.dir()
	if err != nil {
		return nil, err
	}
	err = os.Remove(filepath.Join(dir, req.GetId()+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return &pluginv1.DeleteResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &pluginv1.DeleteResponse{Existed: true}, nil
}

func (s *providerServer) List(_ context.Context, req *pluginv1.ListRequest) (*pluginv1.ListResponse, error) {
	dir, err := s.dir()
	if err != nil {
		return nil, err
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := &pluginv1.ListResponse{}
	for _, f := range files {
		r, err := s.load(strings.TrimSuffix(f.Name(), ".json"))
		if err != nil {
			continue // deleted meanwhile
		}
		all, some := true, false
		for k, v := range req.GetLabels() {
			all = all && r.GetLabels()[k] == v
			some = some || r.GetLabels()[k] == v
		}
		if all || (s.p.defect == listAnyLabel && some) {
			out.Resources = append(out.Resources, r)
		}
	}
	return out, nil
}

func (s *providerServer) Recover(_ context.Context, req *pluginv1.RecoverRequest) (*pluginv1.RecoverResponse, error) {
	if h := req.GetHandle(); h.GetDriver() != s.p.name || h.GetVersion() != 1 {
		return nil, status.Errorf(codes.FailedPrecondition, "handle of driver %q v%d is not mine", h.GetDriver(), h.GetVersion())
	}
	r, err := s.load(string(req.GetHandle().GetState()))
	if err != nil {
		return nil, err
	}
	return &pluginv1.RecoverResponse{Resource: r}, nil
}

func (s *providerServer) Stats(_ context.Context, req *pluginv1.StatsRequest) (*pluginv1.StatsResponse, error) {
	r, err := s.load(req.GetId())
	if err != nil {
		return nil, err
	}
	return &pluginv1.StatsResponse{Metrics: []*pluginv1.Metric{{Label: "size", Value: r.GetConfig().GetFields()["size"].GetNumberValue()}}, At: timestamppb.Now()}, nil
}

// Watch reports each watched resource's state, then every change, until
// the host stops watching.
func (s *providerServer) Watch(req *pluginv1.WatchRequest, st pluginv1.Provider_WatchServer) error {
	if s.p.defect == watchUnimplemented {
		return status.Error(codes.Unimplemented, "method Watch not implemented")
	}
	if _, err := s.dir(); err != nil {
		return err
	}
	last := map[string]pluginv1.ResourceState{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, id := range req.GetIds() {
			state := pluginv1.ResourceState_RESOURCE_STATE_DELETED
			if r, err := s.load(id); err == nil {
				state = r.GetState()
			}
			if prev, seen := last[id]; seen && prev == state {
				continue
			}
			last[id] = state
			if err := st.Send(&pluginv1.WatchResponse{Id: id, State: state, At: timestamppb.Now()}); err != nil {
				return err
			}
		}
		select {
		case <-st.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// Fingerprint reports the state directory's health every interval.
func (s *providerServer) Fingerprint(req *pluginv1.FingerprintRequest, st pluginv1.Provider_FingerprintServer) error {
	if s.p.defect == fingerprintUnimplemented {
		return status.Error(codes.Unimplemented, "method Fingerprint not implemented")
	}
	dir, err := s.dir()
	if err != nil {
		return err
	}
	every := req.GetInterval().AsDuration()
	if every <= 0 {
		every = 10 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		_, err := os.Stat(dir)
		r := &pluginv1.FingerprintResponse{Healthy: err == nil, At: timestamppb.Now()}
		if err != nil {
			r.Reason = err.Error()
		}
		if err := st.Send(r); err != nil {
			return err
		}
		select {
		case <-st.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}
