package sdk

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// closeTimeout bounds Closer.Close so that a stuck plugin still exits.
const closeTimeout = 5 * time.Second

// runtime is one served plugin: its state, in-flight accounting and
// shutdown. Everything a served plugin shares lives here, not in globals.
type runtime struct {
	p    Plugin
	info Info
	log  hclog.Logger

	// hard is cancelled when in-flight work must stop (shutdown grace over).
	hard       context.Context
	hardCancel context.CancelFunc
	// stopServer stops the gRPC server; set by whoever serves.
	stopServer func()
	// exited is closed when shutdown finished (Close ran, server stopped).
	exited chan struct{}
	// closeTimeout bounds Closer.Close (closeTimeout; tests shorten it).
	closeTimeout time.Duration

	mu         sync.Mutex
	configured bool
	apiVersion uint32
	shutting   bool
	inflight   int
	idle       chan struct{} // closed and replaced when inflight drops to 0
	shutOnce   sync.Once

	actions *actionTable
	locks   keyedMutex
}

func newRuntime(p Plugin, log hclog.Logger) *runtime {
	info := infoOf(p)
	hard, cancel := context.WithCancel(context.Background())
	return &runtime{
		p: p, info: info, log: log.Named(info.Name),
		hard: hard, hardCancel: cancel,
		exited:       make(chan struct{}),
		idle:         make(chan struct{}),
		closeTimeout: closeTimeout,
		actions:      newActionTable(4096, 24*time.Hour),
		locks:        keyedMutex{m: map[string]*keyedEntry{}},
	}
}

// servers returns the service implementations for p's kinds.
func (rt *runtime) servers() base.Servers {
	sv := base.Servers{Plugin: &pluginServer{rt: rt}}
	if cp, ok := rt.p.(CheckPlugin); ok {
		sv.Check = &checkServer{rt: rt, p: cp}
	}
	if ap, ok := rt.p.(ActionPlugin); ok {
		sv.Action = &actionServer{rt: rt, p: ap}
	}
	if pp, ok := rt.p.(ProviderPlugin); ok {
		sv.Provider = &providerServer{rt: rt, p: pp}
	}
	return sv
}

func (rt *runtime) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(rt.unary),
		grpc.ChainStreamInterceptor(rt.stream),
	}
}

// enter admits a call unless shutting down; the returned func ends it.
func (rt *runtime) enter(method string) (func(), error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.shutting {
		return nil, status.Errorf(codes.Unavailable, "plugin %s is shutting down", rt.info.Name)
	}
	if needsConfig(method) && !rt.configured {
		return nil, status.Errorf(codes.FailedPrecondition, "plugin %s is not configured: call Configure first", rt.info.Name)
	}
	rt.inflight++
	return func() {
		rt.mu.Lock()
		rt.inflight--
		if rt.inflight == 0 {
			close(rt.idle)
			rt.idle = make(chan struct{})
		}
		rt.mu.Unlock()
	}, nil
}

// needsConfig: only the kind services need a configured plugin; the common
// service is how one gets configured.
func needsConfig(method string) bool {
	return !strings.HasPrefix(method, "/unyo.plugin.v1.Plugin/") && strings.HasPrefix(method, "/unyo.plugin.v1.")
}

// callContext ties a call to the runtime's hard stop and carries the logger.
func (rt *runtime) callContext(ctx context.Context, method string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rt.hard, cancel)
	ctx = withLog(ctx, rt.log.With("call", method[strings.LastIndex(method, "/")+1:]))
	return ctx, func() { stop(); cancel() }
}

func (rt *runtime) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	if !strings.HasPrefix(info.FullMethod, "/unyo.plugin.v1.") {
		return h(ctx, req) // go-plugin's own services (health, controller)
	}
	if info.FullMethod != pluginv1.Plugin_Shutdown_FullMethodName {
		done, err := rt.enter(info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	ctx, cancel := rt.callContext(ctx, info.FullMethod)
	defer cancel()
	defer rt.recoverPanic(info.FullMethod, &err)
	return h(ctx, req)
}

func (rt *runtime) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	if !strings.HasPrefix(info.FullMethod, "/unyo.plugin.v1.") {
		return h(srv, ss)
	}
	done, err := rt.enter(info.FullMethod)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := rt.callContext(ss.Context(), info.FullMethod)
	defer cancel()
	defer rt.recoverPanic(info.FullMethod, &err)
	return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
}

// recoverPanic turns a plugin bug into INTERNAL instead of a dead process,
// so that one bad request does not take every other in-flight call down.
func (rt *runtime) recoverPanic(method string, err *error) {
	if r := recover(); r != nil {
		rt.log.Error("panic in plugin call", "call", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "plugin %s panicked in %s: %v", rt.info.Name, method, r)
	}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// shutdown stops taking calls, waits up to grace for in-flight ones,
// cancels the rest, runs Closer and stops the server. Safe to call often;
// only the first call acts.
func (rt *runtime) shutdown(grace time.Duration, why string) {
	rt.shutOnce.Do(func() {
		rt.log.Info("shutting down", "reason", why, "grace", grace.String())
		rt.mu.Lock()
		rt.shutting = true
		n, idle := rt.inflight, rt.idle
		rt.mu.Unlock()
		if n > 0 {
			t := time.NewTimer(grace)
			select {
			case <-idle:
			case <-t.C:
				rt.log.Warn("in-flight calls outlived the shutdown grace; cancelling them")
			}
			t.Stop()
		}
		rt.hardCancel()
		if c, ok := rt.p.(Closer); ok {
			rt.close(c)
		}
		if rt.stopServer != nil {
			rt.stopServer()
		}
		close(rt.exited)
	})
}

// close runs c.Close bounded by closeTimeout even when Close ignores its
// context: a stuck Close must not keep the process alive past SIGTERM or
// the host's death. The goroutine is abandoned; the process exits anyway.
func (rt *runtime) close(c Closer) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.closeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Close(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			rt.log.Error("close failed", "error", err)
		}
	case <-ctx.Done():
		rt.log.Error("close did not return within its timeout; exiting without it", "timeout", rt.closeTimeout.String())
	}
}

// toStatus maps an author's error to the protocol's error model.
func (rt *runtime) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ce *ConfigError
	switch {
	case errors.As(err, &ce):
		st := status.New(codes.InvalidArgument, err.Error())
		br := &errdetails.BadRequest{}
		for _, v := range ce.Violations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		if d, derr := st.WithDetails(br); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, ErrBadHandle):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// pluginServer is the common Plugin service.
type pluginServer struct {
	pluginv1.UnimplementedPluginServer
	rt *runtime
}

func (s *pluginServer) Info(_ context.Context, req *pluginv1.InfoRequest) (*pluginv1.InfoResponse, error) {
	info := s.rt.info
	resp := &pluginv1.InfoResponse{
		Name: info.Name, Version: info.Version, Description: info.Description,
		Kinds: Kinds(s.rt.p), ApiVersions: info.APIVersions,
	}
	if v, err := base.Negotiate(req.GetHostApiVersions(), info.APIVersions); err == nil {
		resp.SelectedApiVersion = v
	}
	return resp, nil
}

func (s *pluginServer) ConfigSchema(context.Context, *pluginv1.ConfigSchemaRequest) (*pluginv1.ConfigSchemaResponse, error) {
	return &pluginv1.ConfigSchemaResponse{JsonSchema: s.rt.p.ConfigSchema()}, nil
}

func (s *pluginServer) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	v := req.GetApiVersion()
	if v != 0 && !containsU32(s.rt.info.APIVersions, v) {
		return nil, status.Errorf(codes.FailedPrecondition, "plugin %s does not speak API v%d (it speaks %v)", s.rt.info.Name, v, s.rt.info.APIVersions)
	}
	if err := s.rt.p.Configure(ctx, req.GetConfig().AsMap()); err != nil {
		return nil, s.rt.toStatus(err)
	}
	s.rt.mu.Lock()
	s.rt.configured, s.rt.apiVersion = true, v
	s.rt.mu.Unlock()
	return &pluginv1.ConfigureResponse{}, nil
}

func (s *pluginServer) Probe(ctx context.Context, _ *pluginv1.ProbeRequest) (*pluginv1.ProbeResponse, error) {
	s.rt.mu.Lock()
	configured := s.rt.configured
	s.rt.mu.Unlock()
	if !configured {
		return &pluginv1.ProbeResponse{Ready: false, Reason: "not configured"}, nil
	}
	ready, reason := s.rt.p.Probe(ctx)
	return &pluginv1.ProbeResponse{Ready: ready, Reason: reason, Goroutines: int64(goruntime.NumGoroutine())}, nil
}

func (s *pluginServer) Shutdown(_ context.Context, req *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	grace := req.GetGrace().AsDuration()
	if grace <= 0 {
		grace = 5 * time.Second
	}
	// Answer first; the server stops underneath the answered call.
	go s.rt.shutdown(grace, "host asked")
	return &pluginv1.ShutdownResponse{}, nil
}

func containsU32(vs []uint32, v uint32) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// keyedMutex serializes operations on one key (a provider resource id)
// without one lock for all.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu sync.Mutex
	n  int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.n++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.n--
		if e.n == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

func toStruct(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}, nil
	}
	return structpb.NewStruct(m)
}
