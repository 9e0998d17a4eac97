package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/cmd/internal/rolecmd"
	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/launch"
	"github.com/unyo-ops/unyo/core/version"
)

func newDevCommand() *cobra.Command {
	var file string
	var inv launch.DevOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run root, a cluster and an agent for this machine in one process, on embedded stores",
		Long: `unyo dev starts everything a newcomer needs in one process: a root server on
127.0.0.1:7400, a cluster "local" on 127.0.0.1:7401 and an agent for this
machine, with all state under one data directory (./.unyo-data by default) and
the example checks applied on first start. In another terminal:

  unyo nodes ls
  unyo events ls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rolecmd.Run(cmd, "dev", file, func(ctx context.Context, c *config.Config, log *slog.Logger) error {
				return launch.DevWith(ctx, c, log, inv)
			})
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "configuration file (YAML)")
	cmd.Flags().StringVar(&inv.Inventory, "inventory", "", "inventory file applied at root on start (regions, racks, physical resources...)")
	cmd.Flags().BoolVar(&inv.ExampleInventory, "example-inventory", false, "apply configs/examples/inventory.yaml at root on start; its dev node is the server labelled unyo.dev/dev-node")
	cmd.MarkFlagsMutuallyExclusive("inventory", "example-inventory")
	config.BindFlags(cmd.Flags(), "dev")
	return cmd
}

func newServerCommand() *cobra.Command {
	var file, role string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a root or cluster server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Without --role the configuration file says which server this is.
			want := config.RoleServer
			if cmd.Flags().Changed("role") {
				want = role
			}
			return rolecmd.Run(cmd, want, file, func(ctx context.Context, c *config.Config, log *slog.Logger) error {
				switch c.Role {
				case config.RoleRoot:
					return launch.Root(ctx, c, log)
				case config.RoleCluster:
					return launch.Cluster(ctx, c, log)
				default:
					return fmt.Errorf("role %q: unyo server runs root or cluster", c.Role)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "configuration file (YAML)")
	cmd.Flags().StringVar(&role, "role", "", "root or cluster (default: the role in the configuration file)")
	config.BindFlags(cmd.Flags(), "server")
	return cmd
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print unyo's version, VCS revision, build date and Go version",
		Long: "Print unyo's version: the release `make build` linked in (git describe), or else\n" +
			"the module version `go install` recorded and the VCS revision of the checkout.\n" +
			"`unyo status` and `unyo clusters ls` show the servers' versions, `unyo nodes ls` the agents'.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := version.Get()
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			case "", "table":
				fmt.Fprintln(w, "unyo", in.String())
				if in.BuildDate != "" {
					fmt.Fprintln(w, "built:", in.BuildDate)
				}
				fmt.Fprintln(w, "go:", in.GoVersion)
				return nil
			}
			return fmt.Errorf("-o %q: want table or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
