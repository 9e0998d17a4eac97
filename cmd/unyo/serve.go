package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/launch"
	"github.com/unyo-ops/unyo/core/version"
)

// runRole loads the configuration for role and runs fn with it.
func runRole(cmd *cobra.Command, role, file string, fn func(context.Context, *config.Config, *slog.Logger) error) error {
	if err := rejectOperatorFlags(cmd); err != nil {
		return err
	}
	cfg, err := config.Load(config.LoadOptions{File: file, Role: role, Flags: cmd.Flags()})
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	return fn(cmd.Context(), cfg, log)
}

// rejectOperatorFlags refuses the operator commands' flags (inherited from
// the root command) that a server or agent would otherwise accept and
// silently ignore, unless the command defines a flag of that name itself.
func rejectOperatorFlags(cmd *cobra.Command) error {
	var err error
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if err == nil && f.Changed && cmd.LocalNonPersistentFlags().Lookup(f.Name) == nil {
			err = fmt.Errorf("--%s is a flag of the operator commands (unyo nodes, unyo apply, ...); unyo %s does not use it: see unyo %s --help", f.Name, cmd.Name(), cmd.Name())
		}
	})
	return err
}

func newLogger(c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config.Load
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(c.Format, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

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
			return runRole(cmd, "dev", file, func(ctx context.Context, c *config.Config, log *slog.Logger) error {
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
			return runRole(cmd, want, file, func(ctx context.Context, c *config.Config, log *slog.Logger) error {
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

func newAgentCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: heartbeats, checks and result delivery to a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRole(cmd, "agent", file, launch.Agent)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "configuration file (YAML)")
	config.BindFlags(cmd.Flags(), "agent")
	// The agent's own --token and --ca-file hide the operator commands'
	// flags of those names, which the agent would otherwise accept and
	// ignore.
	cmd.Flags().String("token", "", "a join token of the cluster (config agent.token); prefer env UNYO_AGENT_TOKEN, since every user of the machine can read a command line")
	_ = cmd.Flags().SetAnnotation("token", config.FlagKeyAnnotation, []string{"agent.token"}) // the flag was just defined
	cmd.Flags().String("ca-file", "", "PEM file of the CA that signs the cluster's certificate, instead of the system's CAs (config agent.tls.ca_file)")
	_ = cmd.Flags().SetAnnotation("ca-file", config.FlagKeyAnnotation, []string{"agent.tls.ca_file"})
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
