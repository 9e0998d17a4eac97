package root

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
)

// alertService merges the clusters' alerts and routes ack and close to the
// cluster that has the alert.
type alertService struct{ r *Root }

func (s *alertService) ListAlerts(ctx context.Context, req *connect.Request[unyov1.ListAlertsRequest]) (*connect.Response[unyov1.ListAlertsResponse], error) {
	if err := invalid(limits.ListLimit("limit", req.Msg.GetLimit())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.Alert, error) {
		q := proto.Clone(req.Msg).(*unyov1.ListAlertsRequest)
		q.Cluster = ""
		out, err := c.Alerts.ListAlerts(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetAlerts(), nil
	})
	resp := &unyov1.ListAlertsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Alerts = append(resp.Alerts, a.value...)
	}
	alerts.Sort(resp.Alerts)
	return connect.NewResponse(resp), nil
}

func (s *alertService) GetAlert(ctx context.Context, req *connect.Request[unyov1.GetAlertRequest]) (*connect.Response[unyov1.GetAlertResponse], error) {
	if err := invalid(limits.Required("id", req.Msg.GetId())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.Alert, error) {
		out, err := c.Alerts.GetAlert(ctx, connect.NewRequest(&unyov1.GetAlertRequest{Id: req.Msg.GetId()}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return out.Msg.GetAlerts(), nil
	})
	resp := &unyov1.GetAlertResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Alerts = append(resp.Alerts, a.value...)
	}
	if len(resp.Alerts) == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found in any cluster", req.Msg.GetId()))
	}
	return connect.NewResponse(resp), nil
}

// change sends an ack or close to the cluster holding the alert.
func (s *alertService) change(ctx context.Context, m *unyov1.AlertActionRequest, call func(context.Context, *client.Clients, *unyov1.AlertActionRequest) (*unyov1.Alert, error)) (*connect.Response[unyov1.AlertActionResponse], error) {
	if err := invalid(limits.Required("id", m.GetId())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, m.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) (*unyov1.Alert, error) {
		q := proto.Clone(m).(*unyov1.AlertActionRequest)
		q.Cluster = ""
		a, err := call(ctx, c, q)
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		return a, err
	})
	for _, a := range answers {
		if a.value != nil {
			return connect.NewResponse(&unyov1.AlertActionResponse{Alert: a.value}), nil
		}
	}
	if len(errs) > 0 {
		// The alert exists but the change was refused (a closed alert, no
		// reason), or its cluster did not answer: say what that cluster said.
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cluster %s: %s", errs[0].GetCluster(), errs[0].GetError()))
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found in any cluster", m.GetId()))
}

func (s *alertService) AckAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return s.change(ctx, req.Msg, func(ctx context.Context, c *client.Clients, q *unyov1.AlertActionRequest) (*unyov1.Alert, error) {
		out, err := c.Alerts.AckAlert(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetAlert(), nil
	})
}

func (s *alertService) CloseAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return s.change(ctx, req.Msg, func(ctx context.Context, c *client.Clients, q *unyov1.AlertActionRequest) (*unyov1.Alert, error) {
		out, err := c.Alerts.CloseAlert(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetAlert(), nil
	})
}

// maintenanceService ends a maintenance in every cluster that has it.
type maintenanceService struct{ r *Root }

func (s *maintenanceService) EndMaintenance(ctx context.Context, req *connect.Request[unyov1.EndMaintenanceRequest]) (*connect.Response[unyov1.EndMaintenanceResponse], error) {
	if err := invalid(limits.Required("name", req.Msg.GetName())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	for _, c := range targets { // in the caller's cluster scope; the role and kinds remain
		if err := server.RequireWrite(ctx, "Maintenance", c.GetName(), false); err != nil {
			s.r.audit.Record(ctx, "MaintenanceService/EndMaintenance", rbac.Target{Kind: "Maintenance", Name: req.Msg.GetName(), Cluster: c.GetName()}, nil, nil, err)
			return nil, err
		}
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.Maintenance, error) {
		q := proto.Clone(req.Msg).(*unyov1.EndMaintenanceRequest)
		q.Cluster = ""
		out, err := c.Maintenance.EndMaintenance(ctx, connect.NewRequest(q))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return out.Msg.GetMaintenances(), nil
	})
	resp := &unyov1.EndMaintenanceResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Maintenances = append(resp.Maintenances, a.value...)
	}
	if len(resp.Maintenances) == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("maintenance %q not found in any cluster", req.Msg.GetName()))
	}
	return connect.NewResponse(resp), nil
}
