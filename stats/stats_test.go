package stats

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

var t0 = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

func TestAlign(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		in   time.Time
		r    store.Resolution
		want time.Time
	}{
		{t0.Add(90 * time.Minute), store.Hourly, t0.Add(time.Hour)},
		{t0.Add(time.Hour), store.Hourly, t0.Add(time.Hour)},
		{t0.Add(23*time.Hour + 59*time.Minute), store.Daily, t0},
		// Local midnight is not the UTC day's start.
		{time.Date(2025, 3, 11, 0, 30, 0, 0, berlin), store.Daily, t0},
		{time.Date(2025, 3, 11, 0, 30, 0, 0, berlin), store.Hourly, t0.Add(23 * time.Hour)},
	} {
		if got := Align(tc.in, tc.r); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("Align(%v, %s) = %v, want %v in UTC", tc.in, tc.r, got, tc.want)
		}
	}
}

func TestDue(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	for _, tc := range []struct {
		name     string
		cursor   time.Time
		now      time.Time
		lateness time.Duration
		r        store.Resolution
		current  bool
		want     Window
	}{
		{"first run backfills", time.Time{}, h(30).Add(20 * time.Minute), 3 * time.Hour, store.Hourly, false,
			Window{From: h(6), Until: h(30), Final: h(27)}},
		{"resumes at the cursor, recomputes the lateness window", h(27), h(31).Add(time.Minute), 3 * time.Hour, store.Hourly, false,
			Window{From: h(27), Until: h(31), Final: h(28)}},
		{"nothing completed yet", h(31), h(31).Add(time.Minute), 0, store.Hourly, false,
			Window{From: h(31), Until: h(31), Final: h(31)}},
		{"no lateness: completed hours are final", h(29), h(31), 0, store.Hourly, false,
			Window{From: h(29), Until: h(31), Final: h(31)}},
		{"grown lateness keeps final buckets final", h(30), h(31), 5 * time.Hour, store.Hourly, false,
			Window{From: h(30), Until: h(31), Final: h(30)}},
		{"days include today", t0, h(50), 3 * time.Hour, store.Daily, true,
			Window{From: t0, Until: h(72), Final: h(24)}},
		{"a day is final after its lateness", t0.AddDate(0, 0, 1), h(51), 3 * time.Hour, store.Daily, true,
			Window{From: h(24), Until: h(72), Final: h(48)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Due(tc.cursor, tc.now, tc.lateness, 24*time.Hour, tc.r, tc.current)
			if got != tc.want {
				t.Errorf("Due = %+v, want %+v", got, tc.want)
			}
		})
	}
	w := Window{From: t0, Until: h(3)}
	if got := w.Buckets(store.Hourly); !reflect.DeepEqual(got, []time.Time{t0, h(1), h(2)}) {
		t.Errorf("Buckets = %v", got)
	}
}

func TestSeriesKey(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"__name__": "load", "node": "web1", "cpu": "0"}, `load{cpu="0",node="web1"}`},
		{map[string]string{"__name__": "up"}, `up{}`},
		{map[string]string{"a": `x"y`}, `{a="x\"y"}`},
	} {
		if got := SeriesKey(tc.labels); got != tc.want {
			t.Errorf("SeriesKey(%v) = %s, want %s", tc.labels, got, tc.want)
		}
	}
}

func hourly(series string, hour int, mn, mx, sum float64, n int64, last float64) store.Rollup {
	return store.Rollup{Resolution: store.Hourly, Start: t0.Add(time.Duration(hour) * time.Hour), Series: series,
		Labels: map[string]string{"__name__": series}, Min: mn, Max: mx, Sum: sum, Count: n, Last: last}
}

func TestDaily(t *testing.T) {
	in := []store.Rollup{
		// Out of order on purpose: Last comes from the latest hour.
		hourly("a", 5, 2, 9, 30, 6, 4),
		hourly("a", 1, -1, 3, 4, 4, 3),
		hourly("a", 23, 0, 1, 1, 2, 0.5),
		hourly("a", 24, 7, 7, 7, 1, 7), // the next day
		hourly("b", 0, 5, 5, 10, 2, 5),
	}
	got := Daily(in)
	want := []store.Rollup{
		{Resolution: store.Daily, Start: t0, Series: "a", Labels: in[0].Labels, Min: -1, Max: 9, Sum: 35, Count: 12, Last: 0.5},
		{Resolution: store.Daily, Start: t0.AddDate(0, 0, 1), Series: "a", Labels: in[0].Labels, Min: 7, Max: 7, Sum: 7, Count: 1, Last: 7},
		{Resolution: store.Daily, Start: t0, Series: "b", Labels: in[4].Labels, Min: 5, Max: 5, Sum: 10, Count: 2, Last: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Daily:\ngot  %+v\nwant %+v", got, want)
	}
	if avg := Avg(got[0]); math.Abs(avg-35.0/12) > 1e-12 {
		t.Errorf("Avg = %v, want 35/12", avg)
	}
	if Avg(store.Rollup{}) != 0 || len(Daily(nil)) != 0 {
		t.Error("empty input: want a zero average and no days")
	}
}

func TestHourQueriesAndAssemble(t *testing.T) {
	q := HourQueries(`{__name__="load",node="web1"}`)
	if q[0] != `min_over_time({__name__="load",node="web1"}[1h]) keep_metric_names` || q[4] != `last_over_time({__name__="load",node="web1"}[1h]) keep_metric_names` {
		t.Errorf("HourQueries = %q", q)
	}
	if got := QueryTime(t0); !got.Equal(t0.Add(59*time.Minute + 59*time.Second + 999*time.Millisecond)) {
		t.Errorf("QueryTime = %v", got)
	}
	full := &Values{Labels: map[string]string{"__name__": "load"}, V: [5]float64{1, 5, 9, 3, 5}, Has: [5]bool{true, true, true, true, true}}
	partial := &Values{Labels: map[string]string{"__name__": "x"}, V: [5]float64{1}, Has: [5]bool{true}}
	got := Assemble(t0, map[string]*Values{"load{}": full, "x{}": partial})
	want := []store.Rollup{{Resolution: store.Hourly, Start: t0, Series: "load{}", Labels: full.Labels, Min: 1, Max: 5, Sum: 9, Count: 3, Last: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Assemble = %+v, want %+v", got, want)
	}
}

func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		sel      string
		name     string
		batch    string // a metric name it selects
		withName string
		match    []map[string]string
		noMatch  []map[string]string
	}{
		{`node_load1`, "node_load1", "node_load1", `{__name__="node_load1"}`,
			[]map[string]string{{"__name__": "node_load1", "node": "a"}},
			[]map[string]string{{"__name__": "node_load5"}}},
		{`node_load1{node=~"web.*",env!="dev"}`, "node_load1", "node_load1", `{__name__="node_load1",node=~"web.*",env!="dev"}`,
			[]map[string]string{{"__name__": "node_load1", "node": "web1"}, {"__name__": "node_load1", "node": "web1", "env": "prod"}},
			[]map[string]string{{"__name__": "node_load1", "node": "aweb1"}, {"__name__": "node_load1", "node": "web1", "env": "dev"}}},
		{`{__name__=~"node_(load1|memory_.*)"}`, "", "node_load1", `{__name__="node_load1",__name__=~"node_(load1|memory_.*)"}`,
			[]map[string]string{{"__name__": "node_load1"}, {"__name__": "node_memory_free_bytes"}},
			[]map[string]string{{"__name__": "node_load15"}}},
		{`{a="1" or b="2"}`, "", "x", `{__name__="x",a="1" or __name__="x",b="2"}`,
			[]map[string]string{{"a": "1"}, {"b": "2"}, {"__name__": "x", "b": "2", "node": "web1"}},
			[]map[string]string{{"a": "2", "b": "1"}}},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			s, err := ParseSelector(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != tc.name || s.String() != tc.sel {
				t.Errorf("Name = %q, String = %q; want %q, %q", s.Name(), s.String(), tc.name, tc.sel)
			}
			if got := s.WithName(tc.batch); got != tc.withName {
				t.Errorf("WithName = %s, want %s", got, tc.withName)
			}
			narrowed, err := ParseSelector(s.WithName(tc.batch))
			if err != nil {
				t.Fatalf("WithName made a selector that does not parse: %v", err)
			}
			byNode, err := ParseSelector(narrowed.WithLabel("node", "web1"))
			if err != nil {
				t.Fatalf("WithLabel made a selector that does not parse: %v", err)
			}
			for _, l := range tc.match {
				if want := l["__name__"] == tc.batch && l["node"] == "web1"; byNode.Matches(l) != want {
					t.Errorf("narrowed to %s and node web1: Matches(%v) = %v", tc.batch, l, !want)
				}
			}
			for _, l := range tc.match {
				if !s.Matches(l) {
					t.Errorf("does not match %v", l)
				}
			}
			for _, l := range tc.noMatch {
				if s.Matches(l) {
					t.Errorf("matches %v", l)
				}
			}
		})
	}
	for _, bad := range []string{"", "sum(up)", "up + 1", `up{a=~"("}`, "{"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) succeeded, want an error", bad)
		}
	}
}
