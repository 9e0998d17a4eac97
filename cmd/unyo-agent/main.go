// Command unyo-agent is the node agent alone: `unyo agent` in a binary
// that links none of the servers' packages (stores, query engines, web
// UI), so that the process on every node of a fleet starts without
// touching their pages. Its flags and configuration are `unyo agent`'s;
// the unyo binary keeps running every role, the agent included.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/unyo-ops/unyo/cmd/internal/rolecmd"
	"github.com/unyo-ops/unyo/core/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := rolecmd.Agent("unyo-agent")
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.Version = version.Short()
	cmd.SetVersionTemplate("unyo-agent {{.Version}}\n")
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "unyo-agent:", err)
		os.Exit(1)
	}
}
