package cluster

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/billing"
)

// billingService answers billing reports from this cluster's ledger.
type billingService struct{ c *Cluster }

func (s *billingService) Report(ctx context.Context, req *connect.Request[unyov1.BillingReportRequest]) (*connect.Response[unyov1.BillingReportResponse], error) {
	now := s.c.now()
	by, since, until, err := billing.Request(req.Msg, now)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	entries, err := s.c.store.Ledger(ctx, since, until)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	lines := billing.Report(entries, since, until, now, by)
	return connect.NewResponse(&unyov1.BillingReportResponse{
		Since: timestamppb.New(since), Until: timestamppb.New(until), By: string(by),
		Lines: billing.ToProto(lines), Total: billing.Cents(billing.Total(lines)),
	}), nil
}
