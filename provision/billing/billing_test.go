package billing_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/provision/billing"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

func TestPrice(t *testing.T) {
	models := map[string]float64{"m2": 3.5, "free": 0}
	tests := []struct {
		name  string
		model string
		want  float64
	}{
		{"no model: the flavor's price", "", 2},
		{"a model without its own price", "m1", 2},
		{"a model's own price wins", "m2", 3.5},
		{"a model priced at zero is free, not the default", "free", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := billing.Price(2, models, tt.model); got != tt.want {
				t.Errorf("Price = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReport(t *testing.T) {
	web0 := billing.Entry{Compute: "web-0", Service: "web", Flavor: "small", Node: "n1", Cluster: "c1", PricePerHour: 1.5, Start: at(1), End: at(3)}
	web1 := billing.Entry{Compute: "web-1", Service: "web", Flavor: "small", Node: "n2", Cluster: "c1", PricePerHour: 1.5, Start: at(2), End: at(4)}
	db0 := billing.Entry{Compute: "db-0", Service: "db", Flavor: "big", Node: "n1", Cluster: "c2", PricePerHour: 4, Start: at(0), End: at(10)}
	open := billing.Entry{Compute: "db-1", Service: "db", Flavor: "big", Node: "n3", Cluster: "c2", PricePerHour: 4, Start: at(8)}
	// A replacement in flight: web-0 reserved on n3 while still on n1.
	web0b := billing.Entry{Compute: "web-0", Service: "web", Flavor: "small", Node: "n3", Cluster: "c1", PricePerHour: 1.5, Start: at(2.5), End: at(5)}
	// A machine model's price recorded on the row.
	model := billing.Entry{Compute: "web-2", Service: "web", Flavor: "small", Node: "n9", Cluster: "c1", PricePerHour: billing.Price(1.5, map[string]float64{"m2": 2.25}, "m2"), Start: at(0), End: at(1)}
	type want struct {
		key   string
		hours float64
		n     int
		cents float64
	}
	tests := []struct {
		name         string
		entries      []billing.Entry
		since, until time.Time
		now          time.Time
		by           billing.By
		want         []want
	}{
		{"overlapping intervals of one service add up", []billing.Entry{web0, web1}, at(0), at(24), at(24), billing.ByService,
			[]want{{"web", 4, 2, 6}}},
		{"the window cuts an interval", []billing.Entry{web0, web1}, at(2), at(3.5), at(24), billing.ByService,
			[]want{{"web", 2.5, 2, 3.75}}},
		{"an interval entirely outside the window is left out", []billing.Entry{web0, db0}, at(5), at(6), at(24), billing.ByService,
			[]want{{"db", 1, 1, 4}}},
		{"an open interval accrues until now", []billing.Entry{open}, at(0), at(24), at(9.5), billing.ByService,
			[]want{{"db", 1.5, 1, 6}}},
		{"an open interval stops at until", []billing.Entry{open}, at(0), at(9), at(100), billing.ByService,
			[]want{{"db", 1, 1, 4}}},
		{"an open interval started after now counts nothing", []billing.Entry{open}, at(0), at(24), at(7), billing.ByService, nil},
		{"two reservations of one compute both bill", []billing.Entry{web0, web0b}, at(0), at(24), at(24), billing.ByService,
			[]want{{"web", 4.5, 2, 6.75}}},
		{"model price override", []billing.Entry{model}, at(0), at(24), at(24), billing.ByService,
			[]want{{"web", 1, 1, 2.25}}},
		{"by flavor", []billing.Entry{web0, db0}, at(0), at(24), at(24), billing.ByFlavor,
			[]want{{"big", 10, 1, 40}, {"small", 2, 1, 3}}},
		{"by cluster", []billing.Entry{web0, db0, open}, at(0), at(24), at(9), billing.ByCluster,
			[]want{{"c1", 2, 1, 3}, {"c2", 11, 2, 44}}},
		{"by node", []billing.Entry{web0, web1, db0}, at(0), at(24), at(24), billing.ByNode,
			[]want{{"n1", 12, 2, 43}, {"n2", 2, 1, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := billing.Report(tt.entries, tt.since, tt.until, tt.now, tt.by)
			if len(got) != len(tt.want) {
				t.Fatalf("lines = %+v, want %+v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Key != w.key || g.Reserved != time.Duration(w.hours*float64(time.Hour)) || g.Reservations != w.n || billing.Cents(g.Cost) != w.cents {
					t.Errorf("line %d = {%s %v %d %v}, want %+v", i, g.Key, g.Reserved, g.Reservations, billing.Cents(g.Cost), w)
				}
			}
		})
	}
}

// TestRoundingAtTheEndOnly: three reservations of a third of a cent each
// make one cent, where rounding each would make none.
func TestRoundingAtTheEndOnly(t *testing.T) {
	var es []billing.Entry
	for i := range 3 {
		// 0.012 per hour for 1000 s = 0.00333... each.
		es = append(es, billing.Entry{Service: "s", PricePerHour: 0.012, Start: at(float64(i)), End: at(float64(i)).Add(1000 * time.Second)})
	}
	lines := billing.Report(es, at(0), at(24), at(24), billing.ByService)
	if got := billing.Cents(lines[0].Cost); got != 0.01 {
		t.Errorf("cost = %v, want 0.01", got)
	}
	// Root merges the clusters' exact costs, then rounds.
	a := billing.Report(es[:1], at(0), at(24), at(24), billing.ByService)
	b := billing.Report(es[1:], at(0), at(24), at(24), billing.ByService)
	exact, err := billing.ParseExact(a[0].Cost.String())
	if err != nil {
		t.Fatal(err)
	}
	a[0].Cost = exact
	m := billing.Merge(a, b)
	if len(m) != 1 || m[0].Reservations != 3 || billing.Cents(m[0].Cost) != 0.01 || billing.Cents(billing.Total(m)) != 0.01 {
		t.Errorf("merged = %+v", m)
	}
}

func TestCents(t *testing.T) {
	tests := []struct {
		in   *big.Rat
		want float64
	}{
		{big.NewRat(1, 200), 0.01},   // half a cent rounds up
		{big.NewRat(-1, 200), -0.01}, // and away from zero
		{big.NewRat(1, 201), 0},      // below half rounds down
		{big.NewRat(12345, 100), 123.45},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := billing.Cents(tt.in); got != tt.want {
			t.Errorf("Cents(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPeriod(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	since, until, err := billing.Period(time.Time{}, time.Time{}, now)
	if err != nil || !since.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !until.Equal(now) {
		t.Errorf("default period = %v..%v, %v", since, until, err)
	}
	if _, _, err := billing.Period(now, now.Add(-time.Hour), now); err == nil {
		t.Error("since after until accepted")
	}
	if _, err := billing.ParseBy("rack"); err == nil {
		t.Error("by rack accepted")
	}
}
