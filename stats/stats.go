// Package stats is the logic of the statistics tier: hourly and daily
// rollups of metrics and daily counts kept for years after the raw data
// expired. It decides which buckets are due, aligns them in UTC, combines
// hourly rollups into daily ones and matches series selectors; the cluster
// controller wires it to the TSDB, the log store and the state store.
//
// Buckets are half-open, [start, start+resolution), aligned to UTC hours
// and UTC days. A bucket is provisional until its end plus the lateness has
// passed (agents replay spooled data late) and is recomputed on every run
// until then; afterwards it is final and never computed again. Recomputing
// replaces a bucket, so nothing is counted twice.
package stats

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// Align returns the start of the UTC bucket of resolution r containing t.
func Align(t time.Time, r store.Resolution) time.Time {
	t = t.UTC()
	if r == store.Daily {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return t.Truncate(time.Hour)
}

// Window is the work of one run over buckets of one resolution.
type Window struct {
	// From is the first bucket to compute: the stored cursor.
	From time.Time
	// Until is the end (exclusive) of the last bucket to compute.
	Until time.Time
	// Final is the cursor after the run: buckets before it have had their
	// lateness and are never computed again.
	Final time.Time
}

// Buckets lists the starts of the buckets in [From, Until).
func (w Window) Buckets(r store.Resolution) []time.Time {
	var out []time.Time
	for b := w.From; b.Before(w.Until); b = b.Add(r.Duration()) {
		out = append(out, b)
	}
	return out
}

// Due says which buckets of resolution r a run at now computes. cursor is
// where the last run left off (zero on the first run, which starts backfill
// before now: what the raw stores still hold). current includes the bucket
// now is in (daily counts show "today so far"); otherwise only completed
// buckets are computed.
func Due(cursor, now time.Time, lateness, backfill time.Duration, r store.Resolution, current bool) Window {
	from := cursor
	if from.IsZero() {
		from = Align(now.Add(-backfill), r)
	}
	until := Align(now, r)
	if current {
		until = until.Add(r.Duration())
	}
	final := Align(now.Add(-lateness), r)
	if final.Before(from) {
		// The lateness grew since the cursor was set: buckets already
		// declared final stay final.
		final = from
	}
	if until.Before(from) {
		until = from
	}
	return Window{From: from, Until: until, Final: final}
}

// SeriesKey is the canonical key of a label set: name{k="v",...} with the
// labels sorted and values quoted, so one series always has one key.
func SeriesKey(labels map[string]string) string {
	var b strings.Builder
	b.WriteString(labels["__name__"])
	b.WriteByte('{')
	first := true
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == "__name__" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// Daily combines hourly rollups into one daily rollup per series and UTC
// day: min of the minimums, max of the maximums, sums of sums and counts,
// and the last value of the latest hour. The order of the input does not
// matter; the output is ordered by series, then day.
func Daily(hourly []store.Rollup) []store.Rollup {
	type key struct {
		series string
		day    time.Time
	}
	days := map[key]*store.Rollup{}
	latest := map[key]time.Time{} // start of the hour Last came from
	for _, h := range hourly {
		k := key{h.Series, Align(h.Start, store.Daily)}
		d := days[k]
		if d == nil {
			d = &store.Rollup{Resolution: store.Daily, Start: k.day, Series: h.Series, Labels: h.Labels,
				Min: h.Min, Max: h.Max, Last: h.Last}
			days[k] = d
			latest[k] = h.Start
		}
		d.Min, d.Max = min(d.Min, h.Min), max(d.Max, h.Max)
		d.Sum += h.Sum
		d.Count += h.Count
		if h.Start.After(latest[k]) {
			d.Last, latest[k] = h.Last, h.Start
		}
	}
	out := make([]store.Rollup, 0, len(days))
	for _, d := range days {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b store.Rollup) int {
		if c := strings.Compare(a.Series, b.Series); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	return out
}

// Avg is a rollup's average, 0 for a rollup without samples.
func Avg(r store.Rollup) float64 {
	if r.Count == 0 {
		return 0
	}
	return r.Sum / float64(r.Count)
}

// aggregations are the MetricsQL rollup functions one hourly rollup is made
// of, in the order Assemble takes their results.
var aggregations = [...]string{"min_over_time", "max_over_time", "sum_over_time", "count_over_time", "last_over_time"}

// HourQueries returns the instant queries that make the hourly rollups of
// the series selected by sel, to evaluate at QueryTime: min, max, sum, count
// and last over the hour, keeping metric names.
func HourQueries(sel string) [len(aggregations)]string {
	var out [len(aggregations)]string
	for i, fn := range aggregations {
		out[i] = fmt.Sprintf("%s(%s[1h]) keep_metric_names", fn, sel)
	}
	return out
}

// QueryTime is when the hour starting at hour is evaluated. A window [1h]
// at t covers (t-1h, t]; one millisecond (the TSDB's resolution) before the
// hour's end makes that [hour, hour+1h), so a sample on the boundary
// belongs to the hour it starts.
func QueryTime(hour time.Time) time.Time { return hour.Add(time.Hour - time.Millisecond) }

// Values is one series' results of the HourQueries, by aggregation.
type Values struct {
	Labels map[string]string
	V      [len(aggregations)]float64
	Has    [len(aggregations)]bool
}

// Assemble turns the series' values into hourly rollups, ordered by series.
// A series missing any aggregation (a sample that arrived between the
// queries) is left out: the next run recomputes the hour.
func Assemble(hour time.Time, values map[string]*Values) []store.Rollup {
	out := make([]store.Rollup, 0, len(values))
	for _, key := range slices.Sorted(maps.Keys(values)) {
		v := values[key]
		if slices.Contains(v.Has[:], false) || v.V[3] < 1 {
			continue
		}
		out = append(out, store.Rollup{
			Resolution: store.Hourly, Start: hour, Series: key, Labels: v.Labels,
			Min: v.V[0], Max: v.V[1], Sum: v.V[2], Count: int64(v.V[3]), Last: v.V[4],
		})
	}
	return out
}
