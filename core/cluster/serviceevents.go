package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/server"
)

// rootServiceChecks are the checks root may raise through
// RecordServiceEvent (its autoscaler's decisions, its cluster stage's
// refusals); anything else is refused, so that the call cannot
// forge an agent's or the cluster's own events.
var rootServiceChecks = []string{ingest.AutoscaleCheck, ingest.PlacementCheck}

// RecordServiceEvent stores an event root raises about a RegionService
// (root has no event store): on the cluster's own node name, labelled with
// the service, through ingest like every event. Only root (or an admin)
// may call it; the procedure needs the admin level, as SyncComputes does.
func (s *provisionService) RecordServiceEvent(ctx context.Context, req *connect.Request[unyov1.RecordServiceEventRequest]) (*connect.Response[unyov1.RecordServiceEventResponse], error) {
	p := server.PrincipalFrom(ctx)
	if p.Kind == server.KindNode || !p.InCluster(s.c.opts.Name) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not record service events in cluster %q", p, s.c.opts.Name))
	}
	m := req.Msg
	var f validate.Fields
	f.Name("service", m.GetService())
	if !slices.Contains(rootServiceChecks, m.GetCheck()) {
		f.Addf("check", "%q is not a check root raises (known: %v)", m.GetCheck(), rootServiceChecks)
	}
	status, err := unyov1.ParseCheckStatus(m.GetStatus())
	if err != nil {
		f.Add("status", err.Error())
	}
	if m.GetOutput() == "" {
		f.Add("output", "required: what happened, in words")
	}
	if err := f.Err("service event", m.GetService()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	labels := maps.Clone(m.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels["service"] = m.GetService()
	e := ingest.Synthetic{Node: s.c.opts.Name, Check: m.GetCheck(), Status: status, Output: m.GetOutput(), At: time.Now(), Labels: labels}.Event()
	res, err := s.c.ingest.Ingest(ctx, ingest.Batch{Source: ingest.RootService, Events: []*unyov1.Event{e}})
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("store the event of service %s: %w", m.GetService(), err))
	}
	if len(res.Rejected) > 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the event of service %s is not valid: %s", m.GetService(), res.Rejected[0]))
	}
	return connect.NewResponse(&unyov1.RecordServiceEventResponse{Id: e.GetId()}), nil
}
