package sdk

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// fake implements every kind, with behaviour steered by the request.
type fake struct {
	acts     atomic.Int32
	mu       sync.Mutex
	resource map[string]Resource
}

func (f *fake) Info() Info           { return Info{Name: "fake", Version: "0.1.0"} }
func (f *fake) ConfigSchema() string { return `{"type":"object"}` }
func (f *fake) Configure(_ context.Context, c map[string]any) error {
	if _, bad := c["bad"]; bad {
		return Invalid("bad", "is not allowed")
	}
	return nil
}
func (f *fake) Probe(context.Context) (bool, string) { return true, "" }

func (f *fake) Check(ctx context.Context, req CheckRequest) (CheckResult, error) {
	switch req.Target["mode"] {
	case "sleep":
		<-ctx.Done() // honours ctx
		return CheckResult{Status: Critical, Output: "gave up"}, nil
	case "stuck":
		time.Sleep(300 * time.Millisecond) // ignores ctx
		return CheckResult{Status: OK}, nil
	case "panic":
		panic("boom")
	case "invalid":
		return CheckResult{}, Invalid("mode", "unknown")
	case "huge":
		return CheckResult{Status: OK, Output: strings.Repeat("é", MaxOutput)}, nil
	}
	return CheckResult{Status: Warning, Output: "id=" + req.Target["id"].(string)}, nil
}

func (f *fake) Execute(ctx context.Context, req ActionRequest, progress func(string)) Outcome {
	progress("starting")
	if req.DryRun {
		return Outcome{Status: Succeeded, Message: "would act"}
	}
	if req.Params["wait"] == true {
		<-ctx.Done()
		return Outcome{Status: Failed, Message: "interrupted"}
	}
	f.acts.Add(1)
	time.Sleep(20 * time.Millisecond)
	return Outcome{Status: Succeeded, Message: "done"}
}

func (f *fake) ResourceType() string   { return "thing" }
func (f *fake) ResourceSchema() string { return "{}" }
func (f *fake) Validate(_ context.Context, c map[string]any) error {
	if _, ok := c["size"]; !ok {
		return Invalid("size", "is required")
	}
	return nil
}
func (f *fake) Create(_ context.Context, req CreateRequest) (Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.resource[req.ID]; ok {
		return Resource{}, errors.New("created twice: SDK did not serialize")
	}
	r := Resource{ID: req.ID, Config: req.Config, State: Running}
	f.resource[req.ID] = r
	return r, nil
}
func (f *fake) Get(_ context.Context, id string) (Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.resource[id]
	if !ok {
		return Resource{}, ErrNotFound
	}
	return r, nil
}
func (f *fake) Delete(_ context.Context, id string, _ time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.resource[id]
	delete(f.resource, id)
	return ok, nil
}

type clients struct {
	plugin   pluginv1.PluginClient
	check    pluginv1.CheckClient
	action   pluginv1.ActionClient
	provider pluginv1.ProviderClient
	ip       *InProcess
}

func start(t *testing.T, configure bool) clients {
	t.Helper()
	ip, err := ServeInProcess(&fake{resource: map[string]Resource{}}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip.Stop(time.Second) })
	conn, err := grpc.NewClient("unix://"+ip.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := clients{pluginv1.NewPluginClient(conn), pluginv1.NewCheckClient(conn), pluginv1.NewActionClient(conn), pluginv1.NewProviderClient(conn), ip}
	if configure {
		if _, err := c.plugin.Configure(context.Background(), &pluginv1.ConfigureRequest{ApiVersion: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func target(t *testing.T, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInfoAndConfigure(t *testing.T) {
	ctx := context.Background()
	c := start(t, false)
	info, err := c.plugin.Info(ctx, &pluginv1.InfoRequest{HostApiVersions: []uint32{1, 7}})
	if err != nil || info.SelectedApiVersion != 1 || len(info.Kinds) != 3 {
		t.Fatalf("Info = %v, %v", info, err)
	}
	if _, err := c.check.Run(ctx, &pluginv1.RunRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Run before Configure: %v, want FAILED_PRECONDITION", err)
	}
	_, err = c.plugin.Configure(ctx, &pluginv1.ConfigureRequest{Config: target(t, map[string]any{"bad": 1})})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || len(st.Details()) != 1 {
		t.Fatalf("bad config: %v", err)
	}
	if br, ok := st.Details()[0].(*errdetails.BadRequest); !ok || br.FieldViolations[0].Field != "bad" {
		t.Fatalf("details = %v", st.Details())
	}
	if _, err := c.plugin.Configure(ctx, &pluginv1.ConfigureRequest{ApiVersion: 9}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("unknown API version: %v", err)
	}
}

func TestCheckTimeoutsAndBounds(t *testing.T) {
	ctx := context.Background()
	c := start(t, true)
	run := func(mode string) (*pluginv1.CheckResult, error) {
		r, err := c.check.Run(ctx, &pluginv1.RunRequest{Target: target(t, map[string]any{"mode": mode, "id": "x"}), Timeout: durationpb.New(100 * time.Millisecond)})
		return r.GetResult(), err
	}
	for _, mode := range []string{"sleep", "stuck"} {
		t0 := time.Now()
		r, err := run(mode)
		if err != nil || !r.TimedOut || r.Status != Unknown {
			t.Fatalf("%s: %v %v", mode, r, err)
		}
		if d := time.Since(t0); d > 100*time.Millisecond+lateMargin+100*time.Millisecond {
			t.Errorf("%s: answered after %s", mode, d)
		}
	}
	if r, err := run("panic"); err != nil || r.Status != Unknown || !strings.Contains(r.Output, "boom") {
		t.Fatalf("panic: %v %v", r, err)
	}
	if _, err := run("invalid"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("invalid: %v", err)
	}
	r, err := run("huge")
	if err != nil || !r.OutputTruncated || len(r.Output) > MaxOutput || !strings.HasSuffix(r.Output, "é") {
		t.Fatalf("huge: truncated=%v len=%d err=%v", r.GetOutputTruncated(), len(r.GetOutput()), err)
	}
}

func TestRunStreamKeepsIDs(t *testing.T) {
	c := start(t, true)
	st, err := c.check.RunStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		id := string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		if err := st.Send(&pluginv1.RunStreamRequest{RequestId: id, Run: &pluginv1.RunRequest{Target: target(t, map[string]any{"id": id})}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Send(&pluginv1.RunStreamRequest{RequestId: "slow", Run: &pluginv1.RunRequest{Target: target(t, map[string]any{"mode": "sleep"})}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pluginv1.RunStreamRequest{RequestId: "slow", Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		got++
		if r.RequestId == "slow" {
			if !r.Result.Cancelled {
				t.Errorf("slow not cancelled: %v", r)
			}
			continue
		}
		if r.Result.Output != "id="+r.RequestId {
			t.Errorf("request %s got %q", r.RequestId, r.Result.Output)
		}
	}
	if got != n+1 {
		t.Errorf("got %d answers, want %d", got, n+1)
	}
}

func execute(t *testing.T, c clients, key string, params map[string]any, dry bool) (*pluginv1.Outcome, int) {
	t.Helper()
	st, err := c.action.Execute(context.Background(), &pluginv1.ExecuteRequest{IdempotencyKey: key, DryRun: dry, Params: target(t, params)})
	if err != nil {
		t.Fatal(err)
	}
	var out *pluginv1.Outcome
	progress := 0
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if o := r.GetOutcome(); o != nil {
			if out != nil {
				t.Errorf("second outcome %v", o)
			}
			out = o
		} else {
			progress++
		}
	}
	return out, progress
}

func TestActionIdempotencyAndCancel(t *testing.T) {
	c := start(t, true)
	var wg sync.WaitGroup
	outs := make([]*pluginv1.Outcome, 5)
	for i := range outs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], _ = execute(t, c, "k1", nil, false) }()
	}
	wg.Wait()
	replayed := 0
	for _, o := range outs {
		if o.GetStatus() != Succeeded {
			t.Fatalf("outcome %v", o)
		}
		if o.Replayed {
			replayed++
		}
	}
	if replayed != 4 {
		t.Errorf("replayed %d of 5, want 4", replayed)
	}
	if o, p := execute(t, c, "k2", nil, true); o.Status != Succeeded || o.Replayed || p != 1 {
		t.Errorf("dry run: %v progress=%d", o, p)
	}
	done := make(chan *pluginv1.Outcome)
	go func() { o, _ := execute(t, c, "k3", map[string]any{"wait": true}, false); done <- o }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := c.action.Cancel(context.Background(), &pluginv1.CancelRequest{IdempotencyKey: "k3"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("k3 never became cancellable")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if o := <-done; o.Status != Cancelled {
		t.Errorf("cancelled outcome = %v", o)
	}
	st, _ := c.action.Execute(context.Background(), &pluginv1.ExecuteRequest{})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("missing key: %v", err)
	}
}

func TestProviderSemantics(t *testing.T) {
	ctx := context.Background()
	c := start(t, true)
	cfg := target(t, map[string]any{"size": 1})
	var wg sync.WaitGroup
	var created atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.provider.Create(ctx, &pluginv1.CreateRequest{Id: "r1", Config: cfg})
			if err != nil {
				t.Error(err)
				return
			}
			if r.Created {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Errorf("created %d times", created.Load())
	}
	_, err := c.provider.Create(ctx, &pluginv1.CreateRequest{Id: "r1", Config: target(t, map[string]any{"size": 2})})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("conflicting create: %v", err)
	}
	if _, err := c.provider.Create(ctx, &pluginv1.CreateRequest{Id: "r2", Config: target(t, map[string]any{})}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid create: %v", err)
	}
	if _, err := c.provider.Get(ctx, &pluginv1.GetRequest{Id: "r2"}); status.Code(err) != codes.NotFound {
		t.Errorf("get unknown: %v", err)
	}
	if r, err := c.provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "nope"}); err != nil || r.Existed {
		t.Errorf("delete unknown: %v %v", r, err)
	}
	sc, _ := c.provider.Schema(ctx, &pluginv1.SchemaRequest{})
	if len(sc.Operations) != 2 {
		t.Errorf("operations = %v", sc.Operations)
	}
	if _, err := c.provider.List(ctx, &pluginv1.ListRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("List: %v", err)
	}
}

func TestShutdownDrains(t *testing.T) {
	c := start(t, true)
	res := make(chan error, 1)
	go func() {
		_, err := c.check.Run(context.Background(), &pluginv1.RunRequest{Target: target(t, map[string]any{"mode": "stuck"}), Timeout: durationpb.New(time.Second)})
		res <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the call start; the assertion does not depend on it
	if _, err := c.plugin.Shutdown(context.Background(), &pluginv1.ShutdownRequest{Grace: durationpb.New(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Errorf("in-flight call during graceful shutdown: %v", err)
	}
	select {
	case <-c.ip.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop after Shutdown")
	}
}

func TestDescribe(t *testing.T) {
	out, err := Describe(&fake{})
	if err != nil || !strings.Contains(string(out), `"kinds": [`) {
		t.Fatalf("%s %v", out, err)
	}
}

// stuckCloser's Close ignores its context.
type stuckCloser struct {
	fake
	release chan struct{}
}

func (s *stuckCloser) Close(context.Context) error { <-s.release; return nil }

// TestShutdownBoundsClose: a Close that ignores its context does not hang
// Shutdown: the server stops once the close timeout has passed.
func TestShutdownBoundsClose(t *testing.T) {
	p := &stuckCloser{fake: fake{resource: map[string]Resource{}}, release: make(chan struct{})}
	defer close(p.release)
	ip, err := ServeInProcess(p, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ip.rt.closeTimeout = 100 * time.Millisecond
	done := make(chan struct{})
	go func() { ip.Stop(0); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return: Close that ignores its context hangs shutdown")
	}
}
