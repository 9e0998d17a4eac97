package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/provision/billing"
)

func newBillingCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "billing", Short: "Reserved time of computes and its cost, from the clusters' billing ledgers"}
	var since, until, by string
	report := &cobra.Command{
		Use:   "report",
		Short: "Reserved hours and cost per service, flavor, cluster or node over a period",
		Long: "Every reservation of a compute on a node accrues at its flavor's price (the node's machine model's\n" +
			"price where the flavor names one) from placement to release. The report sums what of each falls in\n" +
			"[--since, --until) (default: the current month, UTC, until now), costs rounded to the cent once per line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := billing.ParseBy(by); err != nil {
				return err
			}
			if err := printer.CheckFormat(g.output); err != nil {
				return err
			}
			return g.statsCall(cmd, since, until, func(ctx context.Context, cl *client.Clients, s, u *timestamppb.Timestamp) error {
				resp, err := cl.Billing.Report(ctx, connect.NewRequest(&unyov1.BillingReportRequest{Since: s, Until: u, By: by}))
				if err != nil {
					return g.explain(err)
				}
				var errs []*unyov1.ClusterError
				for _, c := range resp.Msg.GetUnreachable() {
					errs = append(errs, &unyov1.ClusterError{Cluster: c, Error: "its billing report could not be read"})
				}
				return printed(cmd, printer.Billing(cmd.OutOrStdout(), g.output, resp.Msg), errs)
			})
		},
	}
	report.Flags().StringVar(&since, "since", "", "start of the period: RFC 3339 or an age such as 24h or 7d (default: the start of the month)")
	report.Flags().StringVar(&until, "until", "", "end of the period: RFC 3339 or an age (default: now)")
	report.Flags().StringVar(&by, "by", "service", "group by service, flavor, cluster or node")
	cmd.AddCommand(report)
	return cmd
}
