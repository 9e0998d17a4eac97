package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// named installs the crashy binary as unyo-check-<name> (its name picks
// how it starts) and returns the plugin's configuration.
func named(t *testing.T, name string) PluginConfig {
	t.Helper()
	src := filepath.Join(binDir, "unyo-check-crashy")
	bin := filepath.Join(t.TempDir(), "unyo-check-"+name)
	if err := os.Link(src, bin); err != nil {
		t.Fatal(err)
	}
	return PluginConfig{Kind: "check", Name: name, Path: bin, SHA256: sum(t, src)}
}

// TestMisbehavingAtStart: plugins that break the handshake are contained,
// named and end failed by the crash-loop breaker.
func TestMisbehavingAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"stdout", `did not start: it wrote "hello from a plugin that talks before its handshake" to stdout before its handshake`},
		{"silent", "did not start: no handshake within the start timeout (300ms)"},
		{"garbage", "did not answer Info: rpc error: code = Unavailable desc = connection error: desc = \"error reading server preface"},
		{"crashloop", "did not start: it exited before its handshake (exit status 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := named(t, tc.name)
			h, logs, rec := newHost(t, func(c *Config) { c.StartTimeout, c.CrashLoopLimit = 300*time.Millisecond, 2 }, pc)
			_ = h.Start(context.Background())
			p, _ := h.Plugin("check", tc.name)
			// The state changes before its report reaches OnStateChange: wait for both.
			testutil.Until(t, 20*time.Second, "failed state, reported", func() bool { return p.Status().State == StateFailed && rec.has(StateFailed) })
			st := p.Status()
			for _, w := range []string{"plugin check/" + tc.name, "crash-looped", tc.want} {
				if !strings.Contains(st.LastError, w) || strings.Contains(st.LastError, "\n") {
					t.Errorf("last error lacks %q or spans lines: %s\n%s", w, st.LastError, logs)
				}
			}
			if st.Restarts != 3 || !rec.has(StateBackoff) || !rec.has(StateFailed) {
				t.Errorf("restarts %d, backoff reported %v, failed reported %v", st.Restarts, rec.has(StateBackoff), rec.has(StateFailed))
			}
			if _, err := run(t, p, "ok", time.Second); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "plugin check/"+tc.name+" is failed") {
				t.Errorf("call to the failed plugin: %v", err)
			}
			if pids := procstat.PIDsOf(pc.Path); len(pids) != 0 {
				t.Errorf("processes of the failed plugin left: %v", pids)
			}
		})
	}
}

// TestMisbehavingInCalls: a plugin that panics, hangs or leaks children
// during a check is contained and named; the host recovers it.
func TestMisbehavingInCalls(t *testing.T) {
	for _, tc := range []struct {
		mode string
		// check judges the call's answer.
		check func(t *testing.T, res *pluginv1.CheckResult, err error, took time.Duration)
	}{
		{"panic", func(t *testing.T, _ *pluginv1.CheckResult, err error, took time.Duration) {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "plugin check/crashy exited during the call (exit status 2; its stderr: panic: crashy was told to panic)") {
				t.Errorf("call that panicked: %v", err)
			}
			if took > 2*time.Second {
				t.Errorf("failed after %s, not promptly", took)
			}
		}},
		{"hang", func(t *testing.T, _ *pluginv1.CheckResult, err error, _ time.Duration) {
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "plugin check/crashy") {
				t.Errorf("call to a hung plugin: %v", err)
			}
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h, _, rec := newHost(t, func(c *Config) {
				// Only a call that goes unanswered makes the supervisor probe.
				c.HealthInterval, c.HealthTimeout = time.Hour, 200*time.Millisecond
			}, crashy(t))
			if err := h.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			p, _ := h.Plugin("check", "crashy")
			pid := p.PID()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			tg, _ := structpb.NewStruct(map[string]any{"mode": tc.mode})
			t0 := time.Now()
			res, err := p.Check(ctx, &pluginv1.RunRequest{Target: tg, Timeout: durationpb.New(time.Second)})
			tc.check(t, res, err, time.Since(t0))
			testutil.Until(t, 20*time.Second, "the plugin replaced", func() bool {
				return p.Status().State == StateRunning && p.PID() != pid && p.PID() != 0
			})
			if procstat.Alive(pid) || !rec.has(StateBackoff) {
				t.Errorf("old plugin alive %v, backoff reported %v", procstat.Alive(pid), rec.has(StateBackoff))
			}
			if _, err := run(t, p, "ok", time.Second); err != nil {
				t.Errorf("after recovery: %v", err)
			}
		})
	}
}

// TestLeakedChildrenKilled: children a plugin leaves running die with it,
// whether it crashes or is stopped.
func TestLeakedChildrenKilled(t *testing.T) {
	h, _, _ := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	leak := func() int {
		t.Helper()
		res, err := run(t, p, "leak", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		child, err := strconv.Atoi(strings.TrimPrefix(res.GetOutput(), "OK leaked "))
		if err != nil || !procstat.Alive(child) {
			t.Fatalf("leak answered %q (%v)", res.GetOutput(), err)
		}
		return child
	}
	child := leak()
	pid := p.PID()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	testutil.Until(t, 10*time.Second, "the leaked child to die with its plugin", func() bool { return !procstat.Alive(child) })
	testutil.Until(t, 10*time.Second, "restart", func() bool { return p.PID() != 0 && p.PID() != pid })
	child = leak()
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, "the leaked child to die on Close", func() bool { return !procstat.Alive(child) })
}

// TestStreamMixesConcurrentRuns: many concurrent checks share the one
// stream, and each caller gets its own answer whatever the completion
// order.
func TestStreamMixesConcurrentRuns(t *testing.T) {
	h, _, _ := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			mode := fmt.Sprintf("m%d", i)
			timeout := time.Second
			if i%10 == 0 { // slow ones, answered after later fast ones
				mode, timeout = "sleep", 100*time.Millisecond
			}
			res, err := run(t, p, mode, timeout)
			switch {
			case err != nil:
				errs <- err
			case mode == "sleep" && !res.GetTimedOut():
				errs <- fmt.Errorf("run %d: %v", i, res)
			case mode != "sleep" && res.GetOutput() != "OK "+mode:
				errs <- fmt.Errorf("run %d got %q", i, res.GetOutput())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := currentStream(p)
	if s == nil || s.next.Load() != 400 {
		t.Errorf("runs did not share one stream: %+v", s)
	}
}

// TestStreamPluginDiesMidStream: every run in flight when the plugin dies
// fails at once with an error naming it; later runs go over a new stream
// to the restarted plugin.
func TestStreamPluginDiesMidStream(t *testing.T) {
	h, _, _ := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	pid := p.PID()
	if _, err := run(t, p, "ok", time.Second); err != nil { // opens the stream
		t.Fatal(err)
	}
	errc := make(chan error, 20)
	for range 20 {
		go func() { _, err := run(t, p, "sleep", 30*time.Second); errc <- err }()
	}
	testutil.Until(t, 5*time.Second, "runs in flight", func() bool {
		s := currentStream(p)
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 20
	})
	t0 := time.Now()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 20 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "plugin check/crashy exited during the call (signal: killed)") {
				t.Errorf("in-flight run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("in-flight runs did not fail after the plugin died")
		}
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("in-flight runs failed after %s", d)
	}
	testutil.Until(t, 10*time.Second, "restart", func() bool { return p.PID() != 0 && p.PID() != pid })
	if res, err := run(t, p, "again", time.Second); err != nil || res.GetOutput() != "OK again" {
		t.Fatalf("after restart: %v %v", res, err)
	}
}

// unaryOnly serves Check.Run but not RunStream, as a plugin built against
// another SDK might.
type unaryOnly struct {
	pluginv1.UnimplementedCheckServer
}

func (unaryOnly) Run(context.Context, *pluginv1.RunRequest) (*pluginv1.RunResponse, error) {
	return &pluginv1.RunResponse{Result: &pluginv1.CheckResult{Status: sdk.OK, Output: "unary"}}, nil
}

// TestRunFallbackWithoutStream: a plugin that does not serve RunStream
// gets its checks through Run.
func TestRunFallbackWithoutStream(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginv1.RegisterCheckServer(srv, unaryOnly{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	h, _, _ := newHost(t, nil)
	p := newPlugin(h, PluginConfig{Kind: "check", Name: "unary"})
	p.inst = &instance{conn: base.NewConn(cc, make(chan struct{}))}
	for i := range 3 {
		res, err := p.Check(context.Background(), &pluginv1.RunRequest{})
		if err != nil || res.GetOutput() != "unary" {
			t.Fatalf("run %d: %v %v", i, res, err)
		}
	}
	if !p.inst.noStream {
		t.Error("the plugin was not marked as not streaming")
	}
}

// currentStream is the running instance's check stream.
func currentStream(p *Plugin) *checkStream {
	p.mu.Lock()
	inst := p.inst
	p.mu.Unlock()
	inst.streamMu.Lock()
	defer inst.streamMu.Unlock()
	return inst.stream
}
