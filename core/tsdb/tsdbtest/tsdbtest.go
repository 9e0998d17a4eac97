// Package tsdbtest is the contract every tsdb.Store backend must pass.
//
// Stores under test must be opened with the limits MaxSeries and
// MaxPointsPerSeries below and a retention of Retention. Each subtest writes
// metrics with names unique to the subtest, so open may return stores that
// share one underlying database. Subtests run sequentially (the embedded
// backend allows one instance per process).
//
// Backends differ in how soon a write is visible even after Flush (a
// VictoriaMetrics 1.79 server can take seconds for a new series), so checks
// poll until they hold or Deadline passes, flushing between attempts.
package tsdbtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// Limits the stores under test must be configured with.
const (
	MaxSeries          = 1000
	MaxPointsPerSeries = 20000
	Retention          = 30 * 24 * time.Hour
)

// Deadline bounds how long a check waits for written data to become visible.
var Deadline = 30 * time.Second

// Harness describes a backend to the suite.
type Harness struct {
	// Open returns a store; see the package comment. Required.
	Open func(t *testing.T) tsdb.Store
	// Reopen, if set, closes s, restarts the backend keeping its data and
	// returns a store over the same data. It enables the persistence test.
	Reopen func(t *testing.T, s tsdb.Store) tsdb.Store
}

// Run runs the contract suite without the restart-persistence test.
func Run(t *testing.T, open func(t *testing.T) tsdb.Store) {
	RunHarness(t, Harness{Open: open})
}

// RunHarness runs the whole contract suite.
func RunHarness(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, s tsdb.Store, name string)
	}{
		{"WriteThenQueryRange", testQueryRange},
		{"InstantQuery", testInstant},
		{"RateOverCounter", testRate},
		{"LabelRegexFilter", testRegex},
		{"SeriesListing", testSeries},
		{"LabelValues", testLabelValues},
		{"ManySeries", testManySeries},
		{"LargeBatch", testLargeBatch},
		{"TooLargeQuery", testTooLarge},
		{"BadNamesRejected", testBadNames},
		{"IdempotentRewrite", testIdempotent},
		{"PastWithinRetention", testPast},
		{"OutsideWindowDropped", testOutsideWindow},
		{"WriteSeries", testWriteSeries},
		{"WriteSeriesRejects", testWriteSeriesRejects},
		{"ClosedStoreErrors", testClosed},
		{"RestartPersistence", testRestart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "RestartPersistence" && h.Reopen == nil {
				t.Skip("backend has no Reopen hook")
			}
			s := h.Open(t)
			tc.fn(t, h, s, uniqueName(tc.name))
		})
	}
}

var seq atomic.Int64

// uniqueName keeps subtests apart when stores share a database, also across
// repeated runs (-count) against the same server.
func uniqueName(test string) string {
	return fmt.Sprintf("ct_%s_%d_%d", strings.ToLower(test), time.Now().UnixNano()%1e9, seq.Add(1))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// base is a minute-aligned time safely in the past, so range queries never
// touch "now" (where servers may adjust the last points).
func base() time.Time { return time.Now().Add(-30 * time.Minute).Truncate(time.Minute) }

func write(t *testing.T, s tsdb.Store, samples []tsdb.Sample) {
	t.Helper()
	if err := s.Write(ctx(t), samples); err != nil {
		t.Fatalf("Write(%d samples): %v", len(samples), err)
	}
	if err := s.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// eventually polls check until it returns "" or Deadline passes, flushing
// between attempts, and fails with check's last complaint.
func eventually(t *testing.T, s tsdb.Store, check func() string) {
	t.Helper()
	testutil.Eventually(t, Deadline, "the stored samples", func() error {
		if msg := check(); msg != "" {
			_ = s.Flush(ctx(t))
			return errors.New(msg)
		}
		return nil
	})
}

// scalar runs an instant query expected to return one series and returns
// its value, or a complaint.
func scalar(t *testing.T, s tsdb.Store, expr string, at time.Time) (float64, string) {
	res, err := s.Query(ctx(t), expr, at)
	if err != nil {
		return 0, fmt.Sprintf("Query(%s): %v", expr, err)
	}
	if len(res) != 1 || len(res[0].Points) != 1 {
		return 0, fmt.Sprintf("Query(%s) = %v, want one series with one point", expr, res)
	}
	return res[0].Points[0].V, ""
}

func expectScalar(t *testing.T, s tsdb.Store, expr string, at time.Time, want float64) {
	t.Helper()
	eventually(t, s, func() string {
		v, msg := scalar(t, s, expr, at)
		if msg != "" {
			return msg
		}
		if math.Abs(v-want) > 1e-9*math.Max(1, math.Abs(want)) {
			return fmt.Sprintf("Query(%s) = %v, want %v", expr, v, want)
		}
		return ""
	})
}

// expectStats runs write and, for a store that counts, checks what it
// added to the store's WriteStats.
func expectStats(t *testing.T, s tsdb.Store, want tsdb.WriteStats, write func()) {
	t.Helper()
	sr, ok := s.(tsdb.StatsReporter)
	var before tsdb.WriteStats
	if ok {
		before = sr.WriteStats()
	}
	write()
	if !ok {
		return
	}
	after := sr.WriteStats()
	got := tsdb.WriteStats{Written: after.Written - before.Written, DroppedTooOld: after.DroppedTooOld - before.DroppedTooOld, DroppedFuture: after.DroppedFuture - before.DroppedFuture}
	if got != want {
		t.Errorf("WriteStats grew by %+v, want %+v", got, want)
	}
}

func testQueryRange(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	const n = 30
	var ss []tsdb.Sample
	for i := 0; i < n; i++ {
		ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"job": "a"}, Timestamp: b.Add(time.Duration(i) * 10 * time.Second), Value: float64(i) * 1.5})
	}
	write(t, s, ss)
	q := tsdb.QueryRange{Expr: name, Start: b, End: b.Add((n - 1) * 10 * time.Second), Step: 10 * time.Second}
	eventually(t, s, func() string {
		res, err := s.QueryRange(ctx(t), q)
		if err != nil {
			return fmt.Sprintf("QueryRange: %v", err)
		}
		if len(res) != 1 {
			return fmt.Sprintf("QueryRange returned %d series, want 1: %v", len(res), res)
		}
		if got := res[0].Labels; got["__name__"] != name || got["job"] != "a" || len(got) != 2 {
			return fmt.Sprintf("labels = %v, want __name__=%s job=a", got, name)
		}
		pts := res[0].Points
		if len(pts) != n {
			return fmt.Sprintf("got %d points, want %d: %v", len(pts), n, pts)
		}
		for i, p := range pts {
			if !p.T.Equal(ss[i].Timestamp) || p.V != ss[i].Value {
				return fmt.Sprintf("point %d = %v@%s, want %v@%s", i, p.V, p.T, ss[i].Value, ss[i].Timestamp)
			}
		}
		return ""
	})
}

func testInstant(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	write(t, s, []tsdb.Sample{
		{Name: name, Labels: map[string]string{"i": "1"}, Timestamp: b, Value: 1},
		{Name: name, Labels: map[string]string{"i": "1"}, Timestamp: b.Add(time.Minute), Value: 7},
		{Name: name, Labels: map[string]string{"i": "2"}, Timestamp: b.Add(time.Minute), Value: 3},
	})
	expectScalar(t, s, name+`{i="1"}`, b.Add(time.Minute), 7)
	expectScalar(t, s, name+`{i="1"}`, b.Add(30*time.Second), 1) // last value before the instant
	expectScalar(t, s, "sum("+name+")", b.Add(time.Minute), 10)
	res, err := s.Query(ctx(t), name, b.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("Query(%s) returned %d series, want 2: %v", name, len(res), res)
	}
	for _, r := range res {
		if len(r.Points) != 1 || !r.Points[0].T.Equal(b.Add(time.Minute)) {
			t.Errorf("series %v: points %v, want one point at the query time %s", r.Labels, r.Points, b.Add(time.Minute))
		}
	}
}

func testRate(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	var ss []tsdb.Sample
	for i := 0; i <= 60; i++ { // +10 every 10s: rate 1/s
		ss = append(ss, tsdb.Sample{Name: name + "_total", Labels: map[string]string{"host": "h"}, Timestamp: b.Add(time.Duration(i) * 10 * time.Second), Value: float64(i * 10)})
	}
	write(t, s, ss)
	expectScalar(t, s, "rate("+name+"_total[1m])", b.Add(5*time.Minute), 1)
	expectScalar(t, s, "increase("+name+"_total[2m])", b.Add(5*time.Minute), 120)
}

func testRegex(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	var ss []tsdb.Sample
	for i, h := range []string{"web-1", "web-2", "db-1", "webby"} {
		ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"host": h}, Timestamp: b, Value: float64(i + 1)})
	}
	write(t, s, ss)
	expectScalar(t, s, "sum("+name+`{host=~"web-.*"})`, b, 3)
	expectScalar(t, s, "sum("+name+`{host!~"web-.*"})`, b, 7)
	expectScalar(t, s, "count("+name+`{host=~"web.*|db-1"})`, b, 4)
	expectScalar(t, s, "sum("+name+`{host="db-1"})`, b, 3)
}

func testSeries(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	var ss []tsdb.Sample
	for _, h := range []string{"a", "b", "c"} {
		ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"host": h, "dc": "x"}, Timestamp: b, Value: 1})
	}
	ss = append(ss, tsdb.Sample{Name: name + "_other", Labels: map[string]string{"host": "a"}, Timestamp: b, Value: 1})
	write(t, s, ss)
	eventually(t, s, func() string {
		got, err := s.SeriesMatch(ctx(t), name+`{host=~"a|b|c"}`, b.Add(-time.Hour), b.Add(time.Hour))
		if err != nil {
			return fmt.Sprintf("SeriesMatch: %v", err)
		}
		var hosts []string
		for _, l := range got {
			if l["__name__"] != name || l["dc"] != "x" || len(l) != 3 {
				return fmt.Sprintf("unexpected series %v", l)
			}
			hosts = append(hosts, l["host"])
		}
		sort.Strings(hosts)
		if strings.Join(hosts, ",") != "a,b,c" {
			return fmt.Sprintf("SeriesMatch hosts = %v, want a,b,c", hosts)
		}
		return ""
	})
	got, err := s.SeriesMatch(ctx(t), `{__name__=~"`+name+`.*"}`, b.Add(-time.Hour), b.Add(time.Hour))
	if err != nil || len(got) != 4 {
		t.Fatalf("SeriesMatch by name regex = %v, %v; want 4 series", got, err)
	}
	if _, err := s.SeriesMatch(ctx(t), name+`{host=~"(("}`, b, b); err == nil {
		t.Errorf("SeriesMatch with a broken regex succeeded, want an error")
	}
}

func testLabelValues(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	// VictoriaMetrics finds series by day, so the window that must not see
	// this one lies days apart.
	old := b.Add(-72 * time.Hour)
	write(t, s, []tsdb.Sample{
		{Name: name + "_a", Labels: map[string]string{"host": "h2"}, Timestamp: b, Value: 1},
		{Name: name + "_a", Labels: map[string]string{"host": "h1"}, Timestamp: b, Value: 1},
		{Name: name + "_b", Labels: map[string]string{"host": "h1"}, Timestamp: b, Value: 1},
		{Name: name + "_c", Labels: map[string]string{"host": "h3", "other": "x"}, Timestamp: b, Value: 1},
		// Only in an earlier window, days before.
		{Name: name + "_old", Labels: map[string]string{"host": "h9"}, Timestamp: old, Value: 1},
	})
	for _, tc := range []struct {
		label, match string
		want         string
	}{
		{"__name__", `{__name__=~"` + name + `_.*"}`, name + "_a," + name + "_b," + name + "_c"},
		{"__name__", `{__name__=~"` + name + `_.*", host="h1"}`, name + "_a," + name + "_b"},
		{"host", `{__name__=~"` + name + `_(a|b)"}`, "h1,h2"},
		{"other", `{__name__=~"` + name + `_.*"}`, "x"},
		{"missing", `{__name__=~"` + name + `_.*"}`, ""},
	} {
		eventually(t, s, func() string {
			got, err := s.LabelValues(ctx(t), tc.label, tc.match, b.Add(-time.Minute), b.Add(time.Minute))
			if err != nil {
				return fmt.Sprintf("LabelValues(%s, %s): %v", tc.label, tc.match, err)
			}
			if strings.Join(got, ",") != tc.want {
				return fmt.Sprintf("LabelValues(%s, %s) = %v, want %s (sorted)", tc.label, tc.match, got, tc.want)
			}
			return ""
		})
	}
	eventually(t, s, func() string {
		got, err := s.LabelValues(ctx(t), "__name__", `{__name__=~"`+name+`_.*"}`, old.Add(-time.Minute), old.Add(time.Minute))
		if err != nil || strings.Join(got, ",") != name+"_old" {
			return fmt.Sprintf("LabelValues in the earlier window = %v, %v; want %s_old", got, err, name)
		}
		return ""
	})
	if _, err := s.LabelValues(ctx(t), "host", name+`{host=~"(("}`, b, b); err == nil {
		t.Errorf("LabelValues with a broken regex succeeded, want an error")
	}
}

func testManySeries(t *testing.T, _ Harness, s tsdb.Store, name string) {
	const n = MaxSeries / 2
	b := base()
	ss := make([]tsdb.Sample, n)
	for i := range ss {
		ss[i] = tsdb.Sample{Name: name, Labels: map[string]string{"id": fmt.Sprint(i), "grp": fmt.Sprint(i % 10)}, Timestamp: b, Value: float64(i)}
	}
	write(t, s, ss)
	expectScalar(t, s, "count("+name+")", b, n)
	expectScalar(t, s, "sum("+name+")", b, n*(n-1)/2)
	eventually(t, s, func() string {
		res, err := s.Query(ctx(t), "sum by (grp) ("+name+")", b)
		if err != nil || len(res) != 10 {
			return fmt.Sprintf("sum by (grp) = %d series, %v; want 10", len(res), err)
		}
		return ""
	})
}

func testLargeBatch(t *testing.T, _ Harness, s tsdb.Store, name string) {
	const series, points = 100, 1000 // 100k samples in one Write
	b := base().Add(-points * time.Second)
	ss := make([]tsdb.Sample, 0, series*points)
	for p := 0; p < points; p++ {
		for i := 0; i < series; i++ {
			ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"id": fmt.Sprint(i)}, Timestamp: b.Add(time.Duration(p) * time.Second), Value: 1})
		}
	}
	write(t, s, ss)
	end := b.Add(points * time.Second)
	expectScalar(t, s, "sum(count_over_time("+name+"[1h]))", end, series*points)
}

func testTooLarge(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	ss := make([]tsdb.Sample, MaxSeries+50)
	for i := range ss {
		ss[i] = tsdb.Sample{Name: name, Labels: map[string]string{"id": fmt.Sprint(i)}, Timestamp: b, Value: 1}
	}
	write(t, s, ss)
	// Wait until the data is there, via a query that stays under the limit.
	expectScalar(t, s, "count("+name+`{id=~"1.*"})`, b, 161) // 1, 10-19, 100-199, 1000-1049
	for _, tc := range []struct {
		what string
		run  func() error
	}{
		{"too many series", func() error {
			_, err := s.QueryRange(ctx(t), tsdb.QueryRange{Expr: "sum(" + name + ")", Start: b, End: b.Add(time.Minute), Step: 10 * time.Second})
			return err
		}},
		{"too many points", func() error {
			_, err := s.QueryRange(ctx(t), tsdb.QueryRange{Expr: name + `{id="1"}`, Start: b, End: b.Add(MaxPointsPerSeries * time.Second), Step: time.Second})
			return err
		}},
	} {
		err := tc.run()
		if !errors.Is(err, tsdb.ErrTooLarge) {
			t.Errorf("%s: err = %v, want ErrTooLarge", tc.what, err)
			continue
		}
		var tl *tsdb.TooLargeError
		if !errors.As(err, &tl) || tl.Limit == "" {
			t.Errorf("%s: %v does not name its limit", tc.what, err)
		}
		t.Logf("%s: %v", tc.what, err)
	}
}

func testBadNames(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	good := tsdb.Sample{Name: name, Labels: map[string]string{"ok": "yes"}, Timestamp: b, Value: 1}
	many := map[string]string{}
	for i := 0; i <= tsdb.MaxLabels; i++ {
		many[fmt.Sprintf("l%d", i)] = "v"
	}
	for _, tc := range []struct {
		what string
		s    tsdb.Sample
	}{
		{"empty name", tsdb.Sample{Name: ""}},
		{"leading digit", tsdb.Sample{Name: "1abc"}},
		{"dash in name", tsdb.Sample{Name: "a-b"}},
		{"space in name", tsdb.Sample{Name: "a b"}},
		{"dash in label", tsdb.Sample{Name: name, Labels: map[string]string{"bad-label": "x"}}},
		{"colon in label", tsdb.Sample{Name: name, Labels: map[string]string{"a:b": "x"}}},
		{"reserved label", tsdb.Sample{Name: name, Labels: map[string]string{"__name__": "x"}}},
		{"invalid utf8", tsdb.Sample{Name: name, Labels: map[string]string{"l": "\xff"}}},
		{"long value", tsdb.Sample{Name: name, Labels: map[string]string{"l": strings.Repeat("x", tsdb.MaxLabelValueLen+1)}}},
		{"too many labels", tsdb.Sample{Name: name, Labels: many}},
	} {
		bad := tc.s
		bad.Timestamp, bad.Value = b, 2
		err := s.Write(ctx(t), []tsdb.Sample{good, bad})
		var ise *tsdb.InvalidSampleError
		if !errors.As(err, &ise) {
			t.Errorf("%s: Write err = %v, want *tsdb.InvalidSampleError", tc.what, err)
			continue
		}
		if ise.Index != 1 || !strings.Contains(err.Error(), "#1 "+bad.Name+"{") {
			t.Errorf("%s: error %q should name sample #1 %s", tc.what, err, bad.Name)
		}
	}
	// The good sample shared each rejected batch, so nothing may be stored.
	write(t, s, []tsdb.Sample{{Name: name + "_marker", Timestamp: b, Value: 1}})
	expectScalar(t, s, name+"_marker", b, 1)
	res, err := s.Query(ctx(t), name, b)
	if err != nil || len(res) != 0 {
		t.Errorf("after rejected batches Query(%s) = %v, %v; want nothing stored", name, res, err)
	}
}

func testIdempotent(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	var ss []tsdb.Sample
	for i := 0; i < 60; i++ {
		for _, h := range []string{"a", "b"} {
			ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"host": h}, Timestamp: b.Add(time.Duration(i) * time.Second), Value: float64(i)})
		}
	}
	write(t, s, ss)
	expectScalar(t, s, "sum(count_over_time("+name+"[5m]))", b.Add(time.Minute), 120)
	write(t, s, ss) // an agent retrying a batch it already sent
	write(t, s, ss[:60])
	// Dedup may happen at query time; poll until any transient state is gone.
	expectScalar(t, s, "sum(count_over_time("+name+"[5m]))", b.Add(time.Minute), 120)
	expectScalar(t, s, "sum(sum_over_time("+name+"[5m]))", b.Add(time.Minute), 2*59*60/2)
	expectScalar(t, s, "sum("+name+")", b.Add(59*time.Second), 2*59)
}

func testPast(t *testing.T, _ Harness, s tsdb.Store, name string) {
	for _, age := range []time.Duration{3 * time.Hour, 50 * time.Hour, 10 * 24 * time.Hour} {
		at := time.Now().Add(-age).Truncate(time.Second)
		write(t, s, []tsdb.Sample{{Name: name, Labels: map[string]string{"age": age.String()}, Timestamp: at, Value: age.Hours()}})
		expectScalar(t, s, name+`{age="`+age.String()+`"}`, at, age.Hours())
		eventually(t, s, func() string {
			res, err := s.QueryRange(ctx(t), tsdb.QueryRange{Expr: name + `{age="` + age.String() + `"}`, Start: at, End: at, Step: time.Minute})
			if err != nil || len(res) != 1 || len(res[0].Points) != 1 || !res[0].Points[0].T.Equal(at) {
				return fmt.Sprintf("QueryRange at %s = %v, %v", at, res, err)
			}
			return ""
		})
	}
}

func testOutsideWindow(t *testing.T, _ Harness, s tsdb.Store, name string) {
	now := time.Now()
	old := now.Add(-Retention - 48*time.Hour)
	future := now.Add(tsdb.MaxFutureSkew + time.Hour)
	expectStats(t, s, tsdb.WriteStats{Written: 1, DroppedTooOld: 1, DroppedFuture: 1}, func() {
		err := s.Write(ctx(t), []tsdb.Sample{
			{Name: name, Labels: map[string]string{"w": "old"}, Timestamp: old, Value: 1},
			{Name: name, Labels: map[string]string{"w": "future"}, Timestamp: future, Value: 1},
			{Name: name, Labels: map[string]string{"w": "now"}, Timestamp: now.Add(-time.Minute), Value: 1},
		})
		if err != nil {
			t.Fatalf("Write with out-of-window samples: %v (documented behaviour: drop and count)", err)
		}
	})
	write(t, s, nil)
	expectScalar(t, s, "count("+name+")", now.Add(-time.Minute), 1)
	for at, w := range map[time.Time]string{old: "old", future: "future"} {
		res, err := s.Query(ctx(t), name+`{w="`+w+`"}`, at)
		if err != nil || len(res) != 0 {
			t.Errorf("%s sample: Query = %v, %v; want dropped", w, res, err)
		}
	}
}

func testWriteSeries(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base()
	now := time.Now()
	ms := func(d time.Duration) int64 { return b.Add(d).UnixMilli() }
	series := []tsdb.SeriesPoints{
		// Several points of one series, and the same label set under another name.
		{Name: name, Labels: []tsdb.Label{{Name: "host", Value: "a"}, {Name: "zone", Value: "z1"}},
			TimesMs: []int64{ms(0), ms(10 * time.Second), ms(20 * time.Second)}, Values: []float64{1, 2, 3}},
		{Name: name, Labels: []tsdb.Label{{Name: "host", Value: "b"}}, TimesMs: []int64{ms(20 * time.Second)}, Values: []float64{10}},
		{Name: name + "_other", Labels: []tsdb.Label{{Name: "host", Value: "a"}}, TimesMs: []int64{ms(0)}, Values: []float64{5}},
		// Points outside the window are dropped one by one, the rest kept.
		{Name: name, Labels: []tsdb.Label{{Name: "host", Value: "c"}},
			TimesMs: []int64{now.Add(-Retention - 48*time.Hour).UnixMilli(), ms(0), now.Add(tsdb.MaxFutureSkew + time.Hour).UnixMilli()},
			Values:  []float64{100, 7, 100}},
		{Name: name + "_empty"},
	}
	expectStats(t, s, tsdb.WriteStats{Written: 12, DroppedTooOld: 2, DroppedFuture: 2}, func() {
		for range 2 { // a resent batch stores nothing twice
			if err := s.WriteSeries(ctx(t), series); err != nil {
				t.Fatalf("WriteSeries: %v", err)
			}
		}
	})
	write(t, s, nil)
	expectScalar(t, s, name+`{host="a",zone="z1"}`, b.Add(20*time.Second), 3)
	expectScalar(t, s, "sum(count_over_time("+name+"[5m]))", b.Add(time.Minute), 5)
	expectScalar(t, s, "sum(sum_over_time("+name+"[5m]))", b.Add(time.Minute), 1+2+3+10+7)
	expectScalar(t, s, name+`_other{host="a"}`, b, 5)
	eventually(t, s, func() string {
		got, err := s.SeriesMatch(ctx(t), name+`{host="a"}`, b.Add(-time.Hour), b.Add(time.Hour))
		if err != nil || len(got) != 1 || got[0]["zone"] != "z1" || len(got[0]) != 3 {
			return fmt.Sprintf("SeriesMatch = %v, %v; want one series with __name__, host and zone", got, err)
		}
		return ""
	})
}

func testWriteSeriesRejects(t *testing.T, _ Harness, s tsdb.Store, name string) {
	b := base().UnixMilli()
	good := tsdb.SeriesPoints{Name: name, Labels: []tsdb.Label{{Name: "ok", Value: "yes"}}, TimesMs: []int64{b}, Values: []float64{1}}
	for _, tc := range []struct {
		what   string
		s      tsdb.SeriesPoints
		reason string
	}{
		{"bad name", tsdb.SeriesPoints{Name: "a-b"}, "metric name"},
		{"bad label", tsdb.SeriesPoints{Name: name, Labels: []tsdb.Label{{Name: "a:b", Value: "x"}}}, "label name"},
		{"unsorted labels", tsdb.SeriesPoints{Name: name, Labels: []tsdb.Label{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}}}, "sorted"},
		{"duplicate label", tsdb.SeriesPoints{Name: name, Labels: []tsdb.Label{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}, "duplicates"},
		{"lengths differ", tsdb.SeriesPoints{Name: name, TimesMs: []int64{b, b + 1}, Values: []float64{1}}, "2 times but 1 values"},
	} {
		err := s.WriteSeries(ctx(t), []tsdb.SeriesPoints{good, tc.s})
		var ise *tsdb.InvalidSampleError
		if !errors.As(err, &ise) {
			t.Errorf("%s: WriteSeries err = %v, want *tsdb.InvalidSampleError", tc.what, err)
			continue
		}
		if ise.Index != 1 || !strings.Contains(err.Error(), "#1 "+tc.s.Name+"{") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: error %q should name series #1 %s and say %q", tc.what, err, tc.s.Name, tc.reason)
		}
	}
	write(t, s, []tsdb.Sample{{Name: name + "_marker", Timestamp: time.UnixMilli(b), Value: 1}})
	expectScalar(t, s, name+"_marker", time.UnixMilli(b), 1)
	res, err := s.Query(ctx(t), name, time.UnixMilli(b))
	if err != nil || len(res) != 0 {
		t.Errorf("after rejected calls Query(%s) = %v, %v; want nothing stored", name, res, err)
	}
}

func testClosed(t *testing.T, _ Harness, s tsdb.Store, name string) {
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if err := s.Write(ctx(t), []tsdb.Sample{{Name: name, Timestamp: time.Now(), Value: 1}}); err == nil {
		t.Errorf("Write after Close succeeded")
	}
	if err := s.WriteSeries(ctx(t), []tsdb.SeriesPoints{{Name: name, TimesMs: []int64{time.Now().UnixMilli()}, Values: []float64{1}}}); err == nil {
		t.Errorf("WriteSeries after Close succeeded")
	}
	if _, err := s.Query(ctx(t), name, time.Now()); err == nil {
		t.Errorf("Query after Close succeeded")
	}
}

func testRestart(t *testing.T, h Harness, s tsdb.Store, name string) {
	b := base()
	var ss []tsdb.Sample
	for i := 0; i < 100; i++ {
		ss = append(ss, tsdb.Sample{Name: name, Labels: map[string]string{"id": fmt.Sprint(i % 5)}, Timestamp: b.Add(time.Duration(i) * time.Second), Value: float64(i)})
	}
	write(t, s, ss)
	expectScalar(t, s, "sum(count_over_time("+name+"[10m]))", b.Add(100*time.Second), 100)
	s = h.Reopen(t, s)
	expectScalar(t, s, "sum(count_over_time("+name+"[10m]))", b.Add(100*time.Second), 100)
	expectScalar(t, s, "sum(sum_over_time("+name+"[10m]))", b.Add(100*time.Second), 99*100/2)
	// And it still takes writes.
	write(t, s, []tsdb.Sample{{Name: name, Labels: map[string]string{"id": "new"}, Timestamp: b.Add(200 * time.Second), Value: 5}})
	expectScalar(t, s, name+`{id="new"}`, b.Add(200*time.Second), 5)
}
