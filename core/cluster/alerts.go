package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// alertService answers operators' alert reads and their ack and close.
type alertService struct{ c *Cluster }

func (s *alertService) ListAlerts(ctx context.Context, req *connect.Request[unyov1.ListAlertsRequest]) (*connect.Response[unyov1.ListAlertsResponse], error) {
	m := req.Msg
	if err := limits.ListLimit("limit", m.GetLimit()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if m.GetCluster() != "" && m.GetCluster() != s.c.opts.Name {
		return connect.NewResponse(&unyov1.ListAlertsResponse{}), nil
	}
	as, err := s.c.store.ListAlerts(ctx, store.AlertFilter{
		Node: m.GetNode(), Check: m.GetCheck(), Levels: m.GetLevels(), States: m.GetStates(), Limit: int(m.GetLimit()),
	})
	if err != nil {
		return nil, internal(fmt.Errorf("list alerts: %w", err))
	}
	alerts.Sort(as)
	return connect.NewResponse(&unyov1.ListAlertsResponse{Alerts: as}), nil
}

func (s *alertService) GetAlert(ctx context.Context, req *connect.Request[unyov1.GetAlertRequest]) (*connect.Response[unyov1.GetAlertResponse], error) {
	if err := required("id", req.Msg.GetId()); err != nil {
		return nil, err
	}
	a, err := s.c.store.GetAlert(ctx, req.Msg.GetId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found in cluster %q", req.Msg.GetId(), s.c.opts.Name))
	}
	if err != nil {
		return nil, internal(fmt.Errorf("get alert %q: %w", req.Msg.GetId(), err))
	}
	return connect.NewResponse(&unyov1.GetAlertResponse{Alerts: []*unyov1.Alert{a}}), nil
}

func (s *alertService) change(ctx context.Context, procedure string, m *unyov1.AlertActionRequest, fn func(a *unyov1.Alert, by, reason string, now time.Time) error) (*connect.Response[unyov1.AlertActionResponse], error) {
	if err := required("id", m.GetId()); err != nil {
		return nil, err
	}
	by, err := actor(ctx, m.GetBy())
	if err != nil {
		return nil, err
	}
	var (
		opErr  error
		before *unyov1.Alert
	)
	a, err := s.c.store.UpdateAlert(ctx, m.GetId(), func(a *unyov1.Alert) error {
		before = proto.Clone(a).(*unyov1.Alert)
		opErr = fn(a, by, m.GetReason(), time.Now())
		return opErr
	})
	if before != nil {
		outcome := err
		if opErr != nil {
			outcome = opErr
		}
		s.c.audit.Record(ctx, procedure, rbac.Target{Kind: "Alert", Name: m.GetId(), Cluster: s.c.opts.Name}, before, a, outcome)
	}
	switch {
	case opErr != nil:
		return nil, connect.NewError(connect.CodeFailedPrecondition, opErr)
	case errors.Is(err, store.ErrNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found in cluster %q", m.GetId(), s.c.opts.Name))
	case err != nil:
		return nil, internal(fmt.Errorf("change alert %q: %w", m.GetId(), err))
	}
	return connect.NewResponse(&unyov1.AlertActionResponse{Alert: a}), nil
}

func (s *alertService) AckAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return s.change(ctx, "AlertService/AckAlert", req.Msg, alerts.Ack)
}

func (s *alertService) CloseAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return s.change(ctx, "AlertService/CloseAlert", req.Msg, alerts.Close)
}

// maintenanceService ends maintenance; starting one is an apply.
type maintenanceService struct{ c *Cluster }

func (s *maintenanceService) EndMaintenance(ctx context.Context, req *connect.Request[unyov1.EndMaintenanceRequest]) (*connect.Response[unyov1.EndMaintenanceResponse], error) {
	m := req.Msg
	if err := required("name", m.GetName()); err != nil {
		return nil, err
	}
	by, err := actor(ctx, m.GetBy())
	if err != nil {
		return nil, err
	}
	target := rbac.Target{Kind: "Maintenance", Name: m.GetName(), Cluster: s.c.opts.Name}
	if err := server.RequireWrite(ctx, "Maintenance", s.c.opts.Name, false); err != nil {
		s.c.audit.Record(ctx, "MaintenanceService/EndMaintenance", target, nil, nil, err)
		return nil, err
	}
	before, _ := s.c.store.GetMaintenance(ctx, m.GetName())
	rec, err := s.c.store.EndMaintenance(ctx, m.GetName(), by, time.Now())
	if !errors.Is(err, store.ErrNotFound) {
		s.c.audit.Record(ctx, "MaintenanceService/EndMaintenance", target, before, rec, err)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("maintenance %q not found in cluster %q", m.GetName(), s.c.opts.Name))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("end maintenance %q: %w", m.GetName(), err))
	}
	return connect.NewResponse(&unyov1.EndMaintenanceResponse{Maintenances: []*unyov1.Maintenance{rec}}), nil
}
