package printer

import (
	"fmt"
	"io"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/provision/inventory"
)

// Refresh prints a hardware refresh listing (`unyo resources ls
// --contract-ends-before DATE`): in a table, one row per rack (how many of
// its resources expire, whether the whole rack does) and then the
// expiring resources, by rack and unit; JSON and YAML hold the expiring
// resources as documents, in the same order.
func Refresh(w io.Writer, format string, racks []inventory.RackRefresh, before string) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	var objs []*unyov1.Object
	for _, r := range racks {
		for _, res := range r.Expiring {
			objs = append(objs, kinds.Wrap(res))
		}
	}
	if p.format != Table {
		return p.objects(objs)
	}
	if len(racks) == 0 {
		_, err := fmt.Fprintf(p.w, "No maintenance contract ends before %s.\n", before)
		return err
	}
	t := table{header: []string{"RACK", "EXPIRING", "RESOURCES", "WHOLE RACK", "FIRST ENDS"}}
	for _, r := range racks {
		whole := "no"
		if r.Whole() {
			whole = "yes"
		}
		t.add(orDash(r.Rack), fmt.Sprint(len(r.Expiring)), fmt.Sprint(r.Resources), whole, r.FirstEnds)
	}
	if err := p.writeTable(t); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(p.w); err != nil {
		return err
	}
	return p.objects(objs)
}

// clusterAttributes are a cluster's REGION, DATACENTER and WEIGHT cells:
// dashes when no Cluster object was applied, its weight 1 when left out.
func clusterAttributes(a *unyov1.Cluster) []string {
	if a == nil {
		return []string{"-", "-", "-"}
	}
	weight := a.GetSpec().GetWeight()
	if weight == 0 {
		weight = 1
	}
	return []string{orDash(a.GetSpec().GetRegion()), orDash(a.GetSpec().GetDatacenter()), fmt.Sprint(weight)}
}
