package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
)

// parseWhen reads a time flag: RFC 3339 ("2026-05-01T10:00:00Z") or an age
// before now ("1h", "30m", "2d"). Empty gives nil (the server's default).
func parseWhen(flag, s string, now time.Time) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return timestamppb.New(t), nil
	}
	d, err := parseAge(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: expected a time such as 2026-05-01T10:00:00Z or an age such as 1h or 2d", flag, s)
	}
	return timestamppb.New(now.Add(-d)), nil
}

// parseSpan reads a pair of flags such as --since and --until with parseWhen.
func parseSpan(fromFlag, from, toFlag, to string, now time.Time) (f, t *timestamppb.Timestamp, err error) {
	if f, err = parseWhen(fromFlag, from, now); err != nil {
		return nil, nil, err
	}
	if t, err = parseWhen(toFlag, to, now); err != nil {
		return nil, nil, err
	}
	return f, t, nil
}

// parseAge is time.ParseDuration plus whole days ("2d").
func parseAge(s string) (time.Duration, error) {
	var days int
	if _, err := fmt.Sscanf(s, "%dd", &days); err == nil && fmt.Sprintf("%dd", days) == s {
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func newMetricsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "metrics", Aliases: []string{"metric"}, Short: "Query the metrics of every cluster (MetricsQL)"}
	var clusterName, start, end, step, at string
	query := &cobra.Command{
		Use:   "query EXPR",
		Short: "Evaluate an expression: over a range with --start, else at one instant",
		Long: "Evaluate a MetricsQL (PromQL) expression on every cluster; each series is labelled with its cluster.\n" +
			"System metrics are node_exporter-like (node_load1, node_memory_MemTotal_bytes, ...) with a node label;\n" +
			"check perfdata is unyo_check_perfdata{check, label, uom} in base units.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			s, e, err := parseSpan("start", start, "end", end, now)
			if err != nil {
				return err
			}
			t, err := parseWhen("time", at, now)
			if err != nil {
				return err
			}
			var st time.Duration
			if step != "" {
				if st, err = parseAge(step); err != nil || st <= 0 {
					return fmt.Errorf("--step %q: expected a duration such as 1m", step)
				}
			}
			if s == nil && (e != nil || step != "") {
				return fmt.Errorf("--end and --step need --start (a range query)")
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			var resp *connect.Response[unyov1.QueryMetricsResponse]
			if s != nil {
				req := &unyov1.QueryRangeRequest{Cluster: clusterName, Expr: args[0], Start: s, End: e}
				if st > 0 {
					req.Step = durationpb.New(st)
				}
				resp, err = cl.Metrics.QueryRange(ctx, connect.NewRequest(req))
			} else {
				resp, err = cl.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Cluster: clusterName, Expr: args[0], Time: t}))
			}
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.Series(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetSeries()), resp.Msg.GetClusterErrors())
		},
	}
	query.Flags().StringVar(&start, "start", "", "range start: a time (RFC 3339) or an age such as 1h")
	query.Flags().StringVar(&end, "end", "", "range end (default now)")
	query.Flags().StringVar(&step, "step", "", "range step (default: about 250 points)")
	query.Flags().StringVar(&at, "time", "", "instant query time (default now)")

	series := &cobra.Command{
		Use: "series MATCH", Short: "List the series a selector matches, such as '{node=\"web1\"}'", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, e, err := parseSpan("start", start, "end", end, time.Now())
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Metrics.Series(ctx, connect.NewRequest(&unyov1.SeriesRequest{Cluster: clusterName, Match: args[0], Start: s, End: e}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.SeriesLabels(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetSeries()), resp.Msg.GetClusterErrors())
		},
	}
	series.Flags().StringVar(&start, "start", "", "only series with samples since (default 1h)")
	series.Flags().StringVar(&end, "end", "", "and until (default now)")
	cmd.PersistentFlags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(query, series)
	return cmd
}

// logFilter holds the filter flags shared by logs query and stats.
type logFilter struct {
	since, until, host, app, trace, grep string
	levels                               []string
	limit                                int
	// fields select by structured fields (the event history's check and
	// outcome), matched exactly.
	fields map[string]string
}

func (f *logFilter) bind(c *cobra.Command, withLimit bool) {
	c.Flags().StringVar(&f.since, "since", "", "from this time (RFC 3339) or age (1h, 2d)")
	c.Flags().StringVar(&f.until, "until", "", "before this time or age")
	c.Flags().StringVar(&f.host, "host", "", "only this node")
	c.Flags().StringVar(&f.app, "app", "", "only this application")
	c.Flags().StringSliceVar(&f.levels, "level", nil, "only these levels (error,warn,...)")
	c.Flags().StringVar(&f.trace, "trace", "", "only this trace id")
	c.Flags().StringVar(&f.grep, "grep", "", "only lines containing this text (case-sensitive, not a regexp)")
	if withLimit {
		c.Flags().IntVar(&f.limit, "limit", 0, "at most this many lines (default 1000)")
	}
}

func (f *logFilter) proto(now time.Time) (*unyov1.LogFilter, error) {
	since, until, err := parseSpan("since", f.since, "until", f.until, now)
	if err != nil {
		return nil, err
	}
	return &unyov1.LogFilter{Since: since, Until: until, Host: f.host, App: f.app, TraceId: f.trace,
		Levels: f.levels, Grep: f.grep, Limit: int32(f.limit), Fields: f.fields}, nil
}

// queryLogs prints the log lines filter selects, newest first.
func (g *globals) queryLogs(cmd *cobra.Command, clusterName string, filter logFilter) error {
	f, err := filter.proto(time.Now())
	if err != nil {
		return err
	}
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	resp, err := cl.Logs.Query(ctx, connect.NewRequest(&unyov1.QueryLogsRequest{Cluster: clusterName, Filter: f}))
	if err != nil {
		return g.explain(err)
	}
	return printed(cmd, printer.LogEntries(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetEntries()), resp.Msg.GetClusterErrors())
}

func newLogsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "logs", Aliases: []string{"log"}, Short: "Query the logs of every cluster"}
	var clusterName string
	var qf, sf logFilter
	query := &cobra.Command{
		Use: "query", Short: "Log lines, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.queryLogs(cmd, clusterName, qf)
		},
	}
	qf.bind(query, true)

	var by, interval string
	stats := &cobra.Command{
		Use: "stats", Short: "Count log lines per interval and level, app or host", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := sf.proto(time.Now())
			if err != nil {
				return err
			}
			iv, err := parseAge(interval)
			if err != nil {
				return fmt.Errorf("--interval %q: expected a duration such as 1h", interval)
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Logs.Stats(ctx, connect.NewRequest(&unyov1.LogStatsRequest{Cluster: clusterName, Filter: f, By: by, Interval: durationpb.New(iv)}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.LogBuckets(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, by, resp.Msg.GetBuckets()), resp.Msg.GetClusterErrors())
		},
	}
	sf.bind(stats, false)
	stats.Flags().StringVar(&by, "by", "level", "group by level, app or host")
	stats.Flags().StringVar(&interval, "interval", "1h", "bucket length")

	trace := &cobra.Command{
		Use: "trace ID", Short: "Every line of one trace across nodes and clusters, oldest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Logs.Trace(ctx, connect.NewRequest(&unyov1.TraceLogsRequest{Cluster: clusterName, TraceId: args[0]}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.LogEntries(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetEntries()), resp.Msg.GetClusterErrors())
		},
	}
	cmd.PersistentFlags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(query, stats, trace)
	return cmd
}
