// Command unyo-check-defective is a check, provider or action plugin written
// directly against the protobuf services, without the SDK, as a plugin in
// another language would be. It is correct unless installed under the name
// of one defect, unyo-<kind>-<defect>, and then broken in exactly that one
// way: the conformance harness's own tests install it once per defect and
// expect exactly the case for the defect to fail. Installed as
// unyo-provider-<name> it is the provider of provider.go, as
// unyo-action-<name> the action of action.go.
//
// Check targets: {"status": "ok|warning|critical|unknown", "sleep": "30s",
// "large": true}; config: {} only.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// The defects, each named for what the plugin does wrong.
const (
	schemaInvalid     = "schema-invalid"       // a schema with "type": "objekt"
	advertisesV2      = "advertises-v2"        // advertises v1 and v2, serves only v1
	ignoresSIGTERM    = "ignores-sigterm"      // traps SIGTERM and never exits
	unboundedOutput   = "unbounded-output"     // sends 100 KiB of output, not truncated
	streamEndsOnError = "stream-ends-on-error" // ends RunStream on one unusable request
	crashesLate       = "crashes-late"         // panics on its 1500th call
	leaksGoroutine    = "leaks-goroutine"      // leaks one goroutine per check
	leaksFDOnTimeout  = "leaks-fd-on-timeout"  // leaks a descriptor per timed-out check
	leaksFDOnCancel   = "leaks-fd-on-cancel"   // leaks a descriptor per cancelled check
	noisyStdout       = "noisy-stdout"         // prints to stdout, which carries the handshake
	unconfigurable    = "unconfigurable"       // Configure fails with INTERNAL whatever the config
	acceptsAnyConfig  = "accepts-any-config"   // Configure takes fields it does not know
	runsUnconfigured  = "runs-unconfigured"    // checks before Configure
	acceptsAPIv99     = "accepts-api-v99"      // Configure takes an API version it does not speak
	describeMismatch  = "describe-mismatch"    // describe names another version than Info
	spawnsOnCancel    = "spawns-on-cancel"     // a slow check runs `sleep 1000` and leaves it running when cut short
)

const maxOutput = 64 << 10

func main() {
	kindName, name, _ := strings.Cut(strings.TrimPrefix(filepath.Base(os.Args[0]), "unyo-"), "-")
	kind, _ := base.ParseKind(kindName)
	p := &server{name: name, defect: name, kind: kind}
	if len(os.Args) == 2 && os.Args[1] == "describe" {
		version := "0.0.1"
		if p.defect == describeMismatch {
			version = "0.0.2"
		}
		b, _ := json.Marshal(map[string]any{"name": name, "version": version, "kinds": []string{kindName}, "api_versions": p.apiVersions()})
		fmt.Println(string(b))
		return
	}
	go watchParent()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		if p.defect != ignoresSIGTERM {
			os.Exit(0)
		}
	}()
	servers := base.Servers{Plugin: &pluginServer{p: p}, Check: &checkServer{p: p}}
	switch kind {
	case pluginv1.Kind_KIND_PROVIDER:
		servers = base.Servers{Plugin: &pluginServer{p: p}, Provider: &providerServer{p: p}}
	case pluginv1.Kind_KIND_ACTION:
		// No idle connections: they would count as leaked descriptors.
		client := http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		servers = base.Servers{Plugin: &pluginServer{p: p}, Action: &actionServer{p: p, client: client}}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: base.Handshake(),
		Plugins:         base.ServerPluginSet(servers),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(opts...)
			p.stop = s.Stop
			return s
		},
	})
}

// watchParent exits when the host is gone.
func watchParent() {
	ppid := os.Getppid()
	named, _ := strconv.Atoi(os.Getenv(base.EnvParentPID))
	for range time.Tick(250 * time.Millisecond) {
		if os.Getppid() != ppid || (named > 0 && syscall.Kill(named, 0) == syscall.ESRCH) {
			os.Exit(0)
		}
	}
}

type server struct {
	name       string
	defect     string // the binary's name: one of the defects, or none
	kind       pluginv1.Kind
	stateDir   string // a provider's resources, one file each
	url        string // what an action sends its GET to
	stop       func()
	configured atomic.Bool
	calls      atomic.Int64
	mu         sync.Mutex
	leaked     []*os.File
}

func (p *server) apiVersions() []uint32 {
	if p.defect == advertisesV2 {
		return []uint32{1, 2}
	}
	return []uint32{1}
}

type pluginServer struct {
	pluginv1.UnimplementedPluginServer
	p *server
}

func (s *pluginServer) Info(_ context.Context, req *pluginv1.InfoRequest) (*pluginv1.InfoResponse, error) {
	r := &pluginv1.InfoResponse{Name: s.p.name, Version: "0.0.1", Kinds: []pluginv1.Kind{s.p.kind}, ApiVersions: s.p.apiVersions()}
	r.SelectedApiVersion, _ = base.Negotiate(req.GetHostApiVersions(), r.ApiVersions)
	return r, nil
}

func (s *pluginServer) ConfigSchema(context.Context, *pluginv1.ConfigSchemaRequest) (*pluginv1.ConfigSchemaResponse, error) {
	if s.p.defect == schemaInvalid {
		return &pluginv1.ConfigSchemaResponse{JsonSchema: `{"type":"objekt"}`}, nil
	}
	switch s.p.kind {
	case pluginv1.Kind_KIND_PROVIDER:
		return &pluginv1.ConfigSchemaResponse{JsonSchema: providerConfigSchema}, nil
	case pluginv1.Kind_KIND_ACTION:
		return &pluginv1.ConfigSchemaResponse{JsonSchema: actionConfigSchema}, nil
	}
	return &pluginv1.ConfigSchemaResponse{JsonSchema: `{"type":"object","additionalProperties":false}`}, nil
}

func (s *pluginServer) Configure(_ context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	if s.p.defect == unconfigurable {
		return nil, status.Error(codes.Internal, "cannot read my own settings")
	}
	if v := req.GetApiVersion(); v != 1 && s.p.defect != acceptsAPIv99 {
		return nil, status.Errorf(codes.FailedPrecondition, "API v%d is not spoken here", v)
	}
	known := map[pluginv1.Kind]string{pluginv1.Kind_KIND_PROVIDER: "state_dir", pluginv1.Kind_KIND_ACTION: "url"}[s.p.kind]
	for k := range req.GetConfig().GetFields() {
		if s.p.defect == acceptsAnyConfig || k == known {
			continue
		}
		return nil, status.Errorf(codes.InvalidArgument, "config: unknown field %q", k)
	}
	switch s.p.kind {
	case pluginv1.Kind_KIND_PROVIDER:
		dir, err := providerConfig(req.GetConfig())
		if err != nil {
			return nil, err
		}
		s.p.mu.Lock()
		s.p.stateDir = dir
		s.p.mu.Unlock()
	case pluginv1.Kind_KIND_ACTION:
		url, err := actionConfig(req.GetConfig())
		if err != nil {
			return nil, err
		}
		s.p.mu.Lock()
		s.p.url = url
		s.p.mu.Unlock()
	}
	s.p.configured.Store(true)
	return &pluginv1.ConfigureResponse{}, nil
}

func (s *pluginServer) Probe(context.Context, *pluginv1.ProbeRequest) (*pluginv1.ProbeResponse, error) {
	if !s.p.configured.Load() {
		return &pluginv1.ProbeResponse{Reason: "not configured"}, nil
	}
	return &pluginv1.ProbeResponse{Ready: true, Goroutines: int64(runtime.NumGoroutine())}, nil
}

func (s *pluginServer) Shutdown(context.Context, *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	go func() {
		time.Sleep(50 * time.Millisecond) // let the answer go out
		s.p.stop()
		os.Exit(0)
	}()
	return &pluginv1.ShutdownResponse{}, nil
}

type checkServer struct {
	pluginv1.UnimplementedCheckServer
	p *server
}

func (s *checkServer) Run(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.RunResponse, error) {
	r, err := s.p.run(ctx, req)
	if err != nil {
		return nil, err
	}
	return &pluginv1.RunResponse{Result: r}, nil
}

// run performs one check: the result, or an INVALID_ARGUMENT or
// FAILED_PRECONDITION error, or CANCELLED when ctx ended first.
func (p *server) run(ctx context.Context, req *pluginv1.RunRequest) (*pluginv1.CheckResult, error) {
	if !p.configured.Load() && p.defect != runsUnconfigured {
		return nil, status.Error(codes.FailedPrecondition, "not configured")
	}
	if p.defect == noisyStdout {
		fmt.Println("checking", req.GetTarget().AsMap())
	}
	if n := p.calls.Add(1); p.defect == crashesLate && n == 1500 {
		go func() { panic(fmt.Sprintf("%s: call %d", crashesLate, n)) }() // not recovered: the process dies
	}
	if p.defect == leaksGoroutine {
		go func() { select {} }()
	}
	f := req.GetTarget().GetFields()
	st, ok := map[string]pluginv1.CheckStatus{
		"ok": pluginv1.CheckStatus_CHECK_STATUS_OK, "warning": pluginv1.CheckStatus_CHECK_STATUS_WARNING,
		"critical": pluginv1.CheckStatus_CHECK_STATUS_CRITICAL, "unknown": pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN,
	}[f["status"].GetStringValue()]
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "target.status: must be ok, warning, critical or unknown")
	}
	sleep, err := time.ParseDuration(or(f["sleep"].GetStringValue(), "0s"))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "target.sleep: %v", err)
	}
	budget := req.GetTimeout().AsDuration()
	if budget <= 0 {
		budget = 10 * time.Second
	}
	began := time.Now()
	res := &pluginv1.CheckResult{Status: st, Output: f["status"].GetStringValue(), Started: timestamppb.New(began)}
	if sleep > 0 && p.defect == spawnsOnCancel {
		// The work of the check in a child, never killed nor waited for
		// when the check is cut short: it outlives the call.
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // not outliving the test
		if cmd.Start() == nil {
			_ = cmd.Process.Release() // its descriptor (pidfd) is not the defect
		}
	}
	if sleep > 0 {
		t := time.NewTimer(min(sleep, budget))
		defer t.Stop()
		select {
		case <-ctx.Done():
			if p.defect == leaksFDOnCancel {
				p.leak()
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
		if sleep > budget {
			if p.defect == leaksFDOnTimeout {
				p.leak()
			}
			res.Status, res.TimedOut, res.Output = pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN, true, "timed out"
		}
	}
	if f["large"].GetBoolValue() {
		res.Output = strings.Repeat("x", 100<<10)
		if p.defect != unboundedOutput {
			res.Output, res.OutputTruncated = res.Output[:maxOutput], true
		}
	}
	res.Duration = durationpb.New(time.Since(began))
	return res, nil
}

func (p *server) leak() {
	if f, err := os.Open(os.DevNull); err == nil {
		p.mu.Lock()
		p.leaked = append(p.leaked, f)
		p.mu.Unlock()
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *checkServer) RunStream(stream pluginv1.Check_RunStreamServer) error {
	var (
		sendMu  sync.Mutex
		mu      sync.Mutex
		wg      sync.WaitGroup
		cancels = map[string]context.CancelFunc{}
	)
	defer wg.Wait()
	send := func(r *pluginv1.RunStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = stream.Send(r)
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // the host closed its side (or went away)
		}
		id := req.GetRequestId()
		if req.GetCancel() {
			mu.Lock()
			if c := cancels[id]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		}
		ctx, cancel := context.WithCancel(stream.Context())
		mu.Lock()
		cancels[id] = cancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(cancels, id); mu.Unlock(); cancel() }()
			res, err := s.p.run(ctx, req.GetRun())
			switch {
			case status.Code(err) == codes.Canceled:
				send(&pluginv1.RunStreamResponse{RequestId: id, Result: &pluginv1.CheckResult{Status: pluginv1.CheckStatus_CHECK_STATUS_UNKNOWN, Cancelled: true}})
			case err != nil:
				send(&pluginv1.RunStreamResponse{RequestId: id, Error: status.Convert(err).Message()})
			default:
				send(&pluginv1.RunStreamResponse{RequestId: id, Result: res})
			}
		}()
		if s.p.defect == streamEndsOnError && status.Code(firstError(req)) == codes.InvalidArgument {
			return status.Error(codes.InvalidArgument, "unusable request")
		}
	}
}

// firstError says whether a request is unusable, for the stream defect.
func firstError(req *pluginv1.RunStreamRequest) error {
	if _, ok := map[string]bool{"ok": true, "warning": true, "critical": true, "unknown": true}[req.GetRun().GetTarget().GetFields()["status"].GetStringValue()]; !ok {
		return status.Error(codes.InvalidArgument, "bad status")
	}
	return nil
}
