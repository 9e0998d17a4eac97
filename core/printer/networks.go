package printer

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// NetworkDetails prints networks one by one with their address usage and
// who holds each address; JSON and YAML as Objects (usage included).
func NetworkDetails(w io.Writer, format string, objs []*unyov1.Object) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	if p.format != Table {
		return Objects(w, format, objs)
	}
	return p.networkDetails(objs)
}

func (p *printer) networkDetails(objs []*unyov1.Object) error {
	w := p.w
	for i, o := range objs {
		n := o.GetNetwork()
		if n == nil {
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		s, u := n.GetSpec(), n.GetUsage()
		ranges := "the whole CIDR"
		if len(s.GetRanges()) > 0 {
			rs := make([]string, len(s.GetRanges()))
			for j, r := range s.GetRanges() {
				rs[j] = r.GetFirst() + "-" + r.GetLast()
			}
			ranges = strings.Join(rs, ", ")
		}
		scope := s.GetScope()
		switch {
		case s.GetRegion() != "":
			scope += " " + s.GetRegion()
		case s.GetCluster() != "":
			scope += " " + s.GetCluster()
		}
		kv := [][2]string{
			{"Name", n.GetName()}, {"CIDR", s.GetCidr()}, {"Gateway", orDash(s.GetGateway())}, {"Scope", scope},
			{"Ranges", ranges}, {"Reserved", orDash(strings.Join(s.GetReserved(), ", "))},
			{"Addresses", fmt.Sprintf("%d: %d used, %d free, %d in quarantine", u.GetSize(), u.GetUsed(), u.GetFree(), u.GetQuarantined())},
		}
		if err := writeKV(w, kv); err != nil {
			return err
		}
		if len(u.GetAllocations()) == 0 {
			continue
		}
		t := table{header: []string{"  ADDRESS", "HOLDER", "ALLOCATED", "STATE"}}
		for _, a := range u.GetAllocations() {
			state := "held"
			if a.GetReleasedAt() != nil {
				state = "quarantined until " + a.GetReusableAt().AsTime().UTC().Format(time.RFC3339) + " (released " + age(p.now(), a.GetReleasedAt()) + " ago)"
			}
			t.add("  "+a.GetAddress(), a.GetHolder(), age(p.now(), a.GetAllocatedAt())+" ago", state)
		}
		if _, err := io.WriteString(w, "Allocations:\n"); err != nil {
			return err
		}
		if err := p.writeTable(t); err != nil {
			return err
		}
	}
	return nil
}
