package storetest

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// day0 is a UTC midnight; statistics buckets are aligned to it.
var day0 = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func rollup(res store.Resolution, node string, start time.Time, base float64) store.Rollup {
	return store.Rollup{
		Resolution: res, Start: start,
		Series: fmt.Sprintf(`load{node=%q}`, node),
		Labels: map[string]string{"__name__": "load", "node": node},
		Min:    base, Max: base + 2, Sum: 3 * (base + 1), Count: 3, Last: base + 0.5,
	}
}

func listRollups(t *testing.T, s store.Store, f store.RollupFilter) []store.Rollup {
	t.Helper()
	got, err := s.ListRollups(ctx(t), f)
	must(t, err)
	return got
}

func statsTests() []contractTest {
	return []contractTest{
		{"RollupsRoundTripInOrder", func(t *testing.T, s store.Store) {
			in := []store.Rollup{
				rollup(store.Hourly, "web2", day0.Add(time.Hour), 1),
				rollup(store.Hourly, "web1", day0.Add(time.Hour), 2),
				rollup(store.Hourly, "web1", day0, 3),
				rollup(store.Daily, "web1", day0, 4),
			}
			// Values a TSDB returns that are not plain numbers.
			in[0].Max = math.Inf(1)
			in[0].Min = -0.25
			other := rollup(store.Hourly, "x", day0, 1)
			other.Series, other.Labels = `other{}`, map[string]string{"__name__": "other"}
			must(t, s.PutRollups(ctx(t), append(in, other)))
			got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly, Name: "load"})
			want := []store.Rollup{in[2], in[1], in[0]}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("hourly load rollups:\ngot  %+v\nwant %+v", got, want)
			}
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Daily}); !reflect.DeepEqual(got, in[3:4]) {
				t.Errorf("daily rollups = %+v, want %+v", got, in[3:4])
			}
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly}); len(got) != 4 {
				t.Errorf("every hourly rollup: %d, want 4", len(got))
			}
			got = listRollups(t, s, store.RollupFilter{Resolution: store.Hourly, Name: "load", Since: day0.Add(time.Hour), Until: day0.Add(2 * time.Hour)})
			if len(got) != 2 || !got[0].Start.Equal(day0.Add(time.Hour)) || !got[1].Start.Equal(day0.Add(time.Hour)) {
				t.Errorf("rollups in [1h, 2h) = %+v, want web1 and web2 at 1h", got)
			}
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly, Name: "load", Limit: 1}); len(got) != 1 {
				t.Errorf("limit 1 returned %d rollups", len(got))
			}
		}},
		{"RollupUpsertReplaces", func(t *testing.T, s store.Store) {
			first := rollup(store.Hourly, "web1", day0, 1)
			must(t, s.PutRollups(ctx(t), []store.Rollup{first}))
			again := rollup(store.Hourly, "web1", day0, 7) // recomputed with late data
			again.Count = 5
			must(t, s.PutRollups(ctx(t), []store.Rollup{again}))
			must(t, s.PutRollups(ctx(t), []store.Rollup{again}))
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly}); !reflect.DeepEqual(got, []store.Rollup{again}) {
				t.Errorf("after recomputing: %+v, want only %+v", got, again)
			}
		}},
		{"RollupRejectsNaN", func(t *testing.T, s store.Store) {
			r := rollup(store.Hourly, "web1", day0, 1)
			r.Last = math.NaN()
			if err := s.PutRollups(ctx(t), []store.Rollup{rollup(store.Hourly, "web2", day0, 1), r}); err == nil {
				t.Fatal("PutRollups stored a NaN")
			}
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly}); len(got) != 0 {
				t.Errorf("a refused batch left %d rollups", len(got))
			}
		}},
		{"RollupExpiryPerResolution", func(t *testing.T, s store.Store) {
			var in []store.Rollup
			for h := range 48 {
				in = append(in, rollup(store.Hourly, "web1", day0.Add(time.Duration(h)*time.Hour), float64(h)))
			}
			in = append(in, rollup(store.Daily, "web1", day0, 1), rollup(store.Daily, "web1", day0.Add(24*time.Hour), 1))
			must(t, s.PutRollups(ctx(t), in))
			n, err := s.DeleteRollupsBefore(ctx(t), store.Hourly, day0.Add(30*time.Hour))
			must(t, err)
			if n != 30 {
				t.Errorf("expired %d hourly rollups, want 30", n)
			}
			got := listRollups(t, s, store.RollupFilter{Resolution: store.Hourly})
			if len(got) != 18 || !got[0].Start.Equal(day0.Add(30*time.Hour)) {
				t.Errorf("hourly rollups left: %d from %v, want 18 from +30h", len(got), got[0].Start)
			}
			if got := listRollups(t, s, store.RollupFilter{Resolution: store.Daily}); len(got) != 2 {
				t.Errorf("expiring hourly rollups removed daily ones: %d left, want 2", len(got))
			}
			n, err = s.DeleteRollupsBefore(ctx(t), store.Daily, day0.Add(24*time.Hour))
			must(t, err)
			if n != 1 {
				t.Errorf("expired %d daily rollups, want 1", n)
			}
		}},
		{"CountsUpsertListExpire", func(t *testing.T, s store.Store) {
			c := func(kind, by string, day int, key string, n, errs, warns int64) store.DailyCount {
				return store.DailyCount{Kind: kind, By: by, Day: day0.AddDate(0, 0, day), Key: key, Count: n, Errors: errs, Warnings: warns}
			}
			must(t, s.PutCounts(ctx(t), []store.DailyCount{
				c("logs", "level", 1, "info", 10, 0, 0),
				c("logs", "level", 0, "error", 3, 3, 0),
				c("logs", "level", 0, "info", 7, 0, 0),
				c("logs", "host", 0, "web1", 10, 3, 0),
				c("events", "level", 0, "critical", 2, 2, 0),
			}))
			// A recomputed day replaces its count.
			must(t, s.PutCounts(ctx(t), []store.DailyCount{c("logs", "level", 1, "info", 12, 0, 0)}))
			got, err := s.ListCounts(ctx(t), store.CountFilter{Kind: "logs", By: "level"})
			must(t, err)
			want := []store.DailyCount{c("logs", "level", 0, "error", 3, 3, 0), c("logs", "level", 0, "info", 7, 0, 0), c("logs", "level", 1, "info", 12, 0, 0)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("logs by level:\ngot  %+v\nwant %+v", got, want)
			}
			got, err = s.ListCounts(ctx(t), store.CountFilter{Kind: "logs", By: "level", Since: day0.AddDate(0, 0, 1), Until: day0.AddDate(0, 0, 2)})
			must(t, err)
			if !reflect.DeepEqual(got, want[2:]) {
				t.Errorf("logs by level on day 1 = %+v, want %+v", got, want[2:])
			}
			n, err := s.DeleteCountsBefore(ctx(t), day0.AddDate(0, 0, 1))
			must(t, err)
			if n != 4 {
				t.Errorf("expired %d counts, want 4 (every kind and grouping of day 0)", n)
			}
			got, err = s.ListCounts(ctx(t), store.CountFilter{Kind: "events", By: "level"})
			must(t, err)
			if len(got) != 0 {
				t.Errorf("events of an expired day remain: %+v", got)
			}
		}},
		{"Cursors", func(t *testing.T, s store.Store) {
			at, err := s.StatsCursor(ctx(t), "metrics")
			must(t, err)
			if !at.IsZero() {
				t.Fatalf("unset cursor = %v, want the zero time", at)
			}
			must(t, s.SetStatsCursor(ctx(t), "metrics", day0.Add(5*time.Hour)))
			must(t, s.SetStatsCursor(ctx(t), "logs", day0))
			must(t, s.SetStatsCursor(ctx(t), "metrics", day0.Add(6*time.Hour)))
			for name, want := range map[string]time.Time{"metrics": day0.Add(6 * time.Hour), "logs": day0} {
				at, err := s.StatsCursor(ctx(t), name)
				must(t, err)
				if !at.Equal(want) {
					t.Errorf("cursor %s = %v, want %v", name, at, want)
				}
			}
		}},
	}
}
