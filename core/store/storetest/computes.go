package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/billing"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
	"google.golang.org/protobuf/proto"
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
		{"ReplacementsHoldTwoReservationsAndLeakNone", replacementTest},
		{"DrainMarksTheNodeDrainingAndCordoned", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 2)))
			g0 := getNode(t, s, "n1").GetGeneration()
			must(t, s.SetNodeDrain(ctx(t), "n1", &unyov1.NodeDrain{Phase: store.DrainPhaseDraining, By: "ops"}))
			n := getNode(t, s, "n1")
			if !n.GetDraining() || !n.GetCordoned() || n.GetDrain().GetBy() != "ops" || n.GetGeneration() <= g0 {
				t.Fatalf("after the drain started: draining %v cordoned %v drain %v generation %d (was %d)", n.GetDraining(), n.GetCordoned(), n.GetDrain(), n.GetGeneration(), g0)
			}
			must(t, s.SetNodeDrain(ctx(t), "n1", &unyov1.NodeDrain{Phase: "Drained"}))
			if n := getNode(t, s, "n1"); n.GetDraining() || !n.GetCordoned() || n.GetDrain().GetPhase() != "Drained" {
				t.Fatalf("after the drain ended: draining %v cordoned %v drain %v", n.GetDraining(), n.GetCordoned(), n.GetDrain())
			}
			must(t, s.SetNodeAuto(ctx(t), "n1", &unyov1.NodeAuto{CordonAfter: "5m", Cordoned: true}))
			must(t, s.SetNodeDrain(ctx(t), "n1", nil))
			if n := getNode(t, s, "n1"); n.GetDrain() != nil || n.GetAuto().GetCordonAfter() != "5m" || !n.GetAuto().GetCordoned() {
				t.Fatalf("drain %v, auto %v", n.GetDrain(), n.GetAuto())
			}
			if err := s.SetNodeDrain(ctx(t), "nope", nil); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("drain an unknown node: %v", err)
			}
		}},
		{"RacingPlacements", func(t *testing.T, s store.Store) {
			racePlacements(t, []store.Store{s, s}, 1)
		}},
		{"LedgerOpensAndClosesOneRow", func(t *testing.T, s store.Store) {
			ledgerReserveAndRelease(t, s, s)
		}},
		{"AssignmentsCounterStartsAtOne", func(t *testing.T, s store.Store) {
			// 0 is an agent's "never fetched", which the long poll answers
			// at once; a cluster that never assigned anything answers 1,
			// on which the agent's next fetch waits.
			gen, err := s.AssignmentsGeneration(ctx(t))
			must(t, err)
			_, listed, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if gen != 1 || listed != 1 {
				t.Fatalf("a new store's assignments generation is %d (listed %d), want 1", gen, listed)
			}
		}},
		{"SwapComputeStatusRefusesAChangedStatus", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
			c := compute("web", 0)
			_, err := s.SyncComputes(ctx(t), []*unyov1.Compute{c}, t0)
			must(t, err)
			must2(t)(reserve(t, s, c, "n1", schedule.Policy{}))
			read := getCompute(t, s, "web-0").GetStatus()
			// Another writer (an agent's report) changes it after the read.
			active := proto.CloneOf(read)
			active.Phase = "Active"
			must(t, s.SetComputeStatus(ctx(t), "web-0", active))
			stale := proto.CloneOf(read)
			stale.Reason, stale.Message = "NodeDown", "decided on the old status"
			if err := s.SwapComputeStatus(ctx(t), "web-0", read, stale); !errors.Is(err, store.ErrStatusChanged) {
				t.Fatalf("swap over a changed status: %v, want ErrStatusChanged", err)
			}
			if st := getCompute(t, s, "web-0").GetStatus(); st.GetPhase() != "Active" || st.GetReason() != "" {
				t.Fatalf("status after a refused swap: %v", st)
			}
			next := proto.CloneOf(active)
			next.Reason = "NodeDown"
			must(t, s.SwapComputeStatus(ctx(t), "web-0", active, next))
			if st := getCompute(t, s, "web-0").GetStatus(); st.GetReason() != "NodeDown" {
				t.Errorf("status after a swap: %v", st)
			}
			if err := s.SwapComputeStatus(ctx(t), "nope", nil, next); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("swap of an unknown compute: %v", err)
			}
		}},
	}
}

// ledgerReserveAndRelease reserves a priced compute through a and releases
// it (twice) through b: the ledger holds one row, open at the reservation's
// time with the price of the node's machine model, closed once.
func ledgerReserveAndRelease(t *testing.T, a, b store.Store) {
	t.Helper()
	n := schedNode("n1", "r1", 4)
	n.TopologyLabels = map[string]string{topology.LabelModel: "m2"}
	must(t, a.UpsertNode(ctx(t), n))
	c := compute("web", 0)
	c.Spec.Flavor = "small"
	c.Price = &unyov1.ComputePrice{PerHour: 1.5, ModelPrices: map[string]float64{"m2": 2.25}}
	_, err := a.SyncComputes(ctx(t), []*unyov1.Compute{c}, t0)
	must(t, err)
	must2(t)(reserve(t, a, c, "n1", schedule.Policy{}))
	all := func(s store.Store) []billing.Entry {
		t.Helper()
		es, err := s.Ledger(ctx(t), t0.Add(-time.Hour), t0.Add(1000*time.Hour))
		must(t, err)
		return es
	}
	es := all(b)
	want := billing.Entry{Compute: "web-0", Service: "web", Flavor: "small", Node: "n1", Cluster: "c1", PricePerHour: 2.25, Start: t0}
	if len(es) != 1 || !es[0].Start.Equal(t0) || !es[0].Open() {
		t.Fatalf("ledger after the reservation: %+v, want one open row %+v", es, want)
	}
	es[0].Start = t0
	if es[0] != want {
		t.Errorf("ledger row = %+v, want %+v", es[0], want)
	}
	// The release is stamped with the store's clock (the cluster's).
	released := t0.Add(90 * time.Minute)
	if sc, ok := b.(interface{ SetClock(func() time.Time) }); ok {
		sc.SetClock(func() time.Time { return released })
	}
	must(t, b.DropCompute(ctx(t), "web-0"))
	es = all(a)
	if len(es) != 1 || es[0].Open() || es[0].End.Before(es[0].Start) {
		t.Fatalf("ledger after the release: %+v, want one closed row", es)
	}
	if _, ok := b.(interface{ SetClock(func() time.Time) }); ok && !es[0].End.Equal(released) {
		t.Errorf("the row closed at %v, want the store's clock %v", es[0].End, released)
	}
	end := es[0].End
	// Released again (nothing is held): the row stays closed when it was.
	must(t, b.DropCompute(ctx(t), "web-0"))
	if es = all(a); len(es) != 1 || !es[0].End.Equal(end) {
		t.Errorf("ledger after a second release: %+v, want the row closed at %v", es, end)
	}
	// A period the row does not reach has nothing.
	if es, err := a.Ledger(ctx(t), end.Add(time.Hour), end.Add(2*time.Hour)); err != nil || len(es) != 0 {
		t.Errorf("ledger after the release's time: %+v, %v", es, err)
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

// replacementTest: a compute's next instance holds its own reservation
// beside the current one's (both count: no overcommit), its node's agent
// alone sees it, and every way a replacement ends (promoted, cancelled,
// forced without one, deleted with one in flight) releases exactly the
// reservations of the instances that went.
func replacementTest(t *testing.T, s store.Store) {
	for _, n := range []*unyov1.Node{schedNode("n1", "r1", 2), schedNode("n2", "r2", 1), schedNode("n3", "r3", 1)} {
		must(t, s.UpsertNode(ctx(t), n))
	}
	web := []*unyov1.Compute{compute("web", 0), compute("web", 1)}
	_, err := s.SyncComputes(ctx(t), web, t0)
	must(t, err)
	must2(t)(reserve(t, s, web[0], "n1", schedule.Policy{}))
	next := func(c *unyov1.Compute, node string) error {
		_, err := s.ReserveNext(ctx(t), store.Reservation{Compute: c.GetName(), Service: c.GetService(), Node: node,
			Resources: oneCPU, Generation: getNode(t, s, node).GetGeneration(), ReservedAt: t0},
			&unyov1.Assignment{Compute: c.GetName(), Service: c.GetService(), Provider: "exec", Desired: "running"}, 7, "Drain")
		return err
	}
	reserved := func(want map[string]int32) {
		t.Helper()
		for node, cpus := range want {
			if got := getNode(t, s, node).GetReserved().GetCpus(); got != cpus {
				t.Errorf("%s has %d vCPUs reserved, want %d", node, got, cpus)
			}
		}
	}
	assigned := func(node string) string {
		t.Helper()
		as, _, err := s.ListAssignments(ctx(t), node)
		must(t, err)
		var out []string
		for _, a := range as {
			out = append(out, a.GetCompute()+"/"+a.GetDesired())
		}
		return fmt.Sprint(out)
	}
	if err := next(web[1], "n2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a next instance of an unplaced compute: %v, want ErrNotFound", err)
	}
	if err := next(web[0], "n1"); !errors.Is(err, store.ErrExists) {
		t.Errorf("a next instance on the current node: %v, want ErrExists", err)
	}
	must(t, next(web[0], "n2"))
	if err := next(web[0], "n3"); !errors.Is(err, store.ErrExists) {
		t.Errorf("a second next instance: %v, want ErrExists", err)
	}
	reserved(map[string]int32{"n1": 1, "n2": 1, "n3": 0})
	if a1, a2 := assigned("n1"), assigned("n2"); a1 != "[web-0/running]" || a2 != "[web-0/running]" {
		t.Errorf("assignments: n1 %s, n2 %s", a1, a2)
	}
	c, err := s.GetCompute(ctx(t), "web-0")
	must(t, err)
	if st := c.GetStatus(); st.GetNode() != "n1" || st.GetReplacingNode() != "n2" || st.GetReplacementPhase() != "Creating:Scheduled" || st.GetReplacementReason() != "Drain" {
		t.Errorf("status with a next instance: %v", st)
	}
	// n2 is full with the next instance: nothing else goes there.
	_, err = reserve(t, s, web[1], "n2", schedule.Policy{})
	var reason *schedule.Reason
	if !errors.As(err, &reason) || reason.Class != schedule.NoCapacity {
		t.Errorf("placing beside a next instance past capacity: %v, want NoCapacity", err)
	}
	// Promotion: the next is Active, the current retired, then gone.
	must(t, s.SetReplacement(ctx(t), "web-0", store.ReplacementUpdate{Phase: "Active", RetireCurrent: true}))
	if a1 := assigned("n1"); a1 != "[web-0/deleted]" {
		t.Errorf("n1 after the retirement: %s", a1)
	}
	// Decided for another instance: stale, nothing happens.
	must(t, s.CurrentGone(ctx(t), "web-0", "n3", t0))
	must(t, s.SetReplacement(ctx(t), "web-0", store.ReplacementUpdate{Phase: "Evicting", RetireCurrent: true, Current: "n3"}))
	reserved(map[string]int32{"n1": 1, "n2": 1})
	must(t, s.CurrentGone(ctx(t), "web-0", "n1", t0))
	reserved(map[string]int32{"n1": 0, "n2": 1})
	c, err = s.GetCompute(ctx(t), "web-0")
	must(t, err)
	if st := c.GetStatus(); st.GetNode() != "n2" || st.GetPhase() != "Active" || st.GetReplacingNode() != "" || st.GetReplacementPhase() != "" || st.GetSpecRevision() != 7 {
		t.Errorf("status after the promotion: %v", st)
	}
	if a1, a2 := assigned("n1"), assigned("n2"); a1 != "[]" || a2 != "[web-0/running]" {
		t.Errorf("assignments after the promotion: n1 %s, n2 %s", a1, a2)
	}
	// Cancelled: the next instance goes, the current stays.
	must(t, next(web[0], "n3"))
	must(t, s.SetReplacement(ctx(t), "web-0", store.ReplacementUpdate{Phase: "Cancelling", CancelNext: true}))
	if a3 := assigned("n3"); a3 != "[web-0/deleted]" {
		t.Errorf("n3 after the cancel: %s", a3)
	}
	must(t, s.NextGone(ctx(t), "web-0"))
	reserved(map[string]int32{"n2": 1, "n3": 0})
	// Forced without a replacement: the compute waits to be placed again.
	must(t, s.SetReplacement(ctx(t), "web-0", store.ReplacementUpdate{Phase: "Evicting", Reason: "Drain", RetireCurrent: true}))
	must(t, s.CurrentGone(ctx(t), "web-0", "", t0))
	reserved(map[string]int32{"n1": 0, "n2": 0, "n3": 0})
	c, err = s.GetCompute(ctx(t), "web-0")
	must(t, err)
	if st := c.GetStatus(); st.GetPhase() != "Initializing" || st.GetNode() != "" || st.GetReplacementPhase() != "" {
		t.Errorf("status after a forced removal: %v", st)
	}
	// Deleted with a next instance in flight: both assignments turn to
	// deleted, and the drop releases both reservations.
	must2(t)(reserve(t, s, web[0], "n1", schedule.Policy{}))
	must(t, next(web[0], "n3"))
	_, err = s.SyncComputes(ctx(t), nil, t0)
	must(t, err)
	if a1, a3 := assigned("n1"), assigned("n3"); a1 != "[web-0/deleted]" || a3 != "[web-0/deleted]" {
		t.Errorf("assignments of a deleted compute: n1 %s, n3 %s", a1, a3)
	}
	must(t, s.DropCompute(ctx(t), "web-0"))
	must(t, s.DropCompute(ctx(t), "web-1"))
	reserved(map[string]int32{"n1": 0, "n2": 0, "n3": 0})
	if rs, err := s.ListReservations(ctx(t)); err != nil || len(rs) != 0 {
		t.Errorf("reservations left: %v, %v", rs, err)
	}
}

func getCompute(t *testing.T, s store.Store, name string) *unyov1.Compute {
	t.Helper()
	c, err := s.GetCompute(ctx(t), name)
	must(t, err)
	return c
}
