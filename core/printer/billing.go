package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Billing prints a billing report: in a table one row per key (its reserved
// hours, reservations and cost) and a TOTAL row, under the period; as JSON
// or YAML the whole report as one document.
func Billing(w io.Writer, format string, r *unyov1.BillingReportResponse) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	if p.format != Table {
		b, err := jsonOptions.Marshal(r)
		if err != nil {
			return err
		}
		if p.format == JSON {
			return p.writeJSONDoc(b)
		}
		return p.writeYAML([][]byte{b})
	}
	fmt.Fprintf(p.w, "Reserved time from %s until %s\n", r.GetSince().AsTime().UTC().Format(time.RFC3339), r.GetUntil().AsTime().UTC().Format(time.RFC3339))
	if len(r.GetLines()) == 0 {
		return p.none("reservations in this period")
	}
	t := table{header: []string{strings.ToUpper(orDash(r.GetBy())), "HOURS", "RESERVATIONS", "COST"}}
	var seconds float64
	var n int32
	for _, l := range r.GetLines() {
		t.add(orDash(l.GetKey()), hours(l.GetReservedSeconds()), strconv.Itoa(int(l.GetReservations())), money(l.GetCost()))
		seconds += l.GetReservedSeconds()
		n += l.GetReservations()
	}
	t.add("TOTAL", hours(seconds), strconv.Itoa(int(n)), money(r.GetTotal()))
	return p.writeTable(t)
}

func hours(seconds float64) string { return strconv.FormatFloat(seconds/3600, 'f', 2, 64) }

func money(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
