package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// schedNode is a Ready node with cpus vCPUs (1 GiB of memory and 10 GiB of
// disk each) in rack.
func schedNode(name, rack string, cpus int32) *unyov1.Node {
	return &unyov1.Node{
		Name:     name,
		Labels:   map[string]string{"rack": rack},
		Capacity: &unyov1.Capacity{Cpus: cpus, MemoryBytes: int64(cpus) << 30, DiskBytes: int64(cpus) * 10 << 30},
		State:    unyov1.NodeState_NODE_STATE_READY,
	}
}

var oneCPU = schedule.Resources{VCPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 10 << 30}

func compute(service string, i int) *unyov1.Compute {
	return &unyov1.Compute{
		Name: fmt.Sprintf("%s-%d", service, i), Service: service, Index: int32(i), Cluster: "c1",
		Spec:      &unyov1.ComputeSpec{Provider: "exec", Image: "img"},
		Resources: &unyov1.ComputeResources{Vcpus: 1, MemoryBytes: 1 << 30, DiskBytes: 10 << 30},
	}
}

// reserve places compute c of service on node at the node's current
// generation.
func reserve(t *testing.T, s store.Store, c *unyov1.Compute, node string, p schedule.Policy) (int64, error) {
	t.Helper()
	gen := getNode(t, s, node).GetGeneration()
	return s.ReserveCompute(ctx(t), store.Reservation{
		Compute: c.GetName(), Service: c.GetService(), Node: node,
		Resources: oneCPU, Generation: gen, Policy: p, ReservedAt: t0,
	}, &unyov1.Assignment{Compute: c.GetName(), Service: c.GetService(), Provider: "exec", Desired: "running"},
		&unyov1.ComputeStatus{Phase: "Creating:Scheduled", Node: node})
}

func computeTests() []contractTest {
	return []contractTest{
		{"SyncKeepsStatusAndMarksTheAbsentDeleting", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
			got, err := s.SyncComputes(ctx(t), []*unyov1.Compute{compute("web", 0), compute("web", 1)}, t0)
			must(t, err)
			if len(got) != 2 || got[0].GetStatus().GetPhase() != "Initializing" || got[0].GetName() != "web-0" {
				t.Fatalf("after the first sync: %v", got)
			}
			if _, err := reserve(t, s, compute("web", 0), "n1", schedule.Policy{}); err != nil {
				t.Fatal(err)
			}
			as, gen, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || as[0].GetCompute() != "web-0" || as[0].GetGeneration() != gen || as[0].GetNode() != "n1" {
				t.Fatalf("assignments of n1: %v (generation %d)", as, gen)
			}
			// Root still wants web-0 only: its status stays, web-1 goes.
			got, err = s.SyncComputes(ctx(t), []*unyov1.Compute{compute("web", 0)}, t0)
			must(t, err)
			if len(got) != 2 || got[0].GetStatus().GetPhase() != "Creating:Scheduled" || got[1].GetStatus().GetPhase() != "Deleting" {
				t.Fatalf("after the second sync: %v", got)
			}
			// Now web-0 goes too: its assignment turns to deleted.
			_, err = s.SyncComputes(ctx(t), nil, t0)
			must(t, err)
			as, gen2, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || as[0].GetDesired() != "deleted" || gen2 <= gen || as[0].GetGeneration() != gen2 {
				t.Fatalf("assignments after removal: %v (generation %d, was %d)", as, gen2, gen)
			}
			must(t, s.DropCompute(ctx(t), "web-0"))
			must(t, s.DropCompute(ctx(t), "web-1"))
			if cs, err := s.ListComputes(ctx(t)); err != nil || len(cs) != 0 {
				t.Fatalf("computes after drop: %v, %v", cs, err)
			}
			if n := getNode(t, s, "n1"); n.GetReserved().GetCpus() != 0 {
				t.Errorf("n1 still has %v reserved after the drop", n.GetReserved())
			}
		}},
		{"ReserveComputesCommitsUpToTheFirstRefusal", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
			must(t, s.UpsertNode(ctx(t), schedNode("n2", "r1", 4)))
			var cs []*unyov1.Compute
			for i := range 4 {
				cs = append(cs, compute("api", i))
			}
			_, err := s.SyncComputes(ctx(t), cs, t0)
			must(t, err)
			g1, g2 := getNode(t, s, "n1").GetGeneration(), getNode(t, s, "n2").GetGeneration()
			// At most two replicas in a rack: the third is refused, and the
			// fourth is not tried.
			p := schedule.Policy{AntiAffinity: []schedule.Term{{Key: "rack", MaxPerDomain: 2}}}
			place := func(c *unyov1.Compute, node string, gen int64) store.Placement {
				return store.Placement{
					Reservation: store.Reservation{Compute: c.GetName(), Service: c.GetService(), Node: node, Resources: oneCPU, Generation: gen, Policy: p, ReservedAt: t0},
					Assignment:  &unyov1.Assignment{Compute: c.GetName(), Service: c.GetService(), Provider: "exec", Desired: "running"},
					Status:      &unyov1.ComputeStatus{Phase: "Creating:Scheduled", Node: node},
				}
			}
			// Two placements on n1 chosen at one generation both pass.
			gens, err := s.ReserveComputes(ctx(t), []store.Placement{place(cs[0], "n1", g1), place(cs[1], "n1", g1), place(cs[2], "n2", g2), place(cs[3], "n2", g2)})
			var reason *schedule.Reason
			if !errors.As(err, &reason) || len(gens) != 2 || gens[1] <= gens[0] || gens[0] <= g1 {
				t.Fatalf("batch: generations %v, err %v; want two committed and a reason", gens, err)
			}
			rs, err := s.ListReservations(ctx(t))
			must(t, err)
			if len(rs) != 2 || rs[0].Compute != "api-0" || rs[1].Compute != "api-1" {
				t.Errorf("reservations %v, want api-0 and api-1", rs)
			}
			if got := getNode(t, s, "n1"); got.GetGeneration() != gens[1] || got.GetReserved().GetCpus() != 2 {
				t.Errorf("n1 at generation %d with %v reserved, want %d and 2 vCPUs", got.GetGeneration(), got.GetReserved(), gens[1])
			}
			as, _, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 2 {
				t.Errorf("assignments of n1: %v", as)
			}
			// A batch with a placement chosen at a moved generation commits
			// what comes before it.
			_, err = s.SyncComputes(ctx(t), append(cs, compute("web", 0), compute("web", 1)), t0)
			must(t, err)
			free := schedule.Policy{}
			w0, w1 := place(compute("web", 0), "n2", g2), place(compute("web", 1), "n1", g1)
			w0.Reservation.Policy, w1.Reservation.Policy = free, free
			gens, err = s.ReserveComputes(ctx(t), []store.Placement{w0, w1})
			if !errors.Is(err, store.ErrGeneration) || len(gens) != 1 {
				t.Errorf("stale batch: generations %v, err %v; want one committed and ErrGeneration", gens, err)
			}
			// Placed already: refused.
			if _, err := s.ReserveComputes(ctx(t), []store.Placement{place(cs[0], "n1", getNode(t, s, "n1").GetGeneration())}); !errors.Is(err, store.ErrExists) {
				t.Errorf("placing api-0 again: %v, want ErrExists", err)
			}
		}},
		{"ReserveRefusesOvercommitAndAMovedGeneration", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 2)))
			var cs []*unyov1.Compute
			for i := range 3 {
				cs = append(cs, compute("db", i))
			}
			_, err := s.SyncComputes(ctx(t), cs, t0)
			must(t, err)
			g0 := getNode(t, s, "n1").GetGeneration()
			g1, err := reserve(t, s, cs[0], "n1", schedule.Policy{})
			must(t, err)
			if g1 <= g0 {
				t.Errorf("generation %d after a reservation, was %d", g1, g0)
			}
			// Chosen before the first reservation: refused.
			_, err = s.ReserveCompute(ctx(t), store.Reservation{Compute: "db-1", Service: "db", Node: "n1", Resources: oneCPU, Generation: g0},
				&unyov1.Assignment{Compute: "db-1"}, nil)
			if !errors.Is(err, store.ErrGeneration) {
				t.Errorf("reserve at an old generation: %v, want ErrGeneration", err)
			}
			must2(t)(reserve(t, s, cs[1], "n1", schedule.Policy{}))
			_, err = reserve(t, s, cs[2], "n1", schedule.Policy{})
			var reason *schedule.Reason
			if !errors.As(err, &reason) || reason.Class != schedule.NoCapacity {
				t.Errorf("reserving past capacity: %v, want a NoCapacity reason", err)
			}
			n := getNode(t, s, "n1")
			if n.GetReserved().GetCpus() != 2 || n.GetReserved().GetMemoryBytes() != 2<<30 {
				t.Errorf("n1 reserved %v, want 2 vCPUs and 2 GiB", n.GetReserved())
			}
			// Anti-affinity over the hostname: a second replica is refused.
			must(t, s.UpsertNode(ctx(t), schedNode("n2", "r1", 4)))
			anti := schedule.Policy{AntiAffinity: []schedule.Term{{Key: "rack"}}}
			must(t, s.DropCompute(ctx(t), "db-1"))
			_, err = reserve(t, s, cs[2], "n2", anti)
			if !errors.As(err, &reason) {
				t.Errorf("second replica in rack r1 with anti-affinity: %v, want a reason", err)
			}
			// Cordoning moves the generation and refuses placements.
			changed, err := s.SetNodeCordoned(ctx(t), "n2", true)
			if err != nil || !changed || !getNode(t, s, "n2").GetCordoned() {
				t.Fatalf("cordon n2: changed %v, %v", changed, err)
			}
			if _, err = reserve(t, s, cs[2], "n2", schedule.Policy{}); !errors.As(err, &reason) {
				t.Errorf("placing on a cordoned node: %v, want a reason", err)
			}
			if changed, err := s.SetNodeCordoned(ctx(t), "n2", true); err != nil || changed {
				t.Errorf("cordon n2 again: changed %v, %v", changed, err)
			}
			if _, err := s.SetNodeCordoned(ctx(t), "nope", true); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("cordon an unknown node: %v", err)
			}
			rs, err := s.ListReservations(ctx(t))
			must(t, err)
			if len(rs) != 1 || rs[0].Compute != "db-0" || rs[0].Node != "n1" || rs[0].Resources != oneCPU || !rs[0].ReservedAt.Equal(t0) {
				t.Errorf("reservations: %+v", rs)
			}
		}},
		{"RacingPlacements", func(t *testing.T, s store.Store) {
			racePlacements(t, []store.Store{s, s}, 1)
		}},
	}
}

func must2(t *testing.T) func(int64, error) {
	return func(_ int64, err error) {
		t.Helper()
		must(t, err)
	}
}

// racePlacements has two workers per store place 480 one-vCPU replicas
// of 40 services (at most 3 per rack each) on 24 nodes of 16 vCPUs in 8
// racks (384 slots), each worker choosing nodes at random from what it read, then
// checks that no node is overcommitted and no rack holds more than 3
// replicas of a service.
//
// It does so rounds times, releasing every reservation in between.
func racePlacements(t *testing.T, stores []store.Store, rounds int) {
	t.Helper()
	total := 0
	for round := range rounds {
		total += racePlacementRound(t, stores, round == 0)
		if round < rounds-1 {
			rs, err := stores[0].ListReservations(ctx(t))
			must(t, err)
			for _, r := range rs {
				must(t, stores[round%len(stores)].DropCompute(ctx(t), r.Compute))
			}
		}
	}
	t.Logf("%d placements in %d rounds", total, rounds)
}

// racePlacementRound is one round of racePlacements; it returns how many
// replicas were placed.
func racePlacementRound(t *testing.T, stores []store.Store, first bool) int {
	t.Helper()
	s := stores[0]
	const nodes, racks, services, replicas = 24, 8, 40, 12
	if first {
		for i := range nodes {
			must(t, s.UpsertNode(ctx(t), schedNode(fmt.Sprintf("n%02d", i), fmt.Sprintf("r%d", i%racks), 16)))
		}
	}
	var all []*unyov1.Compute
	for sv := range services {
		for i := range replicas {
			all = append(all, compute(fmt.Sprintf("s%02d", sv), i))
		}
	}
	_, err := s.SyncComputes(ctx(t), all, t0)
	must(t, err)
	policy := schedule.Policy{AntiAffinity: []schedule.Term{{Key: "rack", MaxPerDomain: 3}}, NoDefaultSpread: true}
	work := make(chan *unyov1.Compute, len(all))
	for _, c := range rand.Perm(len(all)) {
		work <- all[c]
	}
	close(work)
	var attempts, placed, conflicts atomic.Int64
	var wg sync.WaitGroup
	for si, st := range stores {
		for range 2 {
			wg.Go(func() {
				for c := range work {
					for try := 0; try < 4; try++ {
						node := fmt.Sprintf("n%02d", rand.IntN(nodes))
						attempts.Add(1)
						n, err := st.GetNode(ctx(t), node)
						if err != nil {
							t.Errorf("store %d: %v", si, err)
							return
						}
						_, err = st.ReserveCompute(ctx(t), store.Reservation{
							Compute: c.GetName(), Service: c.GetService(), Node: node,
							Resources: oneCPU, Generation: n.GetGeneration(), Policy: policy,
						}, &unyov1.Assignment{Compute: c.GetName()}, nil)
						var reason *schedule.Reason
						switch {
						case err == nil:
							placed.Add(1)
							try = 4
						case errors.Is(err, store.ErrGeneration):
							conflicts.Add(1)
						case errors.As(err, &reason):
						default:
							t.Errorf("store %d: %v", si, err)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d placement attempts, %d placed, %d generation conflicts", attempts.Load(), placed.Load(), conflicts.Load())
	rs, err := s.ListReservations(ctx(t))
	must(t, err)
	if int64(len(rs)) != placed.Load() {
		t.Errorf("%d reservations stored, %d placements succeeded", len(rs), placed.Load())
	}
	used := map[string]int64{}
	perRack := map[string]int{}
	for _, r := range rs {
		used[r.Node] += r.Resources.VCPUs
		var idx int
		fmt.Sscanf(r.Node, "n%d", &idx)
		perRack[fmt.Sprintf("%s/r%d", r.Service, idx%racks)]++
	}
	for n, u := range used {
		if u > 16 {
			t.Errorf("node %s overcommitted: %d of 16 vCPUs reserved", n, u)
		}
		if got := getNode(t, s, n).GetReserved().GetCpus(); int64(got) != u {
			t.Errorf("node %s says %d vCPUs reserved, reservations sum to %d", n, got, u)
		}
	}
	for k, v := range perRack {
		if v > 3 {
			t.Errorf("%s holds %d replicas, anti-affinity allows 3", k, v)
		}
	}
	if placed.Load() < 300 {
		t.Errorf("only %d placed of the 384 slots", placed.Load())
	}
	return int(placed.Load())
}
