package root

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
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
	replicas := func() int32 {
		t.Helper()
		o, err := f.st.GetObject(ctx, "RegionService", "web")
		if err != nil {
			t.Fatal(err)
		}
		return o.GetRegionService().GetSpec().GetCompute().GetReplicas()
	}

	f.apply(doc(0))
	if got := replicas(); got != 2 {
		t.Fatalf("a new autoscaled service without replicas has %d, want min 2", got)
	}
	st := &unyov1.AutoscaleStatus{Desired: 4, Reason: "scale up"}
	ok, err := r.recordAutoscale(ctx, "web", autoscale.Decision{Current: 2, Desired: 4}, st)
	if err != nil || !ok || replicas() != 4 {
		t.Fatalf("recordAutoscale 2 → 4: %v, %v, replicas %d", ok, err, replicas())
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
}
