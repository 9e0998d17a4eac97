// Command unyo-action-defective is an action plugin built with the SDK
// that appends a line to its effects file, or sends a GET to its URL, each
// time it acts. It is correct
// unless installed as unyo-action-<defect>, and then broken in exactly that
// one way, for the conformance harness's own tests.
//
// Config: {"effects_file": "/path"} or {"url": "http://..."}; params:
// {"sleep": "2s"}.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

// The defects, each named for what the action does wrong.
const (
	actsAfterTimeout = "acts-after-timeout" // acts although its budget ran out
	actsAfterCancel  = "acts-after-cancel"  // acts although the host cancelled it
	actsInDryRun     = "acts-in-dry-run"    // acts on a dry run
)

type action struct {
	name, defect string
	effects, url string
}

func (a *action) Info() sdk.Info { return sdk.Info{Name: a.name, Version: "0.0.1"} }
func (a *action) ConfigSchema() string {
	return `{"type":"object","properties":{"effects_file":{"type":"string"},"url":{"type":"string"}},"additionalProperties":false,
		"oneOf":[{"required":["effects_file"]},{"required":["url"]}]}`
}

func (a *action) Configure(_ context.Context, c map[string]any) error {
	var cfg struct {
		EffectsFile string `json:"effects_file"`
		URL         string `json:"url"`
	}
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.EffectsFile != "" && !filepath.IsAbs(cfg.EffectsFile) {
		return sdk.Invalid("effects_file", "must be an absolute path")
	}
	if (cfg.EffectsFile == "") == (cfg.URL == "") {
		return sdk.Invalid("effects_file", "give an effects_file or a url")
	}
	a.effects, a.url = cfg.EffectsFile, cfg.URL
	return nil
}

func (a *action) Probe(context.Context) (bool, string) { return true, "" }

func (a *action) Execute(ctx context.Context, req sdk.ActionRequest, progress func(string)) sdk.Outcome {
	var p struct {
		Sleep sdk.Duration `json:"sleep"`
	}
	if err := sdk.Decode(req.Params, &p); err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
	}
	if req.DryRun {
		if a.defect == actsInDryRun {
			_ = a.act()
		}
		return sdk.Outcome{Status: sdk.Succeeded, Message: "would act"}
	}
	if p.Sleep > 0 {
		select {
		case <-ctx.Done():
			timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
			if (timedOut && a.defect == actsAfterTimeout) || (!timedOut && a.defect == actsAfterCancel) {
				go func() { // after the SDK has answered
					time.Sleep(200 * time.Millisecond)
					_ = a.act()
				}()
			}
			return sdk.Outcome{Status: sdk.Failed, Message: "interrupted"}
		case <-time.After(time.Duration(p.Sleep)):
		}
	}
	if err := a.act(); err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
	}
	return sdk.Outcome{Status: sdk.Succeeded, Message: "acted"}
}

// act is the side effect: one line in the effects file, or one request.
func (a *action) act() error {
	if a.url != "" {
		resp, err := http.Get(a.url)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	f, err := os.OpenFile(a.effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("effects file: %w", err)
	}
	_, err = f.WriteString("acted\n")
	return errors.Join(err, f.Close())
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "unyo-action-")
	sdk.Serve(&action{name: name, defect: name})
}
