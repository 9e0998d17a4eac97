package root

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/provision/autoscale"
	"github.com/unyo-ops/unyo/provision/service"
)

// Root's autoscaler evaluates, every autoscale.interval, the metric of
// each RegionService with spec.compute.autoscale against the TSDB (the
// clusters' series, as root's /api/v1/query answers), lets
// provision/autoscale decide with the HPA rule, writes what it saw into
// the service's status.autoscale and, when the decision changes the
// replicas, sets them through root's apply as `unyo services scale` does,
// recorded as root:autoscaler. Every decision that changes the replicas,
// and every time the metric stops or starts being usable, is an event
// (check service-autoscale) stored by a cluster holding the service's
// replicas: root has no event store of its own.
//
// The recommendations of the stabilization windows are kept in memory: a
// restarted root starts each service's history afresh, as if its current
// count had just been recommended, so a scale-down waits a whole
// scale_down_window again.

// autoscalerPrincipal is who the autoscaler's writes are recorded as.
var autoscalerPrincipal = server.Principal{Kind: server.KindRoot, Name: "autoscaler", Role: server.RoleAdmin}

// autoscaleTick is how often the autoscaler looks for services whose
// interval has passed (autoscale.MinInterval is the shortest interval).
const autoscaleTick = autoscale.MinInterval

// autoscaler keeps each autoscaled service's recommendations.
type autoscaler struct {
	r   *Root
	log *slog.Logger
	now func() time.Time
	// query evaluates a metric at root (promBackend's Query over every
	// cluster); emit stores an event in a cluster (eventCluster's). Tests
	// replace both.
	query func(ctx context.Context, expr string, at time.Time) ([]tsdb.Series, error)
	emit  func(ctx context.Context, svc string, status unyov1.CheckStatus, output string)
	state map[string]*scaleState
}

// scaleState is what the autoscaler remembers of one service.
type scaleState struct {
	history []autoscale.Recommendation
	next    time.Time
	// failing is the metric's error last raised as an event ("" when the
	// metric was usable).
	failing string
}

func newAutoscaler(r *Root, log *slog.Logger) *autoscaler {
	a := &autoscaler{r: r, log: log, now: time.Now, query: promBackend{r: r}.Query, state: map[string]*scaleState{}}
	a.emit = a.event
	return a
}

// autoscaleLoop runs the autoscaler until ctx ends.
func (r *Root) autoscaleLoop(ctx context.Context) {
	t := time.NewTicker(autoscaleTick)
	defer t.Stop()
	for {
		if err := r.autoscaler.pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("a pass of the autoscaler failed; the next one retries", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass evaluates the services whose interval has passed.
func (a *autoscaler) pass(ctx context.Context) error {
	objs, err := a.r.store.ListObjects(ctx, service.KindService)
	if err != nil {
		return fmt.Errorf("list the services: %w", err)
	}
	now := a.now()
	seen := map[string]bool{}
	for _, o := range objs {
		s := o.GetRegionService()
		spec := s.GetSpec().GetCompute().GetAutoscale()
		if spec == nil || deleting(s) {
			continue
		}
		seen[s.GetName()] = true
		st := a.state[s.GetName()]
		if st == nil {
			st = &scaleState{history: autoscale.Start(s.GetSpec().GetCompute().GetReplicas(), now)}
			a.state[s.GetName()] = st
		}
		if now.Before(st.next) {
			continue
		}
		p := autoscale.Parse(spec)
		st.next = now.Add(p.Interval)
		a.evaluate(ctx, s, p, st)
	}
	for name := range a.state {
		if !seen[name] {
			delete(a.state, name) // gone, or no longer autoscaled
		}
	}
	return nil
}

// evaluate reads a service's metric, decides, and applies the decision.
func (a *autoscaler) evaluate(ctx context.Context, s *unyov1.RegionService, p autoscale.Policy, st *scaleState) {
	name := s.GetName()
	value, verr := a.value(ctx, p.Metric)
	now := a.now()
	d := autoscale.Decide(p, autoscale.Input{Current: s.GetSpec().GetCompute().GetReplicas(), Value: value, Err: verr, Now: now, History: st.history})
	st.history = d.History
	status := &unyov1.AutoscaleStatus{Recommended: d.Recommended, Desired: d.Desired, EvaluatedAt: timestamppb.New(now),
		Reason: d.Reason, DecidedAt: s.GetStatus().GetAutoscale().GetDecidedAt()}
	if d.Err == nil && verr == nil {
		status.Value, status.HasValue = value, true
	}
	if d.Err != nil {
		status.Error = d.Err.Error()
	}
	if d.Changed() {
		status.DecidedAt = timestamppb.New(now)
	}
	applied, err := a.r.recordAutoscale(ctx, name, d, status)
	switch {
	case err != nil:
		a.log.Warn("the autoscaler could not store its decision; the next evaluation decides again", "service", name, "err", err)
		return
	case !applied:
		a.log.Debug("a service changed while its metric was evaluated; the next evaluation decides again", "service", name)
		return
	}
	if d.Changed() {
		a.log.Info("autoscaled a service", "service", name, "from", d.Current, "to", d.Desired, "reason", d.Reason)
		a.emit(ctx, name, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("%s scaled from %d to %d replicas by the autoscaler\n%s", name, d.Current, d.Desired, d.Reason))
	}
	switch {
	case d.Err != nil && d.Err.Error() != st.failing:
		a.log.Warn("a service's autoscale metric cannot be used; it is not scaled", "service", name, "err", d.Err)
		st.failing = d.Err.Error()
		a.emit(ctx, name, unyov1.CheckStatus_CHECK_STATUS_WARNING, fmt.Sprintf("%s is not autoscaled: %v\nmetric %s", name, d.Err, p.Metric))
	case d.Err == nil && st.failing != "":
		st.failing = ""
		a.emit(ctx, name, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("%s is autoscaled again: its metric is usable\n%s", name, d.Reason))
	}
}

// value evaluates the metric at root over every cluster: a scalar or one
// series. Without every cluster's answer it refuses: scaling on part of
// the fleet's metric could halve a service.
func (a *autoscaler) value(ctx context.Context, expr string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, a.r.opts.ClusterTimeout)
	defer cancel()
	ctx, warnings := promapi.CollectWarnings(ctx)
	series, err := a.query(ctx, expr, a.now())
	if err != nil {
		return 0, fmt.Errorf("evaluate %s: %w", expr, err)
	}
	if w := warnings(); len(w) > 0 {
		return 0, fmt.Errorf("evaluate %s: %s; no scaling on a partial answer", expr, strings.Join(w, "; "))
	}
	switch len(series) {
	case 0:
		return 0, fmt.Errorf("%s returned no series (are its samples written?)", expr)
	case 1:
	default:
		return 0, fmt.Errorf("%s returned %d series, want one: aggregate them (sum, avg, max)", expr, len(series))
	}
	pts := series[0].Points
	if len(pts) == 0 {
		return 0, fmt.Errorf("%s returned a series without a value", expr)
	}
	v := pts[len(pts)-1].V
	if math.IsNaN(v) {
		return 0, fmt.Errorf("%s is NaN", expr)
	}
	return v, nil
}

// recordAutoscale stores a decision on the service as it is now: its
// status.autoscale and, when the decision changes the replicas, the new
// count through root's apply (the path of `unyo services scale`), as the
// autoscaler. It applies nothing, and says so, when the service changed
// meanwhile (deleted, no longer autoscaled, or scaled by someone else).
func (r *Root) recordAutoscale(ctx context.Context, name string, d autoscale.Decision, st *unyov1.AutoscaleStatus) (bool, error) {
	r.svcMu.Lock()
	defer r.svcMu.Unlock()
	o, err := r.store.GetObject(ctx, service.KindService, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read service %s: %w", name, err)
	}
	s := o.GetRegionService()
	if s.GetSpec().GetCompute().GetAutoscale() == nil || deleting(s) || s.GetSpec().GetCompute().GetReplicas() != d.Current {
		return false, nil
	}
	if s.Status == nil {
		s.Status = &unyov1.RegionServiceStatus{}
	}
	if !d.Changed() {
		if sameAutoscaleStatus(s.GetStatus().GetAutoscale(), st) {
			return true, nil
		}
		s.Status.Autoscale = st
		if _, err := r.store.PutObjects(ctx, []*unyov1.Object{o}); err != nil {
			return false, fmt.Errorf("store service %s's autoscale status: %w", name, err)
		}
		return true, nil
	}
	s.Spec.Compute.Replicas = d.Desired
	s.Status.Autoscale = st
	if _, err := newObjectService(r).local.Apply(server.WithPrincipal(ctx, autoscalerPrincipal), []*unyov1.Object{kinds.Wrap(s)}); err != nil {
		return false, fmt.Errorf("scale service %s from %d to %d: %w", name, d.Current, d.Desired, err)
	}
	r.servicesChanged()
	return true, nil
}

// sameAutoscaleStatus compares statuses but for when they were evaluated,
// so that a steady service is not rewritten every interval.
func sameAutoscaleStatus(a, b *unyov1.AutoscaleStatus) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	a.EvaluatedAt, b.EvaluatedAt = nil, nil
	return proto.Equal(a, b)
}

// event has a cluster holding the service's replicas (the one of its
// lowest index; any registered cluster when none is placed yet) store an
// autoscaling event.
func (a *autoscaler) event(ctx context.Context, svc string, status unyov1.CheckStatus, output string) {
	cluster, err := a.eventCluster(ctx, svc)
	if err != nil {
		a.log.Warn("an autoscaling event has no cluster to be stored in", "service", svc, "err", err, "event", output)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.r.opts.ClusterTimeout)
	defer cancel()
	err = rootCalls{a.r}.RecordServiceEvent(ctx, cluster, &unyov1.RecordServiceEventRequest{
		Service: svc, Check: ingest.AutoscaleCheck, Status: status.Name(), Output: output})
	if err != nil {
		a.log.Warn("an autoscaling event could not be stored", "service", svc, "cluster", cluster, "err", err, "event", output)
	}
}

func (a *autoscaler) eventCluster(ctx context.Context, svc string) (string, error) {
	objs, err := a.r.store.ListObjects(ctx, service.KindCompute)
	if err != nil {
		return "", fmt.Errorf("list the computes: %w", err)
	}
	best, idx := "", int32(math.MaxInt32)
	for _, o := range objs {
		c := o.GetCompute()
		if c.GetService() == svc && c.GetCluster() != "" && c.GetIndex() < idx {
			best, idx = c.GetCluster(), c.GetIndex()
		}
	}
	if best != "" {
		return best, nil
	}
	names, err := rootCalls{a.r}.Clusters(ctx)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", errors.New("no cluster is registered")
	}
	return slices.Min(names), nil
}
