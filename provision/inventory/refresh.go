package inventory

import (
	"cmp"
	"slices"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// RackRefresh is one rack's share of a hardware refresh: the seeds replace
// whole racks before their 5-year maintenance contracts end, so what
// expires is shown against everything the rack holds.
type RackRefresh struct {
	Rack string // "" for resources in no rack
	// Resources is how many resources the rack holds; Expiring those whose
	// contract ends before the date, by unit then name.
	Resources int
	Expiring  []*unyov1.PhysicalResource
	// FirstEnds is the earliest end among Expiring.
	FirstEnds string
}

// Whole says whether every resource of the rack expires.
func (r RackRefresh) Whole() bool { return len(r.Expiring) == r.Resources }

// Refresh groups the resources whose maintenance contract ends before
// the day before by rack, racks by name; racks with nothing expiring are
// left out, and so are resources with no contract end. Dates that do not
// parse (validation refuses them) count as not expiring.
func Refresh(resources []*unyov1.PhysicalResource, before time.Time) []RackRefresh {
	byRack := map[string]*RackRefresh{}
	for _, p := range resources {
		rack := p.GetSpec().GetRack()
		r, ok := byRack[rack]
		if !ok {
			r = &RackRefresh{Rack: rack}
			byRack[rack] = r
		}
		r.Resources++
		ends, err := time.Parse(DateLayout, p.GetSpec().GetContractEnds())
		if err != nil || !ends.Before(before) {
			continue
		}
		r.Expiring = append(r.Expiring, p)
		if r.FirstEnds == "" || p.GetSpec().GetContractEnds() < r.FirstEnds {
			r.FirstEnds = p.GetSpec().GetContractEnds()
		}
	}
	var out []RackRefresh
	for _, r := range byRack {
		if len(r.Expiring) == 0 {
			continue
		}
		slices.SortFunc(r.Expiring, func(a, b *unyov1.PhysicalResource) int {
			return cmp.Or(cmp.Compare(a.GetSpec().GetUnit(), b.GetSpec().GetUnit()), cmp.Compare(a.GetName(), b.GetName()))
		})
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b RackRefresh) int { return cmp.Compare(a.Rack, b.Rack) })
	return out
}
