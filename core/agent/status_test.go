package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// /status shows check outputs, which can hold whatever a check printed:
// only with agent.status_token. Without a token it shows health and
// counters; with a wrong one it refuses. /healthz needs nothing.
func TestStatusRedactsOutputsWithoutToken(t *testing.T) {
	a, err := New(Options{
		NodeName: "n1", ClusterURL: "http://127.0.0.1:1", DataDir: t.TempDir(),
		StatusListen: "127.0.0.1:0", StatusToken: "status-secret",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.closeSpools)
	a.status.result(&unyov1.Event{Check: "env", Status: unyov1.CheckStatus_CHECK_STATUS_OK,
		Output: "UNYO_AGENT_TOKEN=leaked", StartedAt: timestamppb.Now()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.serveStatus(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	get := func(path, auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+a.StatusAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, path, auth string
		wantCode         int
		want, dontWant   []string
	}{
		{"healthz open", "/healthz", "", 200, []string{"ok"}, nil},
		{"no token: redacted", "/status", "", 200,
			[]string{`"redacted":true`, `"node":"n1"`, `"checks":`, `"spool":`, `"env":{"status":"CHECK_STATUS_OK"`}, []string{"UNYO_AGENT_TOKEN", "leaked", `"output"`}},
		{"right token: full", "/status", "Bearer status-secret", 200, []string{`"output":"UNYO_AGENT_TOKEN=leaked"`}, []string{`"redacted"`}},
		{"wrong token: refused", "/status", "Bearer guess", 401, []string{"agent.status_token"}, []string{"leaked"}},
		{"not a bearer token: refused", "/status", "Basic c3RhdHVzLXNlY3JldA==", 401, nil, []string{"leaked"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(tt.path, tt.auth)
			if code != tt.wantCode {
				t.Fatalf("GET %s: %d, want %d: %s", tt.path, code, tt.wantCode, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s: %s", w, body)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(body, w) {
					t.Errorf("body has %s: %s", w, body)
				}
			}
			if code == 200 && tt.path == "/status" && !json.Valid([]byte(body)) {
				t.Errorf("not JSON: %s", body)
			}
		})
	}
}

// Without a status token configured, no token opens the full view.
func TestStatusWithoutConfiguredTokenIsAlwaysRedacted(t *testing.T) {
	a := &Agent{opts: Options{}}
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		r, _ := http.NewRequest(http.MethodGet, "/status", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if full, _ := a.statusAccess(r); full {
			t.Errorf("Authorization %q got the full view with no agent.status_token set", auth)
		}
	}
}

// An agent data directory an older version left world-readable, with its
// state (checks cache, plugin digests, log offsets) 0644, is made private
// at start.
func TestNewMakesTheDataDirectoryPrivate(t *testing.T) {
	dir := t.TempDir()
	cache := dir + "/checks.json"
	if err := os.WriteFile(cache, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{NodeName: "n1", ClusterURL: "http://127.0.0.1:1", DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a.closeSpools()
	for path, want := range map[string]os.FileMode{dir: 0o700, cache: 0o600, dir + "/spool": 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %04o", path, fi.Mode().Perm(), err, want)
		}
	}
}
