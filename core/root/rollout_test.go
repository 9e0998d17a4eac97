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

// TestRollResolvesEachRevisionOnce: roll gives every replica its
// revision's template, flavor shape and cpu_policy, image and price (resolved once per
// revision), each replica its own copy; a replica whose revision's flavor
// is gone moves to the current revision.
func TestRollResolvesEachRevisionOnce(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	w := &world{
		flavors: map[string]*unyov1.Flavor{
			"small": {Name: "small", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 1, Memory: "1Gi", PricePerHour: 1}},
			"large": {Name: "large", Spec: &unyov1.FlavorSpec{Kind: "container", Vcpus: 4, Memory: "8Gi", PricePerHour: 4, CpuPolicy: "pinned"}},
		},
		images: map[string]*unyov1.Image{"web": {Name: "web", Spec: &unyov1.ImageSpec{Kind: "container", Source: "/bin/sleep"}}},
	}
	old := &unyov1.ComputeSpec{Flavor: "small", Image: "web", Provider: "exec", Replicas: 3}
	cur := &unyov1.ComputeSpec{Flavor: "large", Image: "web", Provider: "exec", Replicas: 3}
	hist, _ := service.Revise(nil, old, now)
	hist, target := service.Revise(hist, cur, now)
	s := &unyov1.RegionService{Name: "web", Spec: &unyov1.RegionServiceSpec{Compute: cur},
		Status: &unyov1.RegionServiceStatus{History: hist, TemplateRevision: target}}
	// web-0 and web-1 run revision 1, Active; web-2 is not placed yet.
	var live []*unyov1.Compute
	for i, rev := range []int64{1, 1, 0} {
		c := &unyov1.Compute{Name: "web-" + string(rune('0'+i)), SpecRevision: rev, Cluster: "c1",
			Status: &unyov1.ComputeStatus{Phase: service.PhaseActive, SpecRevision: rev}}
		if rev == 0 {
			c.Cluster, c.Status = "", nil
		}
		live = append(live, c)
	}
	spec := proto.CloneOf(cur)
	spec.Replicas = 0
	spec.Update = &unyov1.UpdateStrategy{MaxUnavailable: 2}
	roll(s, live, spec, w)
	got := map[string]string{}
	for _, r := range live {
		got[r.GetName()] = r.GetSpec().GetFlavor()
		if r.GetImageSource() != "/bin/sleep" {
			t.Errorf("%s: image %q", r.GetName(), r.GetImageSource())
		}
		if want := map[string]int64{"small": 1, "large": 4}[r.GetSpec().GetFlavor()]; r.GetResources().GetVcpus() != want || r.GetPrice().GetPerHour() != float64(want) {
			t.Errorf("%s (%s): resources %v price %v", r.GetName(), r.GetSpec().GetFlavor(), r.GetResources(), r.GetPrice())
		}
		// The flavor's cpu_policy travels with the shape to the agent.
		if want := map[string]string{"large": "pinned"}[r.GetSpec().GetFlavor()]; r.GetResources().GetCpuPolicy() != want {
			t.Errorf("%s (%s): cpu_policy %q, want %q", r.GetName(), r.GetSpec().GetFlavor(), r.GetResources().GetCpuPolicy(), want)
		}
	}
	// The unplaced one at the target at once, one moved within
	// max_unavailable 2 (the unplaced one counts), one still at revision 1.
	if got["web-0"] != "large" || got["web-1"] != "small" || got["web-2"] != "large" {
		t.Errorf("flavors after a pass: %v", got)
	}
	if live[0].GetSpec() == live[2].GetSpec() || live[0].GetResources() == live[2].GetResources() {
		t.Error("two replicas share one spec or resources message")
	}
	// The old revision's flavor is gone: web-1 moves to the current one.
	delete(w.flavors, "small")
	roll(s, live, spec, w)
	if live[1].GetSpecRevision() != target || live[1].GetSpec().GetFlavor() != "large" {
		t.Errorf("web-1 with its flavor gone: revision %d flavor %s", live[1].GetSpecRevision(), live[1].GetSpec().GetFlavor())
	}
}
