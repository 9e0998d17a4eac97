package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/checks/migrate"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
)

// newImportCommand is `unyo import nagios|sensu FILE...`: it translates
// another system's check definitions into Check documents on standard
// output (for review, then `unyo apply -f`), and reports on standard error
// what it could not translate. It talks to no server.
func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Translate Nagios or Sensu check definitions into Check documents"}
	var intervalLength time.Duration
	nagios := &cobra.Command{
		Use:   "nagios FILE|DIR...",
		Short: "Translate Nagios object files (services, hosts, hostgroups, commands) into Checks",
		Long: `Prints a Check document for every service of the object files (a directory
means its *.cfg files, as cfg_dir does): its command with $ARGn$, $USERn$
(also from a resource.cfg given among the files; $USER1$ defaults to
/usr/lib/nagios/plugins) and host macros filled in, check_interval times
interval_length as interval, max_check_attempts as occurrences, and a node
selector: nagios.host/HOST=true or nagios.hostgroup/GROUP=true. A service
whose command uses $HOSTADDRESS$ or $HOSTNAME$ becomes one check per host.
Standard error lists what was not translated and the labels each host's
agent needs (agent.labels).

A main configuration file (nagios.cfg) stands for the files it loads:
cfg_file, cfg_dir, resource_file, and its interval_length.

  unyo import nagios /etc/nagios4/nagios.cfg > checks.yaml && unyo apply -f checks.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opt := migrate.NagiosOptions{IntervalLength: intervalLength}
			files, err := readNagiosFiles(cmd, args, &opt)
			if err != nil {
				return err
			}
			res := migrate.Nagios(files, opt)
			return printImport(cmd, res)
		},
	}
	nagios.Flags().DurationVar(&intervalLength, "interval-length", time.Minute, "nagios.cfg's interval_length: the unit of check_interval")
	sensu := &cobra.Command{
		Use:   "sensu FILE|DIR...",
		Short: "Translate Sensu Go check definitions (YAML or JSON, as sensuctl dump writes) into Checks",
		Long: `Prints a Check document for every CheckConfig of the files: subscriptions as
node selectors (sensu.subscription/NAME=true, or sensu.entity/NAME=true for
entity:NAME; one check per subscription when there are several), interval,
cron, timeout and ttl (seconds) as durations, output_metric_format as
metrics_format, env_vars as env. Standard error lists what was not
translated.

  sensuctl dump checks --format yaml > sensu.yaml
  unyo import sensu sensu.yaml > checks.yaml && unyo apply -f checks.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := readImportFiles(args, ".yaml", ".yml", ".json")
			if err != nil {
				return err
			}
			return printImport(cmd, migrate.Sensu(files))
		},
	}
	cmd.AddCommand(nagios, sensu)
	return cmd
}

// readNagiosFiles reads the object files; a main configuration file
// (nagios.cfg) is replaced by the files it loads, a resource file it names
// that cannot be read is noted (it is often readable by nagios only).
func readNagiosFiles(cmd *cobra.Command, args []string, opt *migrate.NagiosOptions) ([]migrate.File, error) {
	var out []migrate.File
	for _, a := range args {
		b, err := os.ReadFile(a)
		if err != nil && !errors.Is(err, syscall.EISDIR) {
			return nil, err
		}
		main, ok := migrate.ParseNagiosMain(b)
		if !ok {
			fs, err := readImportFiles([]string{a}, ".cfg")
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
			continue
		}
		if main.IntervalLength > 0 && !cmd.Flags().Changed("interval-length") {
			opt.IntervalLength = main.IntervalLength
		}
		loaded, err := readImportFiles(append(main.CfgFiles, main.CfgDirs...), ".cfg")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		out = append(out, loaded...)
		for _, r := range main.ResourceFiles {
			b, err := os.ReadFile(r)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: resource_file not read (%v); $USER1$ is /usr/lib/nagios/plugins, other $USERn$ macros stay unknown\n", a, err)
				continue
			}
			out = append(out, migrate.File{Name: r, Data: b})
		}
	}
	return out, nil
}

// readImportFiles reads the named files, and a directory's files with one
// of the extensions (recursively, sorted).
func readImportFiles(args []string, exts ...string) ([]migrate.File, error) {
	var files []migrate.File
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		paths := []string{a}
		if st.IsDir() {
			if paths, err = walkFiles(a, true, exts...); err != nil {
				return nil, err
			}
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			files = append(files, migrate.File{Name: p, Data: b})
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no %s files", strings.Join(args, ", "), strings.Join(exts, " or "))
	}
	return files, nil
}

// walkFiles lists dir's files ending in one of exts, sorted; recursive
// descends into subdirectories.
func walkFiles(dir string, recursive bool, exts ...string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != dir && !recursive:
			return filepath.SkipDir
		case !d.IsDir() && slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(p, e) }):
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// printImport writes the checks as YAML and the notes to stderr. The
// checks are validated as the server would; one that would be refused
// fails the command, since applying the output would fail too.
func printImport(cmd *cobra.Command, res migrate.Result) error {
	objs := res.Objects()
	if err := manifest.Encode(cmd.OutOrStdout(), objs); err != nil {
		return err
	}
	w := cmd.ErrOrStderr()
	for _, n := range res.Notes {
		fmt.Fprintln(w, n)
	}
	for _, h := range slices.Sorted(maps.Keys(res.NodeLabels)) {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(res.NodeLabels[h])) {
			ls = append(ls, k+"="+res.NodeLabels[h][k])
		}
		fmt.Fprintf(w, "host %s: its node needs the labels %s (agent.labels)\n", h, strings.Join(ls, " "))
	}
	fmt.Fprintf(w, "%d check(s) translated, %d note(s)\n", len(objs), len(res.Notes))
	if err := builtin.Kinds().Validate(objs, time.Now()); err != nil {
		return fmt.Errorf("the translated checks would be refused: %w", err)
	}
	if len(objs) == 0 {
		return errors.New("nothing translated")
	}
	return nil
}
