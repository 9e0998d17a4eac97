package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/unyo-ops/unyo/core/server"
)

// TestHealthzAsksTheHealthHook: /healthz answers 503 with the hook's error
// while it fails, ok otherwise.
func TestHealthzAsksTheHealthHook(t *testing.T) {
	var failing atomic.Bool
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Health: func(context.Context) error {
			if failing.Load() {
				return errors.New("sqlite store cannot be read: database disk image is malformed")
			}
			return nil
		}})
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	get := func() (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		failing bool
		code    int
		body    string
	}{
		{false, 200, "ok"},
		{true, 503, "unhealthy: sqlite store cannot be read: database disk image is malformed"},
		{false, 200, "ok"},
	} {
		failing.Store(tc.failing)
		if code, body := get(); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("failing=%v: %d %q, want %d %q", tc.failing, code, body, tc.code, tc.body)
		}
	}
}

// TestMetricsAskForACredential: /metrics names procedures, leases and
// clusters, so a server that authenticates its API asks the scraper for a
// credential too.
func TestMetricsAskForACredential(t *testing.T) {
	addr := serve(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}}})
	for _, tc := range []struct {
		token string
		code  int
	}{
		{"", http.StatusUnauthorized},
		{"wrong", http.StatusUnauthorized},
		{"adm", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("token %q: %d, want %d: %.200s", tc.token, resp.StatusCode, tc.code, body)
		}
		if tc.code == http.StatusOK && !strings.Contains(string(body), "unyo_build_info") {
			t.Errorf("token %q: no unyo_build_info in %.300s", tc.token, body)
		}
	}
}
