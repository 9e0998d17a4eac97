// Command unyo-check-crashy misbehaves on request, for supervisor tests.
// Target "mode": "crash" exits mid-call, "sleep" waits for the deadline,
// anything else answers OK. Config "reject": true fails Configure; env
// CRASHY_EXIT_AT_START=1 exits before the handshake; CRASHY_API=2 speaks
// only API v2; CRASHY_UNREADY=1 makes Probe not ready.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

type crashy struct{}

func (crashy) Info() sdk.Info {
	i := sdk.Info{Name: "crashy", Version: "0.0.1"}
	if os.Getenv("CRASHY_API") == "2" {
		i.APIVersions = []uint32{2}
	}
	return i
}
func (crashy) ConfigSchema() string { return "{}" }
func (crashy) Configure(_ context.Context, c map[string]any) error {
	if c["reject"] == true {
		return sdk.Invalid("reject", "was asked to reject")
	}
	return nil
}
func (crashy) Probe(context.Context) (bool, string) {
	if os.Getenv("CRASHY_UNREADY") == "1" {
		return false, "told to be unready"
	}
	return true, ""
}
func (crashy) Check(ctx context.Context, req sdk.CheckRequest) (sdk.CheckResult, error) {
	sdk.Log(ctx).Info("checking", "mode", req.Target["mode"])
	switch req.Target["mode"] {
	case "crash":
		os.Exit(7)
	case "sleep":
		<-ctx.Done()
	case "print":
		fmt.Fprintln(os.Stderr, "stray stderr line")
	}
	return sdk.CheckResult{Status: sdk.OK, Output: "OK " + strings.TrimSpace(fmt.Sprint(req.Target["mode"]))}, nil
}

func main() {
	if os.Getenv("CRASHY_EXIT_AT_START") == "1" {
		os.Exit(3)
	}
	sdk.Serve(crashy{})
}
