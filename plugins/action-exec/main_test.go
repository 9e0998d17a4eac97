package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// script appends its stdin to $1/log and acts on its first argument.
const script = `#!/bin/sh
dir=$1; mode=$2
cat >> "$dir/log"; echo >> "$dir/log"
echo "step one"
case "$mode" in
  fail) echo oops >&2; exit 2;;
  retry) exit 75;;
  sleep) sleep 30;;
esac
echo "done"
`

func execute(t *testing.T, c *base.Conn, req *pluginv1.ExecuteRequest) (*pluginv1.Outcome, []string) {
	t.Helper()
	st, err := c.Action.Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var progress []string
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("stream ended without an outcome: %v", err)
		}
		if o := r.GetOutcome(); o != nil {
			return o, progress
		}
		progress = append(progress, r.GetProgress().GetMessage())
	}
}

func TestExecAction(t *testing.T) {
	dir := t.TempDir()
	sh := filepath.Join(dir, "act.sh")
	if err := os.WriteFile(sh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := testbin.Serve(t, &execAction{}, map[string]any{"command": []any{sh, dir}})
	logLines := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		return strings.Count(string(b), `{"alert":1}`)
	}
	req := func(key, mode string) *pluginv1.ExecuteRequest {
		return &pluginv1.ExecuteRequest{IdempotencyKey: key, Payload: []byte(`{"alert":1}`),
			Params: testbin.Struct(t, map[string]any{"args": []any{mode}}), Timeout: durationpb.New(5 * time.Second)}
	}

	o, progress := execute(t, c, req("a", "ok"))
	if o.Status != sdk.Succeeded || len(progress) != 2 || progress[0] != "step one" || logLines() != 1 {
		t.Fatalf("ok: %v %v log=%d", o, progress, logLines())
	}
	dry := req("b", "ok")
	dry.DryRun = true
	if o, _ := execute(t, c, dry); o.Status != sdk.Succeeded || !strings.Contains(o.Message, "would run") || logLines() != 1 {
		t.Errorf("dry run: %v log=%d", o, logLines())
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); execute(t, c, req("c", "ok")) }()
	}
	wg.Wait()
	if o, _ := execute(t, c, req("c", "ok")); !o.Replayed || logLines() != 2 {
		t.Errorf("idempotency: %v log=%d", o, logLines())
	}
	if o, _ := execute(t, c, req("d", "fail")); o.Status != sdk.Failed || !strings.Contains(o.Message, "oops") {
		t.Errorf("fail: %v", o)
	}
	if o, _ := execute(t, c, req("e", "retry")); o.Status != sdk.Retryable {
		t.Errorf("retry: %v", o)
	}
	slow := req("f", "sleep")
	slow.Timeout = durationpb.New(200 * time.Millisecond)
	t0 := time.Now()
	if o, _ := execute(t, c, slow); o.Status != sdk.TimedOut || time.Since(t0) > 3*time.Second {
		t.Errorf("timeout: %v after %s", o, time.Since(t0))
	}
}

// The command sees the plugin's environment minus the plugin protocol's and
// unyo's own variables, plus its idempotency key and configured env.
func TestExecActionEnvironment(t *testing.T) {
	t.Setenv("UNYO_AGENT_TOKEN", "secret")
	t.Setenv("UNYO_PLUGIN_MAGIC_COOKIE", "cookie")
	t.Setenv("PLUGIN_PROTOCOL_VERSIONS", "1")
	c := testbin.Serve(t, &execAction{}, map[string]any{"command": []any{"env"}, "env": map[string]any{"CONFIGURED": "1"}})
	o, progress := execute(t, c, &pluginv1.ExecuteRequest{IdempotencyKey: "k1", Payload: []byte(`{}`), Timeout: durationpb.New(5 * time.Second)})
	if o.Status != sdk.Succeeded {
		t.Fatalf("outcome %v", o)
	}
	var sawKey, sawConfigured bool
	for _, kv := range progress {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "UNYO_IDEMPOTENCY_KEY":
			sawKey = value == "k1"
		case name == "CONFIGURED":
			sawConfigured = true
		case strings.HasPrefix(name, "UNYO_") || strings.HasPrefix(name, "PLUGIN_"):
			t.Errorf("the command's environment has %s", kv)
		}
	}
	if !sawKey || !sawConfigured {
		t.Errorf("UNYO_IDEMPOTENCY_KEY=k1 or CONFIGURED missing from %q", progress)
	}
}
