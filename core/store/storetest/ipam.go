package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// network is a Network object: a /29 (10.0.0.2 to .6 allocatable, .1 the
// gateway) unless cidr says otherwise.
func network(name, cidr string) *unyov1.Object {
	if cidr == "" {
		cidr = "10.0.0.0/29"
	}
	return &unyov1.Object{Kind: &unyov1.Object_Network{Network: &unyov1.Network{Name: name,
		Spec: &unyov1.NetworkSpec{Cidr: cidr, Gateway: cidr[:strings.LastIndex(cidr, ".")] + ".1", Scope: "cluster", Cluster: "c1"}}}}
}

func allocate(t *testing.T, s store.Store, net, holder string, at time.Time) *unyov1.AddressAllocation {
	t.Helper()
	a, err := s.AllocateAddress(ctx(t), net, holder, at)
	if err != nil {
		t.Fatalf("allocate from %s for %s: %v", net, holder, err)
	}
	return a
}

func wantFull(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("got %v, want an error wrapping store.ErrFull", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func addressTests() []contractTest {
	return []contractTest{
		{"AllocatesEachAddressOnceThenIsFull", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "")})
			must(t, err)
			var got []string
			for i := range 5 {
				a := allocate(t, s, "net-a", fmt.Sprintf("h%d", i), t0)
				if a.GetNetwork() != "net-a" || a.GetHolder() != fmt.Sprintf("h%d", i) || !a.GetAllocatedAt().AsTime().Equal(t0) || a.GetReleasedAt() != nil {
					t.Errorf("allocation %v", a)
				}
				got = append(got, a.GetAddress())
			}
			if want := []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}; !slices.Equal(got, want) {
				t.Errorf("allocated %v, want %v (not the network, gateway or broadcast address)", got, want)
			}
			_, err = s.AllocateAddress(ctx(t), "net-a", "h5", t0)
			wantFull(t, err, "network net-a is full (5 addresses, all allocated)")
		}},
		{"AllocatingAgainForAHolderReturnsItsAddress", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "")})
			must(t, err)
			first := allocate(t, s, "net-a", "compute/web-0/eth0", t0)
			again := allocate(t, s, "net-a", "compute/web-0/eth0", t0.Add(time.Minute))
			wantEqual(t, "allocation retried", again, first)
			if other := allocate(t, s, "net-a", "compute/web-1/eth0", t0); other.GetAddress() == first.GetAddress() {
				t.Errorf("two holders got %s", first.GetAddress())
			}
		}},
		{"ReleasedAddressesComeBackAfterQuarantine", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "")})
			must(t, err)
			for i := range 5 {
				allocate(t, s, "net-a", fmt.Sprintf("h%d", i), t0)
			}
			rel, err := s.ReleaseAddress(ctx(t), store.AddressRelease{Network: "net-a", Address: "10.0.0.3", At: t0.Add(time.Minute), Quarantine: time.Hour})
			must(t, err)
			if rel.GetHolder() != "h1" || !rel.GetReleasedAt().AsTime().Equal(t0.Add(time.Minute)) || !rel.GetReusableAt().AsTime().Equal(t0.Add(61*time.Minute)) {
				t.Errorf("released %v", rel)
			}
			rel, err = s.ReleaseAddress(ctx(t), store.AddressRelease{Network: "net-a", Holder: "h3", At: t0.Add(time.Minute), Quarantine: 2 * time.Hour})
			must(t, err)
			if rel.GetAddress() != "10.0.0.5" {
				t.Errorf("released by holder %v", rel)
			}
			_, err = s.ReleaseAddress(ctx(t), store.AddressRelease{Network: "net-a", Address: "10.0.0.3", At: t0.Add(time.Minute)})
			wantNotFound(t, err, "10.0.0.3")

			allocs, err := s.ListAllocations(ctx(t), "net-a", t0.Add(2*time.Minute))
			must(t, err)
			if len(allocs) != 5 || allocs[1].GetAddress() != "10.0.0.3" || allocs[1].GetReleasedAt() == nil || allocs[0].GetReleasedAt() != nil {
				t.Errorf("allocations during quarantine: %v", allocs)
			}
			_, err = s.AllocateAddress(ctx(t), "net-a", "new", t0.Add(59*time.Minute))
			wantFull(t, err, "network net-a is full (5 addresses: 3 allocated, 2 in quarantine after release, the first free again at 2026-03-01T10:01:00Z)")
			a := allocate(t, s, "net-a", "new", t0.Add(61*time.Minute))
			if a.GetAddress() != "10.0.0.3" {
				t.Errorf("after the quarantine: %s, want 10.0.0.3", a.GetAddress())
			}
			allocs, err = s.ListAllocations(ctx(t), "", t0.Add(3*time.Hour))
			must(t, err)
			if len(allocs) != 4 {
				t.Errorf("after every quarantine, %d allocations listed, want the 4 held: %v", len(allocs), allocs)
			}
		}},
		{"UnknownNetwork", func(t *testing.T, s store.Store) {
			_, err := s.AllocateAddress(ctx(t), "nope", "h", t0)
			wantNotFound(t, err, `"nope"`)
			_, err = s.ReleaseAddress(ctx(t), store.AddressRelease{Network: "nope", Holder: "h", At: t0})
			wantNotFound(t, err, `"nope"`)
		}},
		{"NodeLocalNetworks", func(t *testing.T, s store.Store) {
			a := allocate(t, s, "node-local/n1", "port-1", t0)
			b := allocate(t, s, "node-local/n2", "port-1", t0)
			c := allocate(t, s, "node-local/n1", "port-2", t0)
			if a.GetAddress() != "169.254.32.0" || b.GetAddress() != "169.254.32.0" || c.GetAddress() != "169.254.32.1" {
				t.Errorf("node-local allocations %s, %s, %s; want 169.254.32.0 on each node, then .1", a.GetAddress(), b.GetAddress(), c.GetAddress())
			}
		}},
		{"NetworkWithAllocationsIsNotDeleted", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "")})
			must(t, err)
			allocate(t, s, "net-a", "compute/web-0/eth0", t0)
			err = s.DeleteObject(ctx(t), "Network", "net-a")
			if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "compute/web-0/eth0 (10.0.0.2)") {
				t.Fatalf("deleting a network with an allocation: %v; want ErrInUse naming the holder", err)
			}
			if _, err := s.GetObject(ctx(t), "Network", "net-a"); err != nil {
				t.Fatalf("the refused delete removed the network: %v", err)
			}
			_, err = s.ReleaseAddress(ctx(t), store.AddressRelease{Network: "net-a", Holder: "compute/web-0/eth0", At: t0, Quarantine: time.Hour})
			must(t, err)
			must(t, s.DeleteObject(ctx(t), "Network", "net-a"))
			if allocs, err := s.ListAllocations(ctx(t), "", t0); err != nil || len(allocs) != 0 {
				t.Errorf("a deleted network's addresses: %v, %v", allocs, err)
			}
		}},
		{"NetworkChangeKeepsHeldAddressesInside", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "10.0.0.0/24")})
			must(t, err)
			allocate(t, s, "net-a", "h0", t0) // 10.0.0.2
			moved := network("net-a", "10.0.1.0/24")
			_, err = s.PutObjects(ctx(t), []*unyov1.Object{network("other", "10.9.0.0/24"), moved})
			if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "10.0.0.2 (h0)") {
				t.Fatalf("moving a network from under its allocations: %v; want ErrInUse naming the address and holder", err)
			}
			if _, err := s.GetObject(ctx(t), "Network", "other"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a refused apply stored part of its batch: %v", err)
			}
			grown := network("net-a", "10.0.0.0/23")
			grown.GetNetwork().GetSpec().Gateway = "10.0.0.1"
			_, err = s.PutObjects(ctx(t), []*unyov1.Object{grown})
			must(t, err)
		}},
		{"ConcurrentAllocationsAreDistinct", func(t *testing.T, s store.Store) {
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{network("net-a", "10.0.0.0/24")})
			must(t, err)
			seen := raceAllocations(t, []store.Store{s}, "net-a", 8, 20)
			if len(seen) != 160 {
				t.Errorf("%d distinct addresses, want 160", len(seen))
			}
		}},
	}
}

// raceAllocations has workers goroutines per store allocate each times
// from network, for distinct holders, and returns who got each address;
// it fails the test if an address was handed out twice.
func raceAllocations(t *testing.T, stores []store.Store, network string, workers, each int) map[string]string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]string{}
	var fulls []error
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					holder := fmt.Sprintf("s%d-w%d-%d", si, w, i)
					a, err := s.AllocateAddress(ctx(t), network, holder, t0)
					mu.Lock()
					switch {
					case errors.Is(err, store.ErrFull):
						fulls = append(fulls, err)
					case err != nil:
						t.Errorf("%s: %v", holder, err)
					case seen[a.GetAddress()] != "":
						t.Errorf("%s handed out twice: to %s and %s", a.GetAddress(), seen[a.GetAddress()], holder)
					default:
						seen[a.GetAddress()] = holder
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return seen
}

// RunReplicas checks address allocation from two store handles on one
// database, as two root replicas allocate: open returns both handles on a
// new, empty database.
func RunReplicas(t *testing.T, open func(t *testing.T) (store.Store, store.Store)) {
	t.Run("RacingPlacements", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		racePlacements(t, []store.Store{a, b}, 5)
	})
	t.Run("RacingRecreates", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		raceRecreates(t, a, b)
	})
	t.Run("LedgerSurvivesARestart", func(t *testing.T) {
		t.Parallel()
		// b is the database as a restarted process finds it.
		a, b := open(t)
		ledgerReserveAndRelease(t, a, b)
	})
	t.Run("RacingForTheLastAddresses", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		_, err := a.PutObjects(ctx(t), []*unyov1.Object{network("small", "")})
		must(t, err)
		allocate(t, a, "small", "early-1", t0)
		allocate(t, b, "small", "early-2", t0)
		// 3 addresses left, 16 callers on two replicas.
		seen := raceAllocations(t, []store.Store{a, b}, "small", 8, 1)
		if len(seen) != 3 {
			t.Errorf("the race handed out %d addresses, want the 3 left: %v", len(seen), seen)
		}
		_, err = b.AllocateAddress(ctx(t), "small", "late", t0)
		wantFull(t, err, "network small is full (5 addresses, all allocated)")
		all, err := b.ListAllocations(ctx(t), "small", t0)
		must(t, err)
		if len(all) != 5 {
			t.Errorf("%d allocations stored, want 5", len(all))
		}
	})
	t.Run("ManyAllocationsOnTwoReplicas", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		_, err := a.PutObjects(ctx(t), []*unyov1.Object{network("big", "10.0.0.0/22")})
		must(t, err)
		seen := raceAllocations(t, []store.Store{a, b}, "big", 6, 25)
		if len(seen) != 300 {
			t.Errorf("%d distinct addresses, want 300", len(seen))
		}
	})
}
