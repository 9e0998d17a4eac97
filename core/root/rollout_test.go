package root

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/service"
)

// replacingClusters is fakeClusters whose replicas take a sync to be
// replaced: a replica whose spec_revision moved is Updating for one sync,
// then Active at the new revision (as the cluster's in-place replacement).
type replacingClusters struct {
	*fakeClusters
	mu      sync.Mutex
	running map[string]int64 // compute -> revision of its instance
	pending map[string]bool  // being replaced this sync
	env     map[string]string
}

func (f *replacingClusters) SyncComputes(ctx context.Context, cluster string, want *unyov1.SyncComputesRequest) (*unyov1.SyncComputesResponse, error) {
	resp, err := f.fakeClusters.SyncComputes(ctx, cluster, want)
	if err != nil {
		return nil, err
	}
	out := resp.GetComputes()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range out {
		rev, ok := f.running[h.GetName()]
		switch {
		case !ok || rev == h.GetSpecRevision():
			f.running[h.GetName()] = h.GetSpecRevision()
			f.env[h.GetName()] = h.GetSpec().GetEnv()["V"]
			h.Status.SpecRevision = h.GetSpecRevision()
		case !f.pending[h.GetName()]:
			f.pending[h.GetName()] = true
			h.Status = &unyov1.ComputeStatus{Phase: service.PhaseUpdating, SpecRevision: rev}
		default:
			delete(f.pending, h.GetName())
			f.running[h.GetName()] = h.GetSpecRevision()
			f.env[h.GetName()] = h.GetSpec().GetEnv()["V"]
			h.Status.SpecRevision = h.GetSpecRevision()
		}
	}
	return resp, nil
}

// A template change moves three replicas to the new revision one at a
// time (max_unavailable 1, no surge), never with fewer than two Active;
// a scale is no new revision; undo re-applies an old template as a new
// revision.
func TestControllerRollingUpdate(t *testing.T) {
	f := newControllerFixture(t, "c1")
	fake := &replacingClusters{fakeClusters: f.fake, running: map[string]int64{}, pending: map[string]bool{}, env: map[string]string{}}
	f.c = newServiceController(f.st, fake, &sync.Mutex{}, f.c.timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.c.now = func() time.Time { return f.clock }
	svc := func(v string, replicas int32) *unyov1.RegionService {
		s := webService(replicas)
		s.Spec.Compute.Env = map[string]string{"V": v}
		s.Spec.Compute.Update = &unyov1.UpdateStrategy{MaxUnavailable: 1}
		return s
	}
	f.apply(svc("1", 3))
	f.pass()
	f.pass()
	if st := f.status(); st.GetPhase() != service.PhaseActive || st.GetTemplateRevision() != 1 || st.GetUpdated() != 3 || len(st.GetHistory()) != 1 {
		t.Fatalf("first rollout: %v", st)
	}
	f.apply(svc("1", 3)) // nothing changed: no revision
	f.pass()
	if st := f.status(); st.GetTemplateRevision() != 1 {
		t.Fatalf("an unchanged apply made revision %d", st.GetTemplateRevision())
	}

	rollTo := func(v string, rev int64) {
		t.Helper()
		f.apply(svc(v, 3))
		sawUpdating := false
		for i := 0; ; i++ {
			if i > 20 {
				t.Fatalf("the rollout to %s did not finish: %v", v, f.status())
			}
			f.pass()
			active := 0
			for _, o := range f.objects(service.KindCompute) {
				if o.GetCompute().GetStatus().GetPhase() == service.PhaseActive {
					active++
				}
			}
			if active < 2 {
				t.Fatalf("pass %d: %d Active, want at least 2 (max_unavailable 1): %s", i, active, f.computes())
			}
			st := f.status()
			t.Logf("pass %d: %s | %s %s", i, f.computes(), st.GetPhase(), st.GetRollout())
			if st.GetPhase() == service.PhaseUpdating {
				sawUpdating = true
				if st.GetRollout() == "" {
					t.Errorf("an Updating service without its rollout's words: %v", st)
				}
			}
			if st.GetPhase() == service.PhaseActive && st.GetUpdated() == 3 {
				break
			}
		}
		st := f.status()
		if !sawUpdating || st.GetTemplateRevision() != rev {
			t.Errorf("rollout to %s: updating seen %v, status %v", v, sawUpdating, st)
		}
		for name, got := range fake.env {
			if got != v {
				t.Errorf("%s runs V=%s, want %s", name, got, v)
			}
		}
	}
	rollTo("2", 2)
	// Undo: the template of revision 1 applied again is revision 3.
	rollTo("1", 3)
	if h := f.status().GetHistory(); len(h) != 3 || !proto.Equal(h[2].GetTemplate(), h[0].GetTemplate()) {
		t.Errorf("history after undo: %v", h)
	}
}

func (f *controllerFixture) objects(kind string) []*unyov1.Object {
	f.t.Helper()
	objs, err := f.st.ListObjects(context.Background(), kind)
	if err != nil {
		f.t.Fatal(err)
	}
	return objs
}
