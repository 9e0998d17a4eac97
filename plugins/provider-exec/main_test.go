package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// TestMain lets the test binary act as the shim: in-process the plugin's
// os.Executable is this binary.
func TestMain(m *testing.M) {
	if code, ok := shimMain(); ok {
		os.Exit(code)
	}
	// Under -race every exiting binary sleeps 1s by default; the shims are
	// this binary.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

func serve(t *testing.T, stateDir string) *base.Conn {
	return testbin.Serve(t, &execProvider{}, map[string]any{"state_dir": stateDir})
}

func create(t *testing.T, c *base.Conn, id string, cmd ...any) *pluginv1.Resource {
	t.Helper()
	r, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: id, Labels: map[string]string{"owner": "test"},
		Config: testbin.Struct(t, map[string]any{"command": cmd})})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	t.Cleanup(func() {
		_, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: id, Grace: durationpb.New(time.Second)})
	})
	return r.Resource
}

// waitState polls Get until the resource reaches want or the deadline.
func waitState(t *testing.T, c *base.Conn, id string, want pluginv1.ResourceState) *pluginv1.Resource {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: id})
		if err == nil && g.Resource.State == want {
			return g.Resource
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %v, last %v %v", id, want, g.GetResource(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidOf(t *testing.T, r *pluginv1.Resource) int {
	t.Helper()
	pid, err := strconv.Atoi(r.Attributes["pid"])
	if err != nil || pid <= 0 {
		t.Fatalf("no pid in %v", r.Attributes)
	}
	return pid
}

func TestLifecycle(t *testing.T) {
	state := t.TempDir()
	c := serve(t, state)
	ctx := context.Background()
	r := create(t, c, "web/1", "sleep", "30")
	if r.State != sdk.Running || r.Handle.GetDriver() != name || r.Handle.GetVersion() != handleVersion {
		t.Fatalf("created: %v", r)
	}
	pid := pidOf(t, r)
	if !alive(pid, 0) {
		t.Fatalf("pid %d is not running", pid)
	}
	again, err := c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: "web/1", Labels: map[string]string{"owner": "test"},
		Config: testbin.Struct(t, map[string]any{"command": []any{"sleep", "30"}})})
	if err != nil || again.Created || pidOf(t, again.Resource) != pid {
		t.Fatalf("second create: %v %v", again, err)
	}
	_, err = c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: "web/1", Config: testbin.Struct(t, map[string]any{"command": []any{"sleep", "31"}})})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("conflicting create: %v", err)
	}
	l, err := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{"owner": "test"}})
	if err != nil || len(l.Resources) != 1 || l.Resources[0].Id != "web/1" {
		t.Fatalf("list: %v %v", l, err)
	}
	if l, _ := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{"owner": "other"}}); len(l.GetResources()) != 0 {
		t.Fatalf("list other: %v", l)
	}
	st, err := c.Provider.Stats(ctx, &pluginv1.StatsRequest{Id: "web/1"})
	if err != nil || len(st.Metrics) != 2 {
		t.Fatalf("stats: %v %v", st, err)
	}
	d, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "web/1", Grace: durationpb.New(time.Second)})
	if err != nil || !d.Existed {
		t.Fatalf("delete: %v %v", d, err)
	}
	if alive(pid, 0) {
		t.Errorf("pid %d survived Delete", pid)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("state left behind: %v", ents)
	}
	if d, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "web/1"}); err != nil || d.Existed {
		t.Errorf("second delete: %v %v", d, err)
	}
	if _, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "web/1"}); status.Code(err) != codes.NotFound {
		t.Errorf("get after delete: %v", err)
	}
	if _, err := c.Provider.Update(ctx, &pluginv1.UpdateRequest{Id: "web/1"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("update: %v", err)
	}
}

func TestExitRecorded(t *testing.T) {
	c := serve(t, t.TempDir())
	create(t, c, "ok", "true")
	create(t, c, "bad", "sh", "-c", "exit 3")
	if r := waitState(t, c, "ok", sdk.Stopped); r.Attributes["exit_code"] != "0" {
		t.Errorf("ok: %v", r)
	}
	if r := waitState(t, c, "bad", sdk.Broken); r.Reason != "exited with status 3" {
		t.Errorf("bad: %v", r)
	}
}

func TestFailedCreateLeavesNothing(t *testing.T) {
	state := t.TempDir()
	c := serve(t, state)
	_, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: "x",
		Config: testbin.Struct(t, map[string]any{"command": []any{filepath.Join(state, "no-such-program")}})})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("create: %v", err)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("state left behind: %v", ents)
	}
	_, err = c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: "y", Config: testbin.Struct(t, map[string]any{"command": []any{}})})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty command: %v", err)
	}
}

// TestRecoverAcrossInstances: the command outlives the plugin instance
// that created it, and a new instance recovers it from the handle alone.
func TestRecoverAcrossInstances(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	var handle *pluginv1.Handle
	var pid int
	t.Run("first", func(t *testing.T) {
		c := serve(t, state)
		r, err := c.Provider.Create(ctx, &pluginv1.CreateRequest{Id: "svc", Config: testbin.Struct(t, map[string]any{"command": []any{"sleep", "30"}})})
		if err != nil {
			t.Fatal(err)
		}
		handle, pid = r.Resource.Handle, pidOf(t, r.Resource)
	}) // the instance is stopped here
	c := serve(t, state)
	t.Cleanup(func() {
		_, _ = c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "svc", Grace: durationpb.New(time.Second)})
	})
	if !alive(pid, 0) {
		t.Fatal("the command died with the plugin instance")
	}
	r, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: "svc", Handle: handle})
	if err != nil || r.Resource.State != sdk.Running || pidOf(t, r.Resource) != pid {
		t.Fatalf("recover: %v %v", r, err)
	}
	bad := &pluginv1.Handle{Version: 9, Driver: name, State: handle.State}
	if _, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: "svc", Handle: bad}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("bad version: %v", err)
	}
	if _, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: "other", Handle: handle}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("wrong id: %v", err)
	}
	if _, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "svc", Grace: durationpb.New(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: "svc", Handle: handle}); status.Code(err) != codes.NotFound {
		t.Errorf("recover deleted: %v", err)
	}
}

func TestConfigure(t *testing.T) {
	p := &execProvider{}
	for _, cfg := range []map[string]any{{}, {"state_dir": "relative"}, {"state_dir": "/x", "extra": 1}} {
		if err := p.Configure(context.Background(), cfg); err == nil {
			t.Errorf("%v accepted", cfg)
		}
	}
}
