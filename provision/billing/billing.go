// Package billing is the arithmetic of billing by reserved time: which
// price a reservation accrues at, how much of each reservation falls in a
// period, and the report's lines grouped by service, flavor, cluster or
// node. It is pure: the ledger's rows and the clock come from the caller.
//
// Money is exact until the end: a reservation's cost is its price times
// its reserved nanoseconds as a fraction (math/big.Rat), lines sum those
// fractions, and only a line's (or the total's) final figure is rounded to
// the cent, half away from zero.
package billing

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// By is what a report groups reservations by.
type By string

const (
	ByService By = "service"
	ByFlavor  By = "flavor"
	ByCluster By = "cluster"
	ByNode    By = "node"
)

// ParseBy reads a grouping; "" is ByService.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case "":
		return ByService, nil
	case ByService, ByFlavor, ByCluster, ByNode:
		return b, nil
	}
	return "", fmt.Errorf("billing report by %q: want service, flavor, cluster or node", s)
}

// Price is what a reservation of a flavor costs per hour on a node of the
// given machine model: the flavor's price for that model when it names one,
// else its price_per_hour. Pinned vCPUs and I/O classes have no implicit
// surcharge: cpu_policy and io_class are properties of the flavor, so a
// pinned or fast-I/O shape is its own flavor with its own price.
func Price(perHour float64, modelPrices map[string]float64, model string) float64 {
	if p, ok := modelPrices[model]; ok && model != "" {
		return p
	}
	return perHour
}

// Entry is one ledger row: one reservation of a compute on a node, open
// (End zero) until it is released.
type Entry struct {
	Compute, Service, Flavor, Node, Cluster string
	PricePerHour                            float64
	Start, End                              time.Time
}

// Open says whether the reservation is still held.
func (e Entry) Open() bool { return e.End.IsZero() }

// key is what e is grouped under.
func (e Entry) key(by By) string {
	switch by {
	case ByFlavor:
		return e.Flavor
	case ByCluster:
		return e.Cluster
	case ByNode:
		return e.Node
	}
	return e.Service
}

// Line is one group's reserved time and cost in a period.
type Line struct {
	Key          string
	Reserved     time.Duration
	Reservations int
	// Cost is exact; Cents rounds it.
	Cost *big.Rat
}

// nanosPerHour turns a price per hour into a price per nanosecond.
var nanosPerHour = big.NewRat(int64(time.Hour), 1)

// within is how much of e falls in [since, until), an open reservation
// running until now.
func within(e Entry, since, until, now time.Time) time.Duration {
	end := e.End
	if e.Open() {
		end = now
	}
	start := e.Start
	if start.Before(since) {
		start = since
	}
	if end.After(until) {
		end = until
	}
	if !end.After(start) {
		return 0
	}
	return end.Sub(start)
}

// cost is price per hour times d, exactly.
func cost(pricePerHour float64, d time.Duration) *big.Rat {
	p := new(big.Rat)
	if p.SetFloat64(pricePerHour) == nil {
		return new(big.Rat) // NaN or Inf: the validator refuses these
	}
	p.Mul(p, big.NewRat(int64(d), 1))
	return p.Quo(p, nanosPerHour)
}

// Report sums the entries' time in [since, until), with open reservations
// accruing until now, grouped by by; a reservation with no time in the
// period is left out. Lines come by key.
func Report(entries []Entry, since, until, now time.Time, by By) []Line {
	lines := map[string]*Line{}
	for _, e := range entries {
		d := within(e, since, until, now)
		if d <= 0 {
			continue
		}
		k := e.key(by)
		l := lines[k]
		if l == nil {
			l = &Line{Key: k, Cost: new(big.Rat)}
			lines[k] = l
		}
		l.Reserved += d
		l.Reservations++
		l.Cost.Add(l.Cost, cost(e.PricePerHour, d))
	}
	return sorted(lines)
}

// Merge sums lines of one grouping from several reports (root merges its
// clusters' reports) by key.
func Merge(reports ...[]Line) []Line {
	lines := map[string]*Line{}
	for _, r := range reports {
		for _, x := range r {
			l := lines[x.Key]
			if l == nil {
				l = &Line{Key: x.Key, Cost: new(big.Rat)}
				lines[x.Key] = l
			}
			l.Reserved += x.Reserved
			l.Reservations += x.Reservations
			if x.Cost != nil {
				l.Cost.Add(l.Cost, x.Cost)
			}
		}
	}
	return sorted(lines)
}

func sorted(lines map[string]*Line) []Line {
	out := make([]Line, 0, len(lines))
	for _, l := range lines {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Line) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Total is the exact sum of the lines' costs.
func Total(lines []Line) *big.Rat {
	t := new(big.Rat)
	for _, l := range lines {
		if l.Cost != nil {
			t.Add(t, l.Cost)
		}
	}
	return t
}

// Cents rounds an exact amount to the cent, half away from zero.
func Cents(r *big.Rat) float64 {
	if r == nil {
		return 0
	}
	c := new(big.Rat).Mul(r, big.NewRat(100, 1))
	num, den := new(big.Int).Set(c.Num()), c.Denom()
	neg := num.Sign() < 0
	num.Abs(num)
	// floor((2*num + den) / (2*den)) rounds half up on the magnitude.
	q := new(big.Int).Add(new(big.Int).Lsh(num, 1), den)
	q.Quo(q, new(big.Int).Lsh(den, 1))
	if neg {
		q.Neg(q)
	}
	f, _ := new(big.Rat).SetFrac(q, big.NewInt(100)).Float64()
	return f
}

// ParseExact reads an exact amount as Rat.String writes it ("NUM/DEN").
func ParseExact(s string) (*big.Rat, error) {
	if s == "" {
		return new(big.Rat), nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("exact cost %q is not a fraction", s)
	}
	return r, nil
}

// Period resolves a report's period: until defaults to now, since to the
// start of until's month (UTC). since must come before until.
func Period(since, until, now time.Time) (time.Time, time.Time, error) {
	if until.IsZero() {
		until = now
	}
	if since.IsZero() {
		u := until.UTC()
		since = time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	if !since.Before(until) {
		return since, until, fmt.Errorf("billing period: since (%s) must come before until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return since, until, nil
}

// ToProto is lines as the API answers them, each cost rounded and exact.
func ToProto(lines []Line) []*unyov1.BillingLine {
	out := make([]*unyov1.BillingLine, len(lines))
	for i, l := range lines {
		c := l.Cost
		if c == nil {
			c = new(big.Rat)
		}
		out[i] = &unyov1.BillingLine{Key: l.Key, ReservedSeconds: l.Reserved.Seconds(), Reservations: int32(l.Reservations),
			Cost: Cents(c), ExactCost: c.String()}
	}
	return out
}

// FromProto reads lines a cluster answered, by their exact costs.
func FromProto(lines []*unyov1.BillingLine) ([]Line, error) {
	out := make([]Line, len(lines))
	for i, l := range lines {
		c, err := ParseExact(l.GetExactCost())
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", l.GetKey(), err)
		}
		out[i] = Line{Key: l.GetKey(), Reserved: time.Duration(l.GetReservedSeconds() * float64(time.Second)), Reservations: int(l.GetReservations()), Cost: c}
	}
	return out, nil
}

// Request resolves a report request's grouping and period.
func Request(req *unyov1.BillingReportRequest, now time.Time) (By, time.Time, time.Time, error) {
	by, err := ParseBy(req.GetBy())
	if err != nil {
		return "", time.Time{}, time.Time{}, err
	}
	var since, until time.Time
	if req.GetSince() != nil {
		since = req.GetSince().AsTime()
	}
	if req.GetUntil() != nil {
		until = req.GetUntil().AsTime()
	}
	since, until, err = Period(since, until, now)
	return by, since, until, err
}
