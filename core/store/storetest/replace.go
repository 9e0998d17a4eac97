package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// revised is compute service-i at spec revision rev, with rev in its env
// (the template changed).
func revised(service string, i int, rev int64) *unyov1.Compute {
	c := compute(service, i)
	c.SpecRevision = rev
	c.Spec.Env = map[string]string{"REV": string(rune('0' + rev))}
	return c
}

// reservedCPUs is what a node has reserved and how many reservations the
// store holds for compute.
func reservedCPUs(t *testing.T, s store.Store, node, compute string) (int32, int) {
	t.Helper()
	rs, err := s.ListReservations(ctx(t))
	must(t, err)
	n := 0
	for _, r := range rs {
		if r.Compute == compute {
			n++
		}
	}
	return getNode(t, s, node).GetReserved().GetCpus(), n
}

func replaceTests() []contractTest {
	return []contractTest{
		{"InPlaceReplacementNeitherLeaksNorDoubles", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
			_, err := s.SyncComputes(ctx(t), []*unyov1.Compute{revised("web", 0, 1)}, t0)
			must(t, err)
			must2(t)(reserve(t, s, revised("web", 0, 1), "n1", schedule.Policy{}))
			// The same revision again changes nothing.
			_, err = s.SyncComputes(ctx(t), []*unyov1.Compute{revised("web", 0, 1)}, t0)
			must(t, err)
			as, gen, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || as[0].GetDesired() != "running" {
				t.Fatalf("assignments before the update: %v", as)
			}
			// Revision 2: the old instance goes first, the reservation stays.
			got, err := s.SyncComputes(ctx(t), []*unyov1.Compute{revised("web", 0, 2)}, t0)
			must(t, err)
			if st := got[0].GetStatus(); st.GetPhase() != "Updating" || st.GetRetry().GetNode() != "n1" {
				t.Fatalf("status after a new revision: %v", st)
			}
			as, gen2, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 1 || as[0].GetDesired() != "deleted" || gen2 <= gen || as[0].GetGeneration() != gen2 {
				t.Fatalf("assignments during the update: %v", as)
			}
			if cpus, n := reservedCPUs(t, s, "n1", "web-0"); cpus != 1 || n != 1 {
				t.Fatalf("during the update n1 has %d vCPUs reserved and web-0 %d reservations, want 1 and 1", cpus, n)
			}
			// A third revision while the old instance is going: no second
			// removal, the newest spec is kept for the new instance.
			_, err = s.SyncComputes(ctx(t), []*unyov1.Compute{revised("web", 0, 3)}, t0)
			must(t, err)
			if c, err := s.GetCompute(ctx(t), "web-0"); err != nil || c.GetSpecRevision() != 3 || c.GetStatus().GetPhase() != "Updating" {
				t.Fatalf("after revision 3 mid-update: %v, %v", c, err)
			}
			// Only a removed instance is released, and only from its node.
			if ok, err := s.ReleaseCompute(ctx(t), "web-0", "n2", true, &unyov1.ComputeStatus{Phase: "Initializing"}); err != nil || ok {
				t.Fatalf("release from another node: %v, %v", ok, err)
			}
			ok, err := s.ReleaseCompute(ctx(t), "web-0", "n1", true, &unyov1.ComputeStatus{Phase: "Initializing", Retry: &unyov1.ComputeRetry{Node: "n1"}})
			if err != nil || !ok {
				t.Fatalf("release after the agent removed it: %v, %v", ok, err)
			}
			if ok, err := s.ReleaseCompute(ctx(t), "web-0", "n1", true, &unyov1.ComputeStatus{Phase: "Initializing"}); err != nil || ok {
				t.Fatalf("released twice: %v, %v", ok, err)
			}
			if cpus, n := reservedCPUs(t, s, "n1", "web-0"); cpus != 0 || n != 0 {
				t.Fatalf("after the release n1 has %d vCPUs reserved and web-0 %d reservations, want none", cpus, n)
			}
			if as, _, err := s.ListAssignments(ctx(t), "n1"); err != nil || len(as) != 0 {
				t.Fatalf("assignments after the release: %v, %v", as, err)
			}
			// Placed again: one reservation, the new spec in the assignment.
			must2(t)(reserve(t, s, revised("web", 0, 3), "n1", schedule.Policy{}))
			if cpus, n := reservedCPUs(t, s, "n1", "web-0"); cpus != 1 || n != 1 {
				t.Fatalf("after placing anew n1 has %d vCPUs reserved and web-0 %d reservations, want 1 and 1", cpus, n)
			}
		}},
		{"RecreateAndReleaseFromADownNode", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
			_, err := s.SyncComputes(ctx(t), []*unyov1.Compute{compute("db", 0), compute("db", 1)}, t0)
			must(t, err)
			if err := s.RecreateCompute(ctx(t), "db-0", nil, &unyov1.ComputeStatus{Phase: "Updating"}); err == nil {
				t.Fatal("re-created a compute that was never placed")
			}
			must2(t)(reserve(t, s, compute("db", 0), "n1", schedule.Policy{}))
			must2(t)(reserve(t, s, compute("db", 1), "n1", schedule.Policy{}))
			placed, err := s.GetCompute(ctx(t), "db-0")
			must(t, err)
			if err := s.RecreateCompute(ctx(t), "db-0", &unyov1.ComputeStatus{Phase: "Failed"}, &unyov1.ComputeStatus{Phase: "Updating", Node: "n1"}); !errors.Is(err, store.ErrStatusChanged) {
				t.Fatalf("re-create decided on a status that is not the stored one: %v, want ErrStatusChanged", err)
			}
			must(t, s.RecreateCompute(ctx(t), "db-0", placed.GetStatus(), &unyov1.ComputeStatus{Phase: "Updating", Node: "n1"}))
			as, _, err := s.ListAssignments(ctx(t), "n1")
			must(t, err)
			if len(as) != 2 || as[0].GetDesired() != "deleted" || as[1].GetDesired() != "running" {
				t.Fatalf("assignments after re-create: %v", as)
			}
			// The node is Down: db-1 is released though its instance was
			// never removed (removedOnly false).
			if ok, err := s.ReleaseCompute(ctx(t), "db-1", "n1", true, &unyov1.ComputeStatus{Phase: "Initializing"}); err != nil || ok {
				t.Fatalf("released a running instance with removedOnly: %v, %v", ok, err)
			}
			ok, err := s.ReleaseCompute(ctx(t), "db-1", "n1", false, &unyov1.ComputeStatus{Phase: "Initializing", Reason: "NodeDown"})
			if err != nil || !ok {
				t.Fatalf("release from a Down node: %v, %v", ok, err)
			}
			c, err := s.GetCompute(ctx(t), "db-1")
			must(t, err)
			if c.GetStatus().GetReason() != "NodeDown" {
				t.Errorf("db-1 after release: %v", c.GetStatus())
			}
			// Root stops wanting db-0 while it is being re-created: its
			// release removes it.
			_, err = s.SyncComputes(ctx(t), []*unyov1.Compute{compute("db", 1)}, t0)
			must(t, err)
			ok, err = s.ReleaseCompute(ctx(t), "db-0", "n1", true, &unyov1.ComputeStatus{Phase: "Initializing"})
			if err != nil || !ok {
				t.Fatalf("release of a deleted compute: %v, %v", ok, err)
			}
			if _, err := s.GetCompute(ctx(t), "db-0"); err == nil {
				t.Error("db-0 is still held after root dropped it and its instance went")
			}
			if cpus, _ := reservedCPUs(t, s, "n1", ""); cpus != 0 {
				t.Errorf("n1 still has %d vCPUs reserved", cpus)
			}
		}},
	}
}

// raceRecreates has two controllers (one store handle each on one
// database) decide a re-create of the same failed compute from the status
// they both read, while an agent's report moves it on: every round exactly
// one re-create lands, or none when the report came first, and none
// lands on a status it did not decide on.
func raceRecreates(t *testing.T, a, b store.Store) {
	must(t, a.UpsertNode(ctx(t), schedNode("n1", "r1", 4)))
	_, err := a.SyncComputes(ctx(t), []*unyov1.Compute{compute("db", 0)}, t0)
	must(t, err)
	must2(t)(reserve(t, a, compute("db", 0), "n1", schedule.Policy{}))
	for round := range 20 {
		failed := &unyov1.ComputeStatus{Phase: "Failed", Node: "n1", Message: fmt.Sprintf("round %d", round)}
		must(t, a.SetComputeStatus(ctx(t), "db-0", failed))
		read, err := b.GetCompute(ctx(t), "db-0")
		must(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, s := range []store.Store{a, b} {
			wg.Go(func() {
				errs[i] = s.RecreateCompute(ctx(t), "db-0", read.GetStatus(), &unyov1.ComputeStatus{Phase: "Updating", Node: "n1", Message: fmt.Sprintf("writer %d", i)})
			})
		}
		if round%2 == 1 {
			// An agent reports the instance running meanwhile.
			wg.Go(func() {
				errs[2] = a.SetComputeStatus(ctx(t), "db-0", &unyov1.ComputeStatus{Phase: "Active", Node: "n1"})
			})
		}
		wg.Wait()
		must(t, errs[2])
		landed := 0
		for _, err := range errs[:2] {
			switch {
			case err == nil:
				landed++
			case !errors.Is(err, store.ErrStatusChanged):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got, err := a.GetCompute(ctx(t), "db-0")
		must(t, err)
		switch phase := got.GetStatus().GetPhase(); {
		case landed > 1:
			t.Fatalf("round %d: %d re-creates landed on one read status", round, landed)
		case landed == 0 && round%2 == 0:
			t.Fatalf("round %d: no re-create landed without a competing report", round)
		case phase == "Updating" && landed != 1, phase == "Failed":
			t.Fatalf("round %d: status %v with %d re-creates landed", round, got.GetStatus(), landed)
		}
		// Back to a running instance for the next round.
		as, _, err := a.ListAssignments(ctx(t), "n1")
		must(t, err)
		if len(as) != 1 || (landed == 1) != (as[0].GetDesired() == "deleted") {
			t.Fatalf("round %d: assignments %v after %d re-creates", round, as, landed)
		}
		if landed == 1 {
			ok, err := a.ReleaseCompute(ctx(t), "db-0", "n1", true, &unyov1.ComputeStatus{Phase: "Initializing"})
			if err != nil || !ok {
				t.Fatalf("round %d: release: %v, %v", round, ok, err)
			}
			must2(t)(reserve(t, a, compute("db", 0), "n1", schedule.Policy{}))
		}
	}
}
