package main

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/printer"
)

func newStatsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "stats", Aliases: []string{"statistics"},
		Short: "Statistics kept for years: rollups of metrics, daily counts of logs and events"}
	// Each subcommand has its own variables: flags bound to one variable
	// would share the last default.
	var clusterName, until, since, resolution string
	var limit int
	metrics := &cobra.Command{
		Use:   "metrics SELECTOR",
		Short: "Hourly or daily min, max, avg and last of the selected series",
		Long: "Rollups of the series a selector such as node_load1{node=~\"web.*\"} selects, among those the\n" +
			"clusters roll up (stats.metrics), one row per series and bucket, from every cluster.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.statsCall(cmd, since, until, func(ctx context.Context, cl *client.Clients, s, u *timestamppb.Timestamp) error {
				resp, err := cl.Stats.MetricStats(ctx, connect.NewRequest(&unyov1.MetricStatsRequest{
					Cluster: clusterName, Selector: args[0], Resolution: resolution, Since: s, Until: u, Limit: int32(limit)}))
				if err != nil {
					return g.explain(err)
				}
				if err := printer.Rollups(cmd.OutOrStdout(), g.output, resp.Msg.GetRollups()); err != nil {
					return err
				}
				if resp.Msg.GetTruncated() {
					fmt.Fprintln(cmd.ErrOrStderr(), "more rows than --limit: narrow the selector or the time range")
				}
				return printed(cmd, nil, resp.Msg.GetClusterErrors())
			})
		},
	}
	metrics.Flags().StringVar(&resolution, "resolution", "1d", "1h or 1d")
	metrics.Flags().StringVar(&since, "since", "30d", "buckets from this time (RFC 3339) or age (30d)")
	metrics.Flags().IntVar(&limit, "limit", 0, "at most this many rows per cluster (default 100000)")

	counts := func(kind, what, byHelp string) *cobra.Command {
		var since, by string
		c := &cobra.Command{
			Use:   kind,
			Short: "Daily counts of " + what + " with error and warning rates",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return g.statsCall(cmd, since, until, func(ctx context.Context, cl *client.Clients, s, u *timestamppb.Timestamp) error {
					resp, err := cl.Stats.CountStats(ctx, connect.NewRequest(&unyov1.CountStatsRequest{
						Cluster: clusterName, Kind: kind, By: by, Since: s, Until: u}))
					if err != nil {
						return g.explain(err)
					}
					return printed(cmd, printer.DailyCounts(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, kind, by, resp.Msg.GetCounts()), resp.Msg.GetClusterErrors())
				})
			},
		}
		c.Flags().StringVar(&since, "since", "90d", "days from this time (RFC 3339) or age (90d)")
		c.Flags().StringVar(&by, "by", "level", byHelp)
		return c
	}
	logs := counts("logs", "log lines (event history apart)", "group by level, app or host")
	events := counts("events", "events", "group by level, app (the check) or host (the node)")

	cmd.PersistentFlags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.PersistentFlags().StringVar(&until, "until", "", "before this time (RFC 3339) or age (default now)")
	cmd.AddCommand(metrics, logs, events)
	return cmd
}

// statsCall reads --since and --until, connects and runs call.
func (g *globals) statsCall(cmd *cobra.Command, since, until string,
	call func(ctx context.Context, cl *client.Clients, s, u *timestamppb.Timestamp) error) error {
	s, u, err := parseSpan("since", since, "until", until, time.Now())
	if err != nil {
		return err
	}
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	return call(ctx, cl, s, u)
}
