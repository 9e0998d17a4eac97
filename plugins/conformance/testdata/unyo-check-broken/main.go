// Command unyo-check-broken is a deliberately broken check plugin for the
// conformance harness's own tests: it answers correctly, but leaks a file
// descriptor on every check and leaves a zombie child behind every
// critical check. The harness must name exactly those cases.
package main

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"time"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

type broken struct {
	mu     sync.Mutex
	leaked []*os.File
}

func (*broken) Info() sdk.Info       { return sdk.Info{Name: "broken", Version: "0.0.1"} }
func (*broken) ConfigSchema() string { return `{"type":"object"}` }
func (*broken) Configure(_ context.Context, c map[string]any) error {
	return sdk.Decode(c, &struct{}{})
}
func (*broken) Probe(context.Context) (bool, string) { return true, "" }

func (b *broken) Check(ctx context.Context, req sdk.CheckRequest) (sdk.CheckResult, error) {
	var t struct {
		Status string       `json:"status"`
		Sleep  sdk.Duration `json:"sleep"`
	}
	if err := sdk.Decode(req.Target, &t); err != nil {
		return sdk.CheckResult{}, err
	}
	if f, err := os.Open(os.DevNull); err == nil { // the leak
		b.mu.Lock()
		b.leaked = append(b.leaked, f)
		b.mu.Unlock()
	}
	if t.Sleep > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(t.Sleep)):
		}
	}
	st := map[string]pluginv1.CheckStatus{"ok": sdk.OK, "warning": sdk.Warning, "critical": sdk.Critical}[t.Status]
	if st == sdk.Critical {
		_ = exec.Command("true").Start() // never waited for: a zombie
	}
	if st == 0 {
		return sdk.CheckResult{}, sdk.Invalid("status", "must be ok, warning or critical")
	}
	return sdk.CheckResult{Status: st, Output: t.Status}, nil
}

func main() { sdk.Serve(&broken{}) }
