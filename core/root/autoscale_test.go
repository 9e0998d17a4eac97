package root

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/provision/autoscale"
)

// The autoscaler owns an autoscaled service's replicas: a new service
// without replicas starts at min, its decisions go through root's apply,
// an operator's apply keeps its count, a decision made on a count that
// changed meanwhile is dropped, and the controller's status keeps the
// autoscaler's state.
func TestAutoscalerOwnsReplicas(t *testing.T) {
	f := newControllerFixture(t, "c1")
	r := New(f.st, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	doc := func(replicas int32) *unyov1.RegionService {
		s := webService(replicas)
		s.Spec.Compute.Autoscale = &unyov1.Autoscale{Min: 2, Max: 5, Metric: "load", Target: 10}
		return s
	}
	replicas := f.replicas

	f.apply(doc(0))
	if got := replicas(); got != 2 {
		t.Fatalf("a new autoscaled service without replicas has %d, want min 2", got)
	}
	st := &unyov1.AutoscaleStatus{Desired: 4, Reason: "scale up"}
	ok, err := r.recordAutoscale(ctx, "web", autoscale.Decision{Current: 2, Desired: 4}, st)
	if err != nil || !ok || replicas() != 4 {
		t.Fatalf("recordAutoscale 2 → 4: %v, %v, replicas %d", ok, err, replicas())
	}
	recs, err := f.st.ListAudit(ctx, store.AuditFilter{Who: "root:autoscaler"})
	if err != nil || len(recs) != 1 || recs[0].GetName() != "web" || recs[0].GetProcedure() != "ObjectService/Apply" {
		t.Errorf("the autoscaler's write in the audit log: %v, %v", recs, err)
	}
	f.apply(doc(1))
	if got := replicas(); got != 4 {
		t.Errorf("an operator's apply set replicas %d; the autoscaler's 4 must stay", got)
	}
	if ok, err := r.recordAutoscale(ctx, "web", autoscale.Decision{Current: 3, Desired: 5}, st); err != nil || ok || replicas() != 4 {
		t.Errorf("a decision on a stale count (3, now 4): applied %v, %v, replicas %d", ok, err, replicas())
	}
	f.pass()
	if got := f.status().GetAutoscale(); !proto.Equal(got, st) {
		t.Errorf("after a controller pass the status's autoscale is %v, want %v", got, st)
	}
	// Without autoscale, the document's count is the operator's again.
	f.apply(webService(1))
	if got := replicas(); got != 1 {
		t.Errorf("without autoscale, replicas %d, want the document's 1", got)
	}
	f.pass()
	if got := f.status().GetAutoscale(); got != nil {
		t.Errorf("without autoscale the status keeps the autoscaler's state %v", got)
	}
}

// The autoscaler's evaluation at root: a metric without a series, with
// two, or answered by only some clusters scales nothing, shows the error
// in the status and raises one WARNING event per error; a usable value
// scales (up at once, down after the window) with an event carrying the
// inputs.
func TestAutoscalerEvaluates(t *testing.T) {
	f := newControllerFixture(t, "c1")
	r := New(f.st, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	a := r.autoscaler
	a.now = func() time.Time { return f.clock }
	var answer []tsdb.Series
	var warning string
	a.query = func(ctx context.Context, expr string, _ time.Time) ([]tsdb.Series, error) {
		if expr != `max(load{service="web"})` {
			t.Errorf("queried %q", expr)
		}
		if warning != "" {
			promapi.Warn(ctx, warning)
		}
		return answer, nil
	}
	var events []string
	a.emit = func(_ context.Context, svc string, st unyov1.CheckStatus, out string) {
		events = append(events, fmt.Sprintf("%s %s %s", svc, st.Name(), out))
	}
	one := func(v float64) []tsdb.Series {
		return []tsdb.Series{{Points: []tsdb.Point{{T: f.clock, V: v}}}}
	}
	s := webService(1)
	s.Spec.Compute.Autoscale = &unyov1.Autoscale{Min: 1, Max: 3, Metric: `max(load{service="web"})`, Target: 10, ScaleDownWindow: "3s", Interval: "1s"}
	f.apply(s)
	replicas := f.replicas
	step := func(series []tsdb.Series, warn string, wantReplicas int32, wantError string, wantEvents int) {
		t.Helper()
		answer, warning = series, warn
		f.clock = f.clock.Add(time.Second)
		if err := a.pass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := replicas(); got != wantReplicas {
			t.Errorf("replicas %d, want %d (status %v)", got, wantReplicas, f.status().GetAutoscale())
		}
		if got := f.status().GetAutoscale().GetError(); !strings.Contains(got, wantError) || (wantError == "") != (got == "") {
			t.Errorf("status error %q, want %q", got, wantError)
		}
		if len(events) != wantEvents {
			t.Errorf("%d events, want %d: %q", len(events), wantEvents, events)
		}
	}
	step(nil, "", 1, "returned no series", 1)
	step(nil, "", 1, "returned no series", 1) // the same error raises no second event
	step(append(one(1), one(2)...), "", 1, "returned 2 series, want one", 2)
	step(one(30), "cluster c2 did not answer", 1, "no scaling on a partial answer", 3)
	step(one(30), "", 3, "", 5) // scaled, and usable again
	if !strings.Contains(events[0], "web warning web is not autoscaled") ||
		!strings.Contains(events[3], "web ok web scaled from 1 to 3 replicas by the autoscaler\nscale up from 1 to 3 replicas: metric 30 / target 10 = 3 recommends 3") ||
		!strings.Contains(events[4], "web ok web is autoscaled again") {
		t.Errorf("events: %q", events)
	}
	if st := f.status().GetAutoscale(); !st.GetHasValue() || st.GetValue() != 30 || st.GetDesired() != 3 || st.GetDecidedAt() == nil {
		t.Errorf("status: %v", st)
	}
	step(one(3), "", 3, "", 5) // 0.3 → 1, held by the 3s window
	if got := f.status().GetAutoscale().GetReason(); !strings.Contains(got, "held at 3 by scale_down_window 3s") {
		t.Errorf("reason %q", got)
	}
	step(one(3), "", 3, "", 5)
	step(one(3), "", 1, "", 6) // 3s after the last recommendation of 3

	if !strings.Contains(events[5], "web scaled from 3 to 1 replicas") {
		t.Errorf("events: %q", events)
	}
}

// replicas is service web's replica count as stored.
func (f *controllerFixture) replicas() int32 {
	f.t.Helper()
	o, err := f.st.GetObject(context.Background(), "RegionService", "web")
	if err != nil {
		f.t.Fatal(err)
	}
	return o.GetRegionService().GetSpec().GetCompute().GetReplicas()
}
