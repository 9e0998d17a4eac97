// Package rolecmd holds what the unyo and unyo-agent commands share to run
// a role: loading its configuration, its logger, and the agent's command
// (`unyo agent` and `unyo-agent` are one command under two names).
package rolecmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/launch/agentrole"
)

// Run loads the configuration for role and runs fn with it.
func Run(cmd *cobra.Command, role, file string, fn func(context.Context, *config.Config, *slog.Logger) error) error {
	if err := rejectOperatorFlags(cmd); err != nil {
		return err
	}
	cfg, err := config.Load(config.LoadOptions{File: file, Role: role, Flags: cmd.Flags()})
	if err != nil {
		return err
	}
	log := NewLogger(cfg.Log)
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

// NewLogger is a role's logger to stderr, text or JSON.
func NewLogger(c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config.Load
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(c.Format, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// Agent is the node agent's command, named use: "agent" under unyo,
// "unyo-agent" as the agent's own binary.
func Agent(use string) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   use,
		Short: "Run the node agent: heartbeats, checks and result delivery to a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd, "agent", file, agentrole.Run)
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
