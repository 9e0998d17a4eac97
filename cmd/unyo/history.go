package main

import (
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/logstore"
)

// newEventsHistoryCommand is `unyo events history`: every processed event
// with its outcome, from the clusters' log stores, kept as long as logs are.
func newEventsHistoryCommand(g *globals) *cobra.Command {
	var clusterName, node, check, outcome, since, until string
	var levels []string
	var limit int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Every processed event with its outcome, newest first (kept as long as logs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := logFilter{since: since, until: until, host: node, app: logstore.EventsApp, levels: levels, limit: limit}
			f.fields = historyFields(check, outcome)
			return g.queryLogs(cmd, clusterName, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&clusterName, "cluster", "", "only this cluster")
	fl.StringVar(&node, "node", "", "only this node")
	fl.StringVar(&check, "check", "", "only this check")
	fl.StringVar(&outcome, "outcome", "", "only this outcome: processed, pending, suppressed, silenced, grouped")
	fl.StringSliceVar(&levels, "level", nil, "only these levels: info (success), warn (warning), error (critical)")
	fl.StringVar(&since, "since", "24h", "from this time (RFC 3339) or age (1h, 2d)")
	fl.StringVar(&until, "until", "", "before this time or age")
	fl.IntVar(&limit, "limit", 0, "at most this many events (default 1000)")
	return cmd
}

// historyFields selects history entries by their structured fields, so that
// the wording of the history's message does not matter.
func historyFields(check, outcome string) map[string]string {
	f := map[string]string{}
	if check != "" {
		f[logstore.FieldCheck] = check
	}
	if outcome != "" {
		f[logstore.FieldOutcome] = outcome
	}
	if len(f) == 0 {
		return nil
	}
	return f
}
