package storetest

import (
	"errors"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

func lbOf(backends ...string) *unyov1.Loadbalancer {
	l := &unyov1.Loadbalancer{Name: "web-lb", Service: "web", Vip: "10.1.0.5", Network: "net", Cluster: "c1",
		Spec: &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}}}}
	for _, b := range backends {
		l.Backends = append(l.Backends, &unyov1.LoadbalancerBackend{Compute: b, Address: "10.1.0." + b[len(b)-1:]})
	}
	return l
}

func loadbalancerTests() []contractTest {
	return []contractTest{
		{"SyncPlaceUpdateInPlaceAndDelete", func(t *testing.T, s store.Store) {
			got, err := s.SyncLoadbalancers(ctx(t), []*unyov1.Loadbalancer{lbOf("web-1")}, t0)
			must(t, err)
			if len(got) != 1 || got[0].GetStatus().GetPhase() != "Initializing" || got[0].GetRevision() != 1 {
				t.Fatalf("after the first sync: %v", got)
			}
			// Placed: n1's assignments list it with the load balancer's facts.
			must(t, s.PlaceLoadbalancer(ctx(t), "web-lb", "n1", &unyov1.LoadbalancerStatus{Phase: "Creating:Scheduled", Node: "n1"}))
			as, gen, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || as[0].GetCompute() != "web-lb" || as[0].GetGeneration() != gen || as[0].GetProvider() != "xdp" ||
				as[0].GetLoadbalancer().GetVip() != "10.1.0.5" || len(as[0].GetLoadbalancer().GetBackends()) != 1 || as[0].GetDesired() != "running" {
				t.Fatalf("assignments of n1: %v (generation %d)", as, gen)
			}
			// The same set again moves nothing.
			_, err = s.SyncLoadbalancers(ctx(t), []*unyov1.Loadbalancer{lbOf("web-1")}, t0)
			must(t, err)
			if g, _ := s.AssignmentsGeneration(ctx(t)); g != gen {
				t.Fatalf("an unchanged sync moved the generation from %d to %d", gen, g)
			}
			// A backend joins: the assignment is rewritten at a new
			// generation, the status stays.
			got, err = s.SyncLoadbalancers(ctx(t), []*unyov1.Loadbalancer{lbOf("web-1", "web-2")}, t0)
			must(t, err)
			if got[0].GetStatus().GetPhase() != "Creating:Scheduled" || got[0].GetRevision() != 2 {
				t.Fatalf("after a backend joined: %v", got)
			}
			as, gen2, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || gen2 <= gen || as[0].GetGeneration() != gen2 || len(as[0].GetLoadbalancer().GetBackends()) != 2 {
				t.Fatalf("after a backend joined, assignments of n1: %v (generation %d, was %d)", as, gen2, gen)
			}
			must(t, s.SetLoadbalancerStatus(ctx(t), "web-lb", &unyov1.LoadbalancerStatus{Phase: "Active", Node: "n1"}))
			if l, err := s.GetLoadbalancer(ctx(t), "web-lb"); err != nil || l.GetStatus().GetPhase() != "Active" {
				t.Fatalf("GetLoadbalancer = %v, %v", l, err)
			}
			// Another provider: placed anew.
			vpp := lbOf("web-1", "web-2")
			vpp.Spec.Provider = "vpp"
			got, err = s.SyncLoadbalancers(ctx(t), []*unyov1.Loadbalancer{vpp}, t0)
			must(t, err)
			if got[0].GetStatus().GetPhase() != "Initializing" {
				t.Fatalf("after the provider changed: %v", got)
			}
			if as, _, _ := s.ListAssignments(ctx(t), "n1"); len(as) != 0 {
				t.Fatalf("n1 still has %v after the provider changed", as)
			}
			must(t, s.PlaceLoadbalancer(ctx(t), "web-lb", "n1", &unyov1.LoadbalancerStatus{Phase: "Creating:Scheduled", Node: "n1"}))
			// Moved to n2: n1 no longer has it.
			must(t, s.PlaceLoadbalancer(ctx(t), "web-lb", "n2", &unyov1.LoadbalancerStatus{Phase: "Creating:Scheduled", Node: "n2"}))
			if as, _, _ := s.ListAssignments(ctx(t), "n1"); len(as) != 0 {
				t.Fatalf("n1 still has %v", as)
			}
			// Root no longer wants it: Deleting, its assignment turns to
			// deleted, and placing it is refused.
			got, err = s.SyncLoadbalancers(ctx(t), nil, t0)
			must(t, err)
			if len(got) != 1 || got[0].GetStatus().GetPhase() != "Deleting" {
				t.Fatalf("after root dropped it: %v", got)
			}
			as, gen3, err := s.ListAssignments(ctx(t), "n2")
			must(t, err)
			if len(as) != 1 || as[0].GetDesired() != "deleted" || as[0].GetGeneration() != gen3 {
				t.Fatalf("assignments of n2: %v", as)
			}
			if err := s.PlaceLoadbalancer(ctx(t), "web-lb", "n1", nil); !errors.Is(err, store.ErrDeleting) {
				t.Fatalf("placing a deleted load balancer: %v, want ErrDeleting", err)
			}
			must(t, s.DropLoadbalancer(ctx(t), "web-lb"))
			if _, err := s.GetLoadbalancer(ctx(t), "web-lb"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("after the drop: %v", err)
			}
			if g, _ := s.AssignmentsGeneration(ctx(t)); g <= gen3 {
				t.Fatalf("dropping a placed load balancer left the generation at %d", g)
			}
		}},
		{"NeverPlacedGoesAtOnce", func(t *testing.T, s store.Store) {
			_, err := s.SyncLoadbalancers(ctx(t), []*unyov1.Loadbalancer{lbOf()}, t0)
			must(t, err)
			got, err := s.SyncLoadbalancers(ctx(t), nil, t0)
			must(t, err)
			if len(got) != 0 {
				t.Fatalf("a never-placed load balancer is still held: %v", got)
			}
			if ls, err := s.ListLoadbalancers(ctx(t)); err != nil || len(ls) != 0 {
				t.Fatalf("ListLoadbalancers = %v, %v", ls, err)
			}
		}},
	}
}
