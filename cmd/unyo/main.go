// Command unyo is the one binary of unyo: servers, agent, dev mode and the
// operator CLI.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/cmd/internal/rolecmd"
	"github.com/unyo-ops/unyo/core/launch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(reportExit(os.Stderr, err))
	}
}

func newRootCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "unyo",
		Short:         "unyo runs and watches your fleet: agents, checks, events, clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `unyo version` prints first.
		Version: launch.Version,
	}
	cmd.SetVersionTemplate("unyo {{.Version}}\n")
	g := &globals{}
	g.bind(cmd)
	cmd.AddCommand(
		newDevCommand(), newServerCommand(), rolecmd.Agent("agent"),
		newApplyCommand(g), newGetCommand(g), newDeleteCommand(g), newDiffCommand(g),
		newNodesCommand(g), newEventsCommand(g), newClustersCommand(g), newAlertsCommand(g),
		newMetricsCommand(g), newLogsCommand(g), newStatsCommand(g), newBillingCommand(g),
		newPluginCommand(g), newTokensCommand(g), newAuditCommand(g), newCACommand(),
		newStatusCommand(g), newVersionCommand(), newImportCommand(), newExplainCommand(), newManCommand(),
	)
	cmd.AddCommand(newKindCommands(g)...)
	return cmd
}
