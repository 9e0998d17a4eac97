package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/plugins/conformance"
)

// newPluginCommand groups the commands that vet plugin binaries before
// they are pinned and configured (check and conformance run the binary
// locally and need no server) and ls, which lists the plugins that run.
func newPluginCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Check plugin binaries against the unyo plugin protocol; list running plugins",
	}
	cmd.AddCommand(newPluginCheckCommand(), newPluginConformanceCommand(), newPluginLsCommand(g))
	return cmd
}

func newPluginCheckCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "check BINARY",
		Short: "Quick checks: name, executable, describe, cookie refusal, handshake, config schema, one call configured with the schema's defaults, quiet stdout",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReportFormat(output); err != nil {
				return err
			}
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			rep := conformance.CheckBinary(cmd.Context(), path)
			if err := rep.Write(cmd.OutOrStdout(), output); err != nil {
				return err
			}
			return rep.Err()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "report format: "+strings.Join(conformance.Formats(), ", "))
	return cmd
}

func newPluginConformanceCommand() *cobra.Command {
	var output, fixtures, run string
	cmd := &cobra.Command{
		Use:   "conformance BINARY",
		Short: "Run the conformance cases against a plugin binary",
		Long: "Runs the conformance cases for every kind the plugin serves and reports each case's\n" +
			"outcome and timing. Cases needing inputs only the plugin's author knows (a target\n" +
			"that is OK, a resource config) take them from --fixtures, a YAML or JSON file;\n" +
			"without it they are skipped. Exits non-zero when a case fails.\n\nCases:\n  " +
			strings.Join(conformance.CaseNames(), "\n  "),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReportFormat(output); err != nil {
				return err
			}
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			fx := &conformance.Fixtures{}
			if fixtures != "" {
				if fx, err = conformance.LoadFixtures(fixtures); err != nil {
					return err
				}
			}
			opts := conformance.Options{}
			if run != "" {
				if opts.Run, err = regexp.Compile(run); err != nil {
					return fmt.Errorf("--run: %w", err)
				}
			}
			// Progress on stderr, so that the report on stdout stays
			// machine-readable.
			progress := cmd.ErrOrStderr()
			opts.OnCase = func(c conformance.CaseResult) {
				fmt.Fprintf(progress, "%-4s %s (%s)\n", strings.ToUpper(string(c.Outcome)), c.Name, c.Duration.Round(time.Millisecond))
			}
			rep, err := conformance.Execute(cmd.Context(), conformance.Binary(path, fx), opts)
			if werr := rep.Write(cmd.OutOrStdout(), output); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			return rep.Err()
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "report format: "+strings.Join(conformance.Formats(), ", "))
	f.StringVar(&fixtures, "fixtures", "", "YAML or JSON file with the plugin's per-kind inputs")
	f.StringVar(&run, "run", "", "run only the cases whose name matches this regular expression")
	return cmd
}

func checkReportFormat(f string) error {
	if !slices.Contains(conformance.Formats(), f) {
		return fmt.Errorf("unknown output format %q: use %s", f, strings.Join(conformance.Formats(), ", "))
	}
	return nil
}
