package host

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// binDir holds the binaries built once for the whole test run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "unyo-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = testbin.Build(dir,
		[]string{"./testdata/unyo-check-crashy", "../check-tcp", "./testdata/hostprog"},
		[]string{"unyo-check-crashy", "unyo-check-tcp", "hostprog"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func sum(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// syncBuf is a log sink the test can read while plugins write to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type recorder struct {
	mu      sync.Mutex
	changes []StateChange
}

func (r *recorder) add(c StateChange) { r.mu.Lock(); r.changes = append(r.changes, c); r.mu.Unlock() }
func (r *recorder) has(to State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.changes {
		if c.To == to {
			return true
		}
	}
	return false
}

func newHost(t *testing.T, mod func(*Config), plugins ...PluginConfig) (*Host, *syncBuf, *recorder) {
	t.Helper()
	logs, rec := &syncBuf{}, &recorder{}
	cfg := Config{
		Dirs: []string{binDir}, Plugins: plugins, TempDir: shortTempDir(t),
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnStateChange: rec.add,
		BackoffMin:    10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		HealthInterval: 50 * time.Millisecond, ShutdownGrace: time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(h.SocketDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket dir %s left behind: %v", h.SocketDir(), err)
		}
	})
	return h, logs, rec
}

func crashy(t *testing.T, env ...string) PluginConfig {
	return PluginConfig{Kind: "check", Name: "crashy", SHA256: sum(t, filepath.Join(binDir, "unyo-check-crashy")), Env: env}
}

func run(t *testing.T, p *Plugin, mode string, timeout time.Duration) (*pluginv1.CheckResult, error) {
	tg, _ := structpb.NewStruct(map[string]any{"mode": mode})
	return p.Check(context.Background(), &pluginv1.RunRequest{Target: tg, Timeout: durationpb.New(timeout)})
}

func TestStartCallStatusAndLogRelay(t *testing.T) {
	h, logs, _ := newHost(t, nil, crashy(t),
		PluginConfig{Kind: "check", Name: "tcp", SHA256: sum(t, filepath.Join(binDir, "unyo-check-tcp"))})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	res, err := run(t, p, "print", time.Second)
	if err != nil || res.Status != pluginv1.CheckStatus_CHECK_STATUS_OK {
		t.Fatalf("Check = %v, %v\n%s", res, err, logs)
	}
	for _, st := range h.Status() {
		if st.State != StateRunning || st.Version == "" || st.APIVersion != 1 || st.PID == 0 {
			t.Errorf("status %+v", st)
		}
	}
	testutil.Until(t, 5*time.Second, "relayed plugin log", func() bool {
		l := logs.String()
		return strings.Contains(l, "msg=checking") && strings.Contains(l, "plugin=check/crashy") && strings.Contains(l, "stray stderr line")
	})
}

func TestChecksumMismatchRefused(t *testing.T) {
	pc := crashy(t)
	actual := pc.SHA256
	pc.SHA256 = strings.Repeat("0", 64)
	h, _, _ := newHost(t, nil, pc)
	err := h.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), actual) || !strings.Contains(err.Error(), pc.SHA256) {
		t.Fatalf("error %v should show both hashes", err)
	}
	if st := h.Status()[0]; st.State != StateFailed {
		t.Errorf("state %s", st.State)
	}
	if _, err := New(Config{Plugins: []PluginConfig{{Kind: "check", Name: "x"}}}); err == nil {
		t.Error("unpinned plugin accepted")
	}
}

func TestCrashFailsCallAndRestarts(t *testing.T) {
	h, _, rec := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	pid := p.PID()
	t0 := time.Now()
	_, err := run(t, p, "crash", 5*time.Second)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "check/crashy") {
		t.Fatalf("call to crashing plugin: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("failed after %s, not promptly", d)
	}
	testutil.Until(t, 10*time.Second, "restart", func() bool { return p.PID() != 0 && p.PID() != pid && p.Status().State == StateRunning })
	if _, err := run(t, p, "ok", time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if st := p.Status(); st.Restarts != 1 || !strings.Contains(st.LastError, "exit status 7") {
		t.Errorf("status %+v", st)
	}
	if !rec.has(StateBackoff) {
		t.Error("no backoff state reported")
	}
	if procstat.Alive(pid) {
		t.Errorf("old plugin %d still alive", pid)
	}
}

func TestSIGKILLDuringCall(t *testing.T) {
	h, _, _ := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	pid := p.PID()
	errc := make(chan error, 1)
	go func() { _, err := run(t, p, "sleep", 30*time.Second); errc <- err }()
	time.Sleep(50 * time.Millisecond) // let the call reach the plugin; either way the call must fail
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("in-flight call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight call did not fail after SIGKILL")
	}
	testutil.Until(t, 10*time.Second, "recovery", func() bool { return p.PID() != 0 && p.PID() != pid })
	entries, _ := os.ReadDir(h.SocketDir())
	if len(entries) != 1 {
		t.Errorf("socket dir holds %d entries after restart, want 1 (the live plugin's)", len(entries))
	}
}

func TestCrashLoopBreaker(t *testing.T) {
	h, _, rec := newHost(t, func(c *Config) { c.CrashLoopLimit = 2 }, crashy(t, "CRASHY_EXIT_AT_START=1"))
	_ = h.Start(context.Background())
	p, _ := h.Plugin("check", "crashy")
	// The state changes before its report reaches OnStateChange: wait for both.
	testutil.Until(t, 10*time.Second, "failed state, reported", func() bool { return p.Status().State == StateFailed && rec.has(StateFailed) })
	if st := p.Status(); !strings.Contains(st.LastError, "crash-looped") || st.Restarts != 3 {
		t.Errorf("status %+v", st)
	}
	if _, err := run(t, p, "ok", time.Second); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "failed") {
		t.Errorf("call to failed plugin: %v", err)
	}
	if !rec.has(StateFailed) {
		t.Error("failed state not reported")
	}
}

func TestPermanentFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		pc   PluginConfig
		want []string
	}{
		"version": {crashy(t, "CRASHY_API=2"), []string{"host supports v1", "plugin supports v2"}},
		"config":  {func() PluginConfig { c := crashy(t); c.Config = map[string]any{"reject": true}; return c }(), []string{"rejected its configuration", "field reject"}},
		"wrongkind": {func() PluginConfig {
			c := crashy(t)
			c.Kind = "action"
			c.Path = filepath.Join(binDir, "unyo-check-crashy")
			return c
		}(), []string{"configured as a action plugin"}},
	} {
		t.Run(name, func(t *testing.T) {
			h, _, _ := newHost(t, nil, tc.pc)
			_ = h.Start(context.Background())
			st := h.Status()[0]
			if st.State != StateFailed || st.Restarts != 0 {
				t.Fatalf("status %+v", st)
			}
			for _, w := range tc.want {
				if !strings.Contains(st.LastError, w) {
					t.Errorf("last error %q lacks %q", st.LastError, w)
				}
			}
		})
	}
}

func TestDegradedAndUnhealthy(t *testing.T) {
	h, _, rec := newHost(t, nil, crashy(t, "CRASHY_UNREADY=1"))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	testutil.Until(t, 5*time.Second, "degraded", func() bool { return p.Status().State == StateDegraded })
	if !strings.Contains(p.Status().LastError, "told to be unready") {
		t.Errorf("status %+v", p.Status())
	}
	pid := p.PID()
	// A stopped (hung) plugin fails its probes and is replaced.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 20*time.Second, "hung plugin replaced", func() bool { return p.PID() != 0 && p.PID() != pid })
	if !rec.has(StateBackoff) || procstat.Alive(pid) {
		t.Errorf("hung plugin: backoff reported %v, old alive %v", rec.has(StateBackoff), procstat.Alive(pid))
	}
}

func TestCloseShutsDownGracefully(t *testing.T) {
	h, logs, rec := newHost(t, nil, crashy(t))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	pid := p.PID()
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if procstat.Alive(pid) {
		t.Errorf("plugin %d alive after Close", pid)
	}
	if strings.Contains(logs.String(), "failed to exit gracefully") {
		t.Error("plugin had to be killed on Close")
	}
	if !rec.has(StateStopped) {
		t.Error("stopped not reported")
	}
}

func TestNoOrphanWhenHostDies(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "hostprog"), filepath.Join(binDir, "unyo-check-crashy"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("hostprog said %q", line)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	testutil.Until(t, 10*time.Second, "plugin to die with its host", func() bool { return !procstat.Alive(pid) })
}

func TestDiscover(t *testing.T) {
	found, err := Discover([]string{binDir, "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range found {
		names[f.Kind+"/"+f.Name] = true
	}
	if !names["check/crashy"] || !names["check/tcp"] || len(found) != 2 {
		t.Errorf("found %v", found)
	}
}

// shortTempDir keeps socket paths under the unix limit; t.TempDir() can be
// long enough to break them (which New reports).
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "uh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestLongTempDirRefused(t *testing.T) {
	d := filepath.Join(t.TempDir(), strings.Repeat("x", 80))
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{TempDir: d}); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long temp dir: %v", err)
	}
}

// crashyCopy copies the crashy binary to a file of the test's own, which it
// may change; it returns the path and the original bytes.
func crashyCopy(t *testing.T) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "unyo-check-crashy"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "unyo-check-crashy")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, b
}

// TestDigestCachedAcrossRestarts: a restart of an unchanged binary does not
// hash it again; touching it does; changing it in place is still refused.
func TestDigestCachedAcrossRestarts(t *testing.T) {
	bin, b := crashyCopy(t)
	pc := crashy(t)
	pc.Path = bin
	// Long enough a backoff to rewrite the binary while nothing runs it.
	h, logs, _ := newHost(t, func(c *Config) { c.BackoffMin, c.BackoffMax = 300*time.Millisecond, 300*time.Millisecond }, pc)
	h.racy = 0 // the copy was just written
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	restart := func(whileDown func()) {
		t.Helper()
		pid := p.PID()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if whileDown != nil {
			testutil.Until(t, 5*time.Second, "backoff", func() bool { return p.Status().State == StateBackoff })
			whileDown()
		}
		testutil.Until(t, 10*time.Second, "a restart", func() bool {
			st := p.Status()
			return st.State == StateFailed || (st.State == StateRunning && st.PID != pid && st.PID != 0)
		})
	}
	if n := h.hashes.Load(); n != 1 {
		t.Fatalf("first start hashed %d times", n)
	}
	restart(nil)
	if n := h.hashes.Load(); n != 1 || p.Status().State != StateRunning {
		t.Fatalf("restart of an unchanged binary: %d hashes, state %s\n%s", n, p.Status().State, logs)
	}
	if !strings.Contains(logs.String(), "file unchanged since it was hashed") {
		t.Errorf("no log of the cached verification:\n%s", logs)
	}
	// Same bytes, new mtime and ctime: hashed again and accepted.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	restart(nil)
	if n := h.hashes.Load(); n != 2 || p.Status().State != StateRunning {
		t.Fatalf("restart of a touched binary: %d hashes, state %s", n, p.Status().State)
	}
	// Rewritten in place, same size: refused.
	restart(func() {
		f, err := os.OpenFile(bin, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{b[len(b)-1] ^ 0xff}, int64(len(b)-1)); err != nil {
			t.Fatal(err)
		}
	})
	st := p.Status()
	if st.State != StateFailed || !strings.Contains(st.LastError, "refused") || !strings.Contains(st.LastError, pc.SHA256) {
		t.Fatalf("rewritten binary: state %s, %q", st.State, st.LastError)
	}
	if n := h.hashes.Load(); n != 3 {
		t.Errorf("rewritten binary hashed %d times in all, want 3", n)
	}
}

// TestDigestNotCachedWhenRacy: a file changed within the racy window is
// hashed every time.
func TestDigestNotCachedWhenRacy(t *testing.T) {
	h, _, _ := newHost(t, nil)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, cached, err := h.digest(path); err != nil || cached {
			t.Fatalf("digest of a fresh file: cached=%v %v", cached, err)
		}
	}
	h.racy = -time.Hour
	_, _, _ = h.digest(path)
	if d, cached, err := h.digest(path); err != nil || !cached || d != "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" {
		t.Fatalf("digest outside the window: %s cached=%v %v", d, cached, err)
	}
	if n := h.hashes.Load(); n != 3 {
		t.Errorf("%d hashes, want 3", n)
	}
}

// TestDigestCachePersists: a later Host (an agent restart) with the same
// DigestCache file trusts an unchanged binary without hashing it, hashes a
// changed one again and refuses it when it no longer matches the pin, and
// ignores a cache file it cannot read.
func TestDigestCachePersists(t *testing.T) {
	bin, b := crashyCopy(t)
	cache := filepath.Join(t.TempDir(), "data", "plugin-digests.json")
	pc := crashy(t)
	pc.Path = bin
	start := func(t *testing.T, racy time.Duration) (*Host, *syncBuf) {
		t.Helper()
		h, logs, _ := newHost(t, func(c *Config) { c.DigestCache = cache }, pc)
		h.racy = racy
		_ = h.Start(context.Background())
		return h, logs
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T)
		racy   time.Duration
		hashes int64
		state  State
	}{
		{"first start hashes and records", nil, 0, 1, StateRunning},
		{"a restart trusts the record", nil, 0, 0, StateRunning},
		{"a touched file is hashed again", func(t *testing.T) {
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(bin, later, later); err != nil {
				t.Fatal(err)
			}
		}, 0, 1, StateRunning},
		{"a racy change is not recorded", func(t *testing.T) {
			if err := os.Chtimes(bin, time.Now(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}, time.Hour, 1, StateRunning},
		{"so it is hashed again", nil, 0, 1, StateRunning},
		{"an unreadable cache is ignored", func(t *testing.T) {
			if err := os.WriteFile(cache, []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, 1, StateRunning},
		{"a rewritten binary is refused", func(t *testing.T) {
			f, err := os.OpenFile(bin, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{b[len(b)-1] ^ 0xff}, int64(len(b)-1)); err != nil {
				t.Fatal(err)
			}
		}, 0, 1, StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			h, logs := start(t, tc.racy)
			if n := h.hashes.Load(); n != tc.hashes {
				t.Errorf("%d hashes, want %d\n%s", n, tc.hashes, logs)
			}
			if st := h.Status()[0]; st.State != tc.state {
				t.Errorf("state %s (%s)", st.State, st.LastError)
			}
		})
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file: %v %v", fi, err)
	}
}

// A plugin gets procenv's base, the declared variables and its own
// configured Env, never the host's UNYO_* settings (tokens) nor anything
// undeclared.
func TestPluginEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("UNYO_AGENT_TOKEN", "agent-secret")
	t.Setenv("SOME_SECRET", "other-secret")
	t.Setenv("HTTPS_PROXY", "http://proxy.example.com:3128")
	h, logs, _ := newHost(t, func(c *Config) { c.PassEnv = []string{"HTTPS_PROXY"} }, crashy(t, "CONFIGURED=1"))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	res, err := run(t, p, "env", 5*time.Second)
	if err != nil {
		t.Fatalf("Check: %v\n%s", err, logs)
	}
	env := strings.Split(res.GetOutput(), "\n")
	for _, want := range []string{"HTTPS_PROXY=http://proxy.example.com:3128", "CONFIGURED=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("plugin environment lacks %s:\n%s", want, res.GetOutput())
		}
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		// The handshake's own variables are the host's to set.
		if name == "UNYO_PLUGIN_MAGIC_COOKIE" || name == "UNYO_PLUGIN_PARENT_PID" {
			continue
		}
		if strings.HasPrefix(name, "UNYO_") || name == "SOME_SECRET" {
			t.Errorf("plugin environment has %s", kv)
		}
	}
}

func TestPassEnvRefusesUnyoVariables(t *testing.T) {
	_, err := New(Config{AllowUnpinned: true, PassEnv: []string{"PATH", "UNYO_AGENT_TOKEN"}})
	if err == nil || !strings.Contains(err.Error(), "env[1]: UNYO_AGENT_TOKEN") {
		t.Fatalf("New = %v, want an error naming env[1]: UNYO_AGENT_TOKEN", err)
	}
}
