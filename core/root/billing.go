package root

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/provision/billing"
)

// billingService merges the clusters' billing reports: each cluster bills
// the reservations in its own ledger, and root sums their exact costs per
// key before rounding once.
type billingService struct{ r *Root }

func (s *billingService) Report(ctx context.Context, req *connect.Request[unyov1.BillingReportRequest]) (*connect.Response[unyov1.BillingReportResponse], error) {
	// Resolve the period once, so that every cluster bills the same one.
	by, since, until, err := billing.Request(req.Msg, time.Now())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	targets, err := s.r.targets(ctx, "")
	if err != nil {
		return nil, err
	}
	in := &unyov1.BillingReportRequest{Since: timestamppb.New(since), Until: timestamppb.New(until), By: string(by)}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]billing.Line, error) {
		out, err := c.Billing.Report(ctx, connect.NewRequest(in))
		if err != nil {
			return nil, err
		}
		lines, err := billing.FromProto(out.Msg.GetLines())
		if err != nil {
			return nil, fmt.Errorf("cluster %s answered a malformed report: %w", name, err)
		}
		return lines, nil
	})
	reports := make([][]billing.Line, len(answers))
	for i, a := range answers {
		reports[i] = a.value
	}
	lines := billing.Merge(reports...)
	resp := &unyov1.BillingReportResponse{Since: in.Since, Until: in.Until, By: string(by),
		Lines: billing.ToProto(lines), Total: billing.Cents(billing.Total(lines))}
	for _, e := range errs {
		resp.Unreachable = append(resp.Unreachable, e.GetCluster())
		s.r.log.Warn("a cluster's billing report could not be read; the report lacks its reservations", "cluster", e.GetCluster(), "err", e.GetError())
	}
	return connect.NewResponse(resp), nil
}
