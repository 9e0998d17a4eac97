package root

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/service"
)

// rolloutPoll is how soon the controller looks again while a rollout
// runs.
const rolloutPoll = time.Second

// revise counts a service's current compute template in its revision
// history (kept in its status, MaxRevisionHistory deep) and reports
// whether that changed the service, which the caller then stores.
func revise(s *unyov1.RegionService, now time.Time) bool {
	if deleting(s) {
		return false
	}
	hist, rev := service.Revise(s.GetStatus().GetHistory(), s.GetSpec().GetCompute(), now)
	if rev == s.GetStatus().GetTemplateRevision() && len(hist) == len(s.GetStatus().GetHistory()) {
		return false
	}
	st := proto.CloneOf(s.GetStatus())
	if st == nil {
		st = &unyov1.RegionServiceStatus{}
	}
	st.History, st.TemplateRevision = hist, rev
	s.Status = st
	return true
}

// roll is the rolling update of a service's live replicas: each runs the
// template of its spec_revision; replicas that hold no instance yet (no
// cluster) take the current revision at once, and placed ones are moved
// to it as service.Pace allows (max_unavailable, max_surge, each moved
// one Active at the new revision before the next). spec is the current
// compute spec (replicas and autoscale cleared); its flavor and image are
// known to exist. A replica whose revision's flavor or image is gone, or
// whose revision fell out of the history, moves to the current one.
func roll(s *unyov1.RegionService, live []*unyov1.Compute, spec *unyov1.ComputeSpec, w *world) {
	target := s.GetStatus().GetTemplateRevision()
	hist := s.GetStatus().GetHistory()
	for _, r := range live {
		if r.GetSpecRevision() == 0 || r.GetCluster() == "" || service.Revision(hist, r.GetSpecRevision()) == nil {
			r.SpecRevision, r.Surge = target, false
		}
	}
	mu, ms := service.Budget(spec.GetUpdate(), int(s.GetSpec().GetCompute().GetReplicas()))
	moves := map[string]bool{}
	for _, m := range service.Pace(service.RolloutReplicas(live), target, mu, ms) {
		moves[m.Name] = m.Surge
	}
	// Each revision's template is resolved once per pass, however many
	// replicas run it.
	resolved := map[int64]*resolvedTemplate{}
	resolve := func(rev int64) *resolvedTemplate {
		if rt, ok := resolved[rev]; ok {
			return rt
		}
		rt := &resolvedTemplate{spec: spec}
		if h := service.Revision(hist, rev); h != nil {
			rt.spec = service.WithTemplate(spec, h.GetTemplate())
		}
		var fok, iok bool
		rt.flavor, fok = w.flavors[rt.spec.GetFlavor()]
		rt.image, iok = w.images[rt.spec.GetImage()]
		shape, err := service.Shape(rt.flavor)
		rt.ok = fok && iok && err == nil
		rt.resources = service.Resources(shape)
		rt.resources.CpuPolicy = rt.flavor.GetSpec().GetCpuPolicy()
		rt.price = &unyov1.ComputePrice{PerHour: rt.flavor.GetSpec().GetPricePerHour(), ModelPrices: rt.flavor.GetSpec().GetModelPrices()}
		resolved[rev] = rt
		return rt
	}
	for _, r := range live {
		if surge, ok := moves[r.GetName()]; ok {
			r.SpecRevision, r.Surge = target, surge
		}
		if r.GetSpecRevision() == target && service.Ready(r) {
			r.Surge = false // done: no surge left to ask for
		}
		rt := resolve(r.GetSpecRevision())
		if !rt.ok {
			// Its revision's flavor or image is gone: the current one.
			r.SpecRevision, r.Surge = target, false
			rt = resolve(target)
		}
		// Each replica owns its spec and resources (they are stored and
		// changed per replica); the resolution is shared.
		r.Spec, r.Resources, r.ImageSource = proto.CloneOf(rt.spec), proto.CloneOf(rt.resources), rt.image.GetSpec().GetSource()
		r.Price = proto.CloneOf(rt.price)
	}
}

// resolvedTemplate is one revision's template with what it names looked
// up: the spec a replica running it gets, its flavor, image, resources
// and price; ok is false when the flavor or image is gone.
type resolvedTemplate struct {
	spec      *unyov1.ComputeSpec
	flavor    *unyov1.Flavor
	image     *unyov1.Image
	resources *unyov1.ComputeResources
	price     *unyov1.ComputePrice
	ok        bool
}
