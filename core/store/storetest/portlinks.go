package storetest

import (
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// links returns compute -> link address of node's assignments.
func links(t *testing.T, s store.Store, node string) map[string]string {
	t.Helper()
	as, _, err := s.ListAssignments(ctx(t), node)
	must(t, err)
	out := map[string]string{}
	for _, a := range as {
		out[a.GetCompute()] = a.GetLinkAddress()
	}
	return out
}

func portLinkTests() []contractTest {
	return []contractTest{
		{"EachReservationHoldsItsNodesLinkAddressUntilReleased", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), schedNode("n1", "r1", 8)))
			must(t, s.UpsertNode(ctx(t), schedNode("n2", "r1", 8)))
			var cs []*unyov1.Compute
			for i := range 4 {
				cs = append(cs, compute("web", i))
			}
			_, err := s.SyncComputes(ctx(t), cs, t0)
			must(t, err)
			must2(t)(reserve(t, s, cs[0], "n1", schedule.Policy{}))
			must2(t)(reserve(t, s, cs[1], "n1", schedule.Policy{}))
			must2(t)(reserve(t, s, cs[2], "n2", schedule.Policy{}))
			got := links(t, s, "n1")
			if got["web-0"] != "169.254.32.0" || got["web-1"] != "169.254.32.1" {
				t.Fatalf("n1's link addresses %v, want web-0 169.254.32.0 and web-1 169.254.32.1", got)
			}
			// Another node's range is its own.
			if got := links(t, s, "n2"); got["web-2"] != "169.254.32.0" {
				t.Fatalf("n2's link addresses %v, want web-2 169.254.32.0", got)
			}
			// The address stays while the instance is being removed.
			_, err = s.SyncComputes(ctx(t), cs[1:], t0)
			must(t, err)
			if got := links(t, s, "n1"); got["web-0"] != "169.254.32.0" {
				t.Fatalf("while web-0 is removed n1's link addresses are %v", got)
			}
			// Released with the reservation, and given again (the lowest
			// free first); the others keep theirs.
			must(t, s.DropCompute(ctx(t), "web-0"))
			must2(t)(reserve(t, s, cs[3], "n1", schedule.Policy{}))
			got = links(t, s, "n1")
			if len(got) != 2 || got["web-3"] != "169.254.32.0" || got["web-1"] != "169.254.32.1" {
				t.Fatalf("after web-0 went n1's link addresses are %v, want web-3 169.254.32.0 and web-1 169.254.32.1", got)
			}
		}},
	}
}
