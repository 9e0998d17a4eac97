package inventory

import (
	"fmt"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestRefresh(t *testing.T) {
	res := func(name, rack string, unit int32, ends string) *unyov1.PhysicalResource {
		return &unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Rack: rack, Unit: unit, ContractEnds: ends}}
	}
	all := []*unyov1.PhysicalResource{
		res("b2", "rb", 5, "2027-01-01"), res("b1", "rb", 1, "2026-12-31"),
		res("a1", "ra", 1, "2027-05-31"), res("a2", "ra", 3, "2027-06-01"), res("a3", "ra", 5, ""),
		res("c1", "rc", 1, "2030-01-01"),
		res("spare", "", 0, "2020-01-01"),
	}
	before, _ := time.Parse(DateLayout, "2027-06-01")
	got := Refresh(all, before)
	var s []string
	for _, r := range got {
		var names []string
		for _, p := range r.Expiring {
			names = append(names, p.GetName())
		}
		s = append(s, fmt.Sprintf("%q %v %d/%d whole=%v first=%s", r.Rack, names, len(r.Expiring), r.Resources, r.Whole(), r.FirstEnds))
	}
	want := []string{
		`"" [spare] 1/1 whole=true first=2020-01-01`,
		`"ra" [a1] 1/3 whole=false first=2027-05-31`,
		`"rb" [b1 b2] 2/2 whole=true first=2026-12-31`,
	}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("Refresh =\n%v\nwant\n%v", s, want)
	}
}
