package printer

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestBilling(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	r := &unyov1.BillingReportResponse{Since: timestamppb.New(since), Until: timestamppb.New(since.Add(24 * time.Hour)), By: "service",
		Lines: []*unyov1.BillingLine{
			{Key: "db", ReservedSeconds: 7200, Reservations: 1, Cost: 1.5, ExactCost: "3/2"},
			{Key: "web", ReservedSeconds: 5400, Reservations: 2, Cost: 0.01, ExactCost: "1/100"},
		}, Total: 1.51}
	var b strings.Builder
	if err := Billing(&b, Table, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Reserved time from 2026-11-01T00:00:00Z until 2026-11-02T00:00:00Z",
		"SERVICE   HOURS   RESERVATIONS   COST",
		"db        2.00    1              1.50",
		"web       1.50    2              0.01",
		"TOTAL     3.50    3              1.51",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := Billing(&b, JSON, r); err != nil || !strings.Contains(b.String(), `"exact_cost": "3/2"`) || !strings.Contains(b.String(), `"total": 1.51`) {
		t.Errorf("json: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := Billing(&b, Table, &unyov1.BillingReportResponse{Since: r.Since, Until: r.Until}); err != nil || !strings.Contains(b.String(), "No reservations in this period found.") {
		t.Errorf("empty: %v\n%s", err, b.String())
	}
}
