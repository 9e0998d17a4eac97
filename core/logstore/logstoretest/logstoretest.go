// Package logstoretest is the contract suite every logstore.Store backend
// must pass, plus a shared write benchmark.
package logstoretest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
)

// Opener returns a fresh, empty store; the suite closes it.
type Opener func(t testing.TB) logstore.Store

// Run runs the contract suite; each subtest gets its own store from open.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s logstore.Store)
	}{
		{"Filters", testFilters},
		{"Grep", testGrep},
		{"Injection", testInjection},
		{"LimitAndOrder", testLimitAndOrder},
		{"Stats", testStats},
		{"StatsByFieldExceptApp", testStatsByField},
		{"Trace", testTrace},
		{"DropBefore", testDropBefore},
		{"HostileContent", testHostileContent},
		{"Timestamps", testTimestamps},
		{"Fields", testFields},
		{"FieldFilters", testFieldFilters},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Invalid", testInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// base is a recent whole hour, so entries are inside any retention and
// stats buckets are predictable. Three hours back keeps base+2h59m in the past.
func base() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func write(t testing.TB, s logstore.Store, entries ...logstore.Entry) {
	t.Helper()
	if err := s.Write(ctx(t), entries); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func query(t testing.TB, s logstore.Store, q logstore.Query) []logstore.Entry {
	t.Helper()
	out, err := s.Query(ctx(t), q)
	if err != nil {
		t.Fatalf("Query(%+v): %v", q, err)
	}
	return out
}

func messages(es []logstore.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message
	}
	return out
}

func sameEntry(a, b logstore.Entry) bool {
	return a.Time.Equal(b.Time) && a.Host == b.Host && a.App == b.App && a.Level == b.Level &&
		a.TraceID == b.TraceID && a.Message == b.Message && a.Cluster == b.Cluster &&
		maps.Equal(a.Fields, b.Fields)
}

// corpus: 6 entries over two hosts, two apps, three levels, one second apart
// (with sub-second parts, to check nanoseconds survive), newest last.
func corpus() []logstore.Entry {
	b := base().Add(10 * time.Minute)
	mk := func(i int, host, app, level, trace, msg string) logstore.Entry {
		return logstore.Entry{
			Time: b.Add(time.Duration(i)*time.Second + 123456789), Host: host, App: app,
			Level: level, TraceID: trace, Message: msg, Cluster: "c1",
		}
	}
	return []logstore.Entry{
		mk(0, "h1", "api", "info", "t1", "m0 request started"),
		mk(1, "h1", "api", "error", "t1", "m1 request FAILED"),
		mk(2, "h2", "api", "warn", "t2", "m2 slow request"),
		mk(3, "h2", "db", "info", "", "m3 checkpoint"),
		mk(4, "h1", "db", "ERROR", "", "m4 disk full"), // level is lower-cased on write
		mk(5, "h2", "db", "info", "t2", "m5 checkpoint done"),
	}
}

func testFilters(t *testing.T, s logstore.Store) {
	in := corpus()
	write(t, s, in...)
	got := query(t, s, logstore.Query{})
	if len(got) != len(in) {
		t.Fatalf("all: got %d entries, want %d", len(got), len(in))
	}
	// Full round trip of the newest entry.
	want := in[5]
	if !sameEntry(got[0], want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got[0], want)
	}
	b := in[0].Time
	for _, tc := range []struct {
		name string
		q    logstore.Query
		want []string
	}{
		{"host", logstore.Query{Host: "h1"}, []string{"m4 disk full", "m1 request FAILED", "m0 request started"}},
		{"app", logstore.Query{App: "db"}, []string{"m5 checkpoint done", "m4 disk full", "m3 checkpoint"}},
		{"trace", logstore.Query{TraceID: "t2"}, []string{"m5 checkpoint done", "m2 slow request"}},
		{"level", logstore.Query{Levels: []string{"error"}}, []string{"m4 disk full", "m1 request FAILED"}},
		{"levels any case", logstore.Query{Levels: []string{"WARN", "Error"}}, []string{"m4 disk full", "m2 slow request", "m1 request FAILED"}},
		{"host+app", logstore.Query{Host: "h2", App: "db"}, []string{"m5 checkpoint done", "m3 checkpoint"}},
		{"since inclusive", logstore.Query{Since: in[4].Time}, []string{"m5 checkpoint done", "m4 disk full"}},
		{"until exclusive", logstore.Query{Until: in[1].Time}, []string{"m0 request started"}},
		{"range", logstore.Query{Since: b.Add(time.Second), Until: b.Add(3 * time.Second)}, []string{"m2 slow request", "m1 request FAILED"}},
		{"sub-second since", logstore.Query{Since: in[5].Time.Add(-time.Nanosecond)}, []string{"m5 checkpoint done"}},
		{"sub-second until", logstore.Query{Until: in[0].Time.Add(time.Nanosecond)}, []string{"m0 request started"}},
		{"no match", logstore.Query{Host: "h3"}, []string{}},
		{"combined", logstore.Query{Host: "h1", Levels: []string{"error"}, Grep: "disk"}, []string{"m4 disk full"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := messages(query(t, s, tc.q)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func testGrep(t *testing.T, s logstore.Store) {
	t0 := base()
	lines := []string{
		"GET /api/v1/items?id=42 200",
		"value a.b changed",
		"value axb changed",
		"Connection refused",
		"connection reset",
		"unbalanced (paren and [bracket",
		`quote " and backslash \ here`,
		"percent 100% done_ok",
		"multi\nline",
		"cost $1 @home ?q :name {0}",
	}
	var es []logstore.Entry
	for i, l := range lines {
		es = append(es, logstore.Entry{Time: t0.Add(time.Duration(i) * time.Second), Host: "h", App: "a", Message: l})
	}
	write(t, s, es...)
	for _, tc := range []struct{ grep, want string }{
		{"?id=42", lines[0]},
		{"a.b", lines[1]},        // literal dot, not a regexp
		{"Connection", lines[3]}, // case-sensitive
		{"onnection re", lines[3] + "|" + lines[4]},
		{"(paren and [", lines[5]},
		{`" and backslash \`, lines[6]},
		{"100% done_", lines[7]},
		{"i\nl", lines[8]},
		{"$1 @home ?q :name {0}", lines[9]}, // binding and LogsQL syntax characters
		{"@home", lines[9]},
		{"nothing like this", ""},
	} {
		got := messages(query(t, s, logstore.Query{Grep: tc.grep}))
		slices.Sort(got)
		want := []string{}
		if tc.want != "" {
			want = strings.Split(tc.want, "|")
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("grep %q: got %q, want %q", tc.grep, got, want)
		}
	}
}

// testInjection: filter values are data, never query syntax, in either
// backend's query language.
func testInjection(t *testing.T, s logstore.Store) {
	t0 := base()
	weird := `we"ird\host' OR 1=1 -- ) | * {x="y"}`
	write(t, s,
		logstore.Entry{Time: t0, Host: "h1", App: "a", Message: "plain"},
		logstore.Entry{Time: t0.Add(time.Second), Host: weird, App: "a'b", Message: "weird"},
	)
	for _, tc := range []struct {
		q    logstore.Query
		want int
	}{
		{logstore.Query{Host: "' OR 1=1 --"}, 0},
		{logstore.Query{Host: `" OR *`}, 0},
		{logstore.Query{Host: `h1' OR host != '`}, 0},
		{logstore.Query{App: `a" OR app:*`}, 0},
		{logstore.Query{TraceID: `\' OR 1=1 --`}, 0},
		{logstore.Query{Levels: []string{"') OR 1=1 --"}}, 0},
		{logstore.Query{Grep: "' OR 1=1 --"}, 0},
		{logstore.Query{Grep: ".*"}, 0},
		{logstore.Query{Host: weird}, 1},
		{logstore.Query{App: "a'b"}, 1},
	} {
		if got := query(t, s, tc.q); len(got) != tc.want {
			t.Errorf("%+v: got %d entries, want %d", tc.q, len(got), tc.want)
		}
	}
	// Bounds outside what a backend can represent still mean what they say.
	old, far := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		q    logstore.Query
		want int
	}{
		{logstore.Query{Since: old}, 2},
		{logstore.Query{Until: far}, 2},
		{logstore.Query{Since: old, Until: far}, 2},
		{logstore.Query{Until: old}, 0},
		{logstore.Query{Since: far}, 0},
	} {
		if got := query(t, s, tc.q); len(got) != tc.want {
			t.Errorf("since %s until %s: got %d entries, want %d", tc.q.Since, tc.q.Until, len(got), tc.want)
		}
	}
	if got := query(t, s, logstore.Query{Host: weird}); len(got) == 1 && got[0].Host != weird {
		t.Errorf("weird host round trip: got %q, want %q", got[0].Host, weird)
	}
}

func testLimitAndOrder(t *testing.T, s logstore.Store) {
	t0 := base()
	const n = logstore.DefaultLimit + 5
	es := make([]logstore.Entry, n)
	for i := range es {
		es[i] = logstore.Entry{Time: t0.Add(time.Duration(i) * time.Millisecond), Host: "h", App: "a", Message: strconv.Itoa(i)}
	}
	// Written in reverse, so ordering cannot come from insertion order.
	slices.Reverse(es)
	write(t, s, es...)

	got := query(t, s, logstore.Query{})
	if len(got) != logstore.DefaultLimit {
		t.Fatalf("default limit: got %d, want %d", len(got), logstore.DefaultLimit)
	}
	for i := 1; i < len(got); i++ {
		if !got[i-1].Time.After(got[i].Time) {
			t.Fatalf("Query must be newest first: entry %d (%s) is not after entry %d (%s)", i-1, got[i-1].Time, i, got[i].Time)
		}
	}
	if got[0].Message != strconv.Itoa(n-1) {
		t.Errorf("newest first: got %q, want %q", got[0].Message, strconv.Itoa(n-1))
	}
	got = query(t, s, logstore.Query{Limit: 3})
	if want := []string{strconv.Itoa(n - 1), strconv.Itoa(n - 2), strconv.Itoa(n - 3)}; !slices.Equal(messages(got), want) {
		t.Errorf("limit 3: got %q, want %q", messages(got), want)
	}
	got = query(t, s, logstore.Query{Limit: logstore.MaxLimit})
	if len(got) != n {
		t.Errorf("limit max: got %d, want %d", len(got), n)
	}
	if _, err := s.Query(ctx(t), logstore.Query{Limit: logstore.MaxLimit + 1}); !errors.Is(err, logstore.ErrTooLarge) {
		t.Errorf("limit max+1: got %v, want ErrTooLarge", err)
	}
}

func testStats(t *testing.T, s logstore.Store) {
	h := base()
	at := func(d time.Duration, host, app, level string) logstore.Entry {
		return logstore.Entry{Time: h.Add(d), Host: host, App: app, Level: level, Message: "x"}
	}
	write(t, s,
		at(1*time.Minute, "h1", "api", "info"),
		at(2*time.Minute, "h1", "api", "error"),
		at(3*time.Minute, "h2", "api", "warn"),
		at(4*time.Minute, "h2", "db", "info"),
		at(61*time.Minute, "h1", "db", "fatal"),
		at(62*time.Minute, "h2", "db", "warning"),
		at(63*time.Minute, "h2", "db", ""),
		at(121*time.Minute, "h1", "api", "info"),
	)
	h1, h2 := h.Add(time.Hour), h.Add(2*time.Hour)
	bk := func(start time.Time, key string, n, e, w int64) logstore.Bucket {
		return logstore.Bucket{Start: start, Key: key, Count: n, Errors: e, Warnings: w}
	}
	for _, tc := range []struct {
		by       string
		interval time.Duration
		q        logstore.Query
		want     []logstore.Bucket
	}{
		{logstore.ByLevel, time.Hour, logstore.Query{}, []logstore.Bucket{
			bk(h, "error", 1, 1, 0), bk(h, "info", 2, 0, 0), bk(h, "warn", 1, 0, 1),
			bk(h1, "", 1, 0, 0), bk(h1, "fatal", 1, 1, 0), bk(h1, "warning", 1, 0, 1),
			bk(h2, "info", 1, 0, 0),
		}},
		{logstore.ByApp, time.Hour, logstore.Query{}, []logstore.Bucket{
			bk(h, "api", 3, 1, 1), bk(h, "db", 1, 0, 0),
			bk(h1, "db", 3, 1, 1),
			bk(h2, "api", 1, 0, 0),
		}},
		{logstore.ByHost, 2 * time.Hour, logstore.Query{App: "db"}, nil}, // filled below: depends on 2h alignment
		{logstore.ByHost, time.Hour, logstore.Query{Since: h1, Until: h2}, []logstore.Bucket{
			bk(h1, "h1", 1, 1, 0), bk(h1, "h2", 2, 0, 1),
		}},
		{logstore.ByHost, 24 * time.Hour, logstore.Query{Levels: []string{"info"}}, nil},
	} {
		want := tc.want
		if want == nil {
			want = expectBuckets(corpusForStats(h), tc.by, tc.interval, tc.q)
		}
		got, err := s.Stats(ctx(t), tc.q, tc.by, tc.interval)
		if err != nil {
			t.Fatalf("Stats by %s/%s: %v", tc.by, tc.interval, err)
		}
		if !slices.EqualFunc(got, want, func(a, b logstore.Bucket) bool {
			return a.Start.Equal(b.Start) && a.Key == b.Key && a.Count == b.Count && a.Errors == b.Errors && a.Warnings == b.Warnings
		}) {
			t.Errorf("Stats by %s every %s (%+v):\n got %v\nwant %v", tc.by, tc.interval, tc.q, got, want)
		}
	}
	st := logstore.NewStats(logstore.ByApp, time.Hour, mustStats(t, s, logstore.ByApp, time.Hour))
	tot := st.Totals()
	if len(tot) != 3 || tot[0].Count != 4 || tot[0].ErrorRate() != 0.25 || tot[1].WarningRate() != 1.0/3 {
		t.Errorf("Totals: got %+v", tot)
	}
}

// testStatsByField counts entries by a field, leaving one app out, as the
// statistics tier counts events by check and log lines apart from events.
func testStatsByField(t *testing.T, s logstore.Store) {
	h := base()
	at := func(d time.Duration, app, level, check string) logstore.Entry {
		e := logstore.Entry{Time: h.Add(d), Host: "h1", App: app, Level: level, Message: "x"}
		if check != "" {
			e.Fields = map[string]string{"check": check, "other": "o"}
		}
		return e
	}
	write(t, s,
		at(time.Minute, "ev", "error", "disk"),
		at(2*time.Minute, "ev", "info", "disk"),
		at(3*time.Minute, "ev", "warn", "load"),
		at(4*time.Minute, "ev", "info", ""),
		at(5*time.Minute, "api", "error", "disk"),
		at(6*time.Minute, "api", "info", ""),
	)
	bk := func(key string, n, e, w int64) logstore.Bucket {
		return logstore.Bucket{Start: logstore.DayStart(h), Key: key, Count: n, Errors: e, Warnings: w}
	}
	for _, tc := range []struct {
		by   string
		q    logstore.Query
		want []logstore.Bucket
	}{
		{logstore.ByField("check"), logstore.Query{App: "ev"}, []logstore.Bucket{bk("", 1, 0, 0), bk("disk", 2, 1, 0), bk("load", 1, 0, 1)}},
		{logstore.ByField("check"), logstore.Query{}, []logstore.Bucket{bk("", 2, 0, 0), bk("disk", 3, 2, 0), bk("load", 1, 0, 1)}},
		{logstore.ByLevel, logstore.Query{ExceptApp: "ev"}, []logstore.Bucket{bk("error", 1, 1, 0), bk("info", 1, 0, 0)}},
		{logstore.ByApp, logstore.Query{ExceptApp: "ev"}, []logstore.Bucket{bk("api", 2, 1, 0)}},
		{logstore.ByField("nope"), logstore.Query{ExceptApp: "api"}, []logstore.Bucket{bk("", 4, 1, 1)}},
	} {
		got, err := s.Stats(ctx(t), tc.q, tc.by, 24*time.Hour)
		if err != nil {
			t.Fatalf("Stats by %s (%+v): %v", tc.by, tc.q, err)
		}
		if !slices.EqualFunc(got, tc.want, func(a, b logstore.Bucket) bool {
			return a.Start.Equal(b.Start) && a.Key == b.Key && a.Count == b.Count && a.Errors == b.Errors && a.Warnings == b.Warnings
		}) {
			t.Errorf("Stats by %s (%+v):\n got %v\nwant %v", tc.by, tc.q, got, tc.want)
		}
	}
	if got := messages(query(t, s, logstore.Query{ExceptApp: "ev"})); len(got) != 2 {
		t.Errorf("Query leaving out app ev: %d entries, want 2", len(got))
	}
	for _, by := range []string{"field:", "field:a b", `field:x")`, "field:" + strings.Repeat("k", logstore.MaxFieldKeyBytes+1)} {
		if _, err := s.Stats(ctx(t), logstore.Query{}, by, time.Hour); !errors.Is(err, logstore.ErrInvalidQuery) {
			t.Errorf("Stats by %q: err = %v, want ErrInvalidQuery", by, err)
		}
	}
}

func mustStats(t *testing.T, s logstore.Store, by string, interval time.Duration) []logstore.Bucket {
	t.Helper()
	b, err := s.Stats(ctx(t), logstore.Query{}, by, interval)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corpusForStats mirrors the entries written by testStats, for cases whose
// buckets depend on alignment to the epoch rather than to base().
func corpusForStats(h time.Time) []logstore.Entry {
	at := func(d time.Duration, host, app, level string) logstore.Entry {
		return logstore.Entry{Time: h.Add(d), Host: host, App: app, Level: level}
	}
	return []logstore.Entry{
		at(1*time.Minute, "h1", "api", "info"), at(2*time.Minute, "h1", "api", "error"),
		at(3*time.Minute, "h2", "api", "warn"), at(4*time.Minute, "h2", "db", "info"),
		at(61*time.Minute, "h1", "db", "fatal"), at(62*time.Minute, "h2", "db", "warning"),
		at(63*time.Minute, "h2", "db", ""), at(121*time.Minute, "h1", "api", "info"),
	}
}

// expectBuckets is the reference implementation of Stats.
func expectBuckets(es []logstore.Entry, by string, interval time.Duration, q logstore.Query) []logstore.Bucket {
	type k struct {
		start int64
		key   string
	}
	m := map[k]*logstore.Bucket{}
	for _, e := range es {
		if q.App != "" && e.App != q.App || len(q.Levels) > 0 && !slices.Contains(q.Levels, e.Level) {
			continue
		}
		key := map[string]string{logstore.ByLevel: e.Level, logstore.ByApp: e.App, logstore.ByHost: e.Host}[by]
		secs := int64(interval / time.Second)
		start := e.Time.Unix() / secs * secs
		b := m[k{start, key}]
		if b == nil {
			b = &logstore.Bucket{Start: time.Unix(start, 0).UTC(), Key: key}
			m[k{start, key}] = b
		}
		b.Count++
		if logstore.IsErrorLevel(e.Level) {
			b.Errors++
		}
		if logstore.IsWarningLevel(e.Level) {
			b.Warnings++
		}
	}
	var out []logstore.Bucket
	for _, b := range m {
		out = append(out, *b)
	}
	logstore.SortBuckets(out)
	return out
}

func testTrace(t *testing.T, s logstore.Store) {
	t0 := base()
	var es []logstore.Entry
	for i := 0; i < 30; i++ {
		trace := "trace-a"
		if i%3 == 0 {
			trace = "trace-b"
		}
		es = append(es, logstore.Entry{
			Time: t0.Add(time.Duration(i) * 7 * time.Millisecond), Host: fmt.Sprintf("host%d", i%4),
			App: fmt.Sprintf("app%d", i%2), TraceID: trace, Message: strconv.Itoa(i),
		})
	}
	// Separate writes per host, in reverse time order.
	for h := 3; h >= 0; h-- {
		var part []logstore.Entry
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Host == fmt.Sprintf("host%d", h) {
				part = append(part, es[i])
			}
		}
		write(t, s, part...)
	}
	got, err := s.Trace(ctx(t), "trace-a", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	hosts := map[string]bool{}
	for _, e := range es {
		if e.TraceID == "trace-a" {
			want = append(want, e.Message)
		}
	}
	for _, e := range got {
		hosts[e.Host] = true
	}
	if !slices.Equal(messages(got), want) {
		t.Errorf("trace-a: got %q, want %q (oldest first)", messages(got), want)
	}
	if len(hosts) != 4 {
		t.Errorf("trace-a spans 4 hosts, got %d", len(hosts))
	}
	got, err = s.Trace(ctx(t), "trace-b", t0.Add(10*time.Millisecond), t0.Add(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"3", "6", "9", "12"}; !slices.Equal(messages(got), want) {
		t.Errorf("trace-b in range: got %q, want %q", messages(got), want)
	}
	if got, err := s.Trace(ctx(t), "trace-none", time.Time{}, time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("unknown trace: got %d entries, err %v", len(got), err)
	}
}

func testDropBefore(t *testing.T, s logstore.Store) {
	today := logstore.DayStart(time.Now())
	day := func(n int) time.Time { return today.Add(time.Duration(-n)*24*time.Hour + time.Hour) }
	write(t, s,
		logstore.Entry{Time: day(3), Host: "h", App: "a", Message: "day-3"},
		logstore.Entry{Time: day(2), Host: "h", App: "a", Message: "day-2"},
		logstore.Entry{Time: day(1), Host: "h", App: "a", Message: "day-1"},
		logstore.Entry{Time: time.Now().Add(-time.Minute), Host: "h", App: "a", Message: "today"},
	)
	if got := messages(query(t, s, logstore.Query{})); len(got) != 4 {
		t.Fatalf("before drop: got %q", got)
	}
	// Cut in the middle of day -1: days -3 and -2 end before it and go;
	// day -1 contains the cut and stays.
	if err := s.DropBefore(ctx(t), today.Add(-12*time.Hour)); err != nil {
		t.Fatalf("DropBefore: %v", err)
	}
	if got, want := messages(query(t, s, logstore.Query{})), []string{"today", "day-1"}; !slices.Equal(got, want) {
		t.Errorf("after drop: got %q, want %q", got, want)
	}
	// Dropping is idempotent, and the store still takes writes for dropped days.
	if err := s.DropBefore(ctx(t), today.Add(-12*time.Hour)); err != nil {
		t.Fatalf("second DropBefore: %v", err)
	}
	write(t, s, logstore.Entry{Time: day(3).Add(time.Minute), Host: "h", App: "a", Message: "late day-3"})
	if got, want := messages(query(t, s, logstore.Query{})), []string{"today", "day-1", "late day-3"}; !slices.Equal(got, want) {
		t.Errorf("after late write: got %q, want %q", got, want)
	}
}

func testHostileContent(t *testing.T, s logstore.Store) {
	t0 := base()
	big := strings.Repeat("0123456789abcdé", (1<<20)/16) // ~1 MiB, multi-byte runes across the cut
	write(t, s,
		logstore.Entry{Time: t0, Host: "h\xff", App: "a", Level: "in\xfefo", Message: "bad \xff\xfe utf8 \xc3"},
		logstore.Entry{Time: t0.Add(time.Second), Host: "h", App: "a", Message: big},
		logstore.Entry{Time: t0.Add(2 * time.Second), Host: "h", App: "a", Message: "nul\x00byte and \x1b[31mcolor\x1b[0m"},
	)
	got := query(t, s, logstore.Query{})
	if len(got) != 3 {
		t.Fatalf("got %d entries, want 3", len(got))
	}
	if got[0].Message != "nul\x00byte and \x1b[31mcolor\x1b[0m" {
		t.Errorf("control characters: got %q", got[0].Message)
	}
	m := got[1]
	if len(m.Message) > logstore.MaxMessageBytes || len(m.Message) < logstore.MaxMessageBytes-4 || !strings.HasPrefix(big, m.Message) {
		t.Errorf("big message: got %d bytes, want a prefix of at most %d", len(m.Message), logstore.MaxMessageBytes)
	}
	if m.Fields[logstore.FieldTruncated] != strconv.Itoa(len(big)) {
		t.Errorf("big message: %s = %q, want %d", logstore.FieldTruncated, m.Fields[logstore.FieldTruncated], len(big))
	}
	u := got[2]
	if u.Message != "bad \uFFFD utf8 \uFFFD" || u.Host != "h\uFFFD" || u.Level != "in\uFFFDfo" {
		t.Errorf("invalid UTF-8 not made valid: %+q", u)
	}
	// The stored, repaired host is queryable both ways.
	if n := len(query(t, s, logstore.Query{Host: "h\xff"})); n != 1 {
		t.Errorf("query by invalid-UTF-8 host: got %d, want 1", n)
	}
}

func testTimestamps(t *testing.T, s logstore.Store) {
	before := time.Now()
	future := before.Add(10 * 24 * time.Hour).UTC()
	err := s.Write(ctx(t), []logstore.Entry{
		{Time: future, Host: "h", App: "a", Message: "future"},
		{Time: before.Add(-400 * 24 * time.Hour), Host: "h", App: "a", Message: "ancient"},
		{Time: time.Unix(0, 0), Host: "h", App: "a", Message: "epoch"},
		{Host: "h", App: "a", Message: "zero time"},
		{Time: before.Add(-time.Hour).In(time.FixedZone("X", 5*3600)), Host: "h", App: "a", Message: "other zone"},
	})
	if !errors.Is(err, logstore.ErrRejected) || !strings.Contains(err.Error(), "2 entries") {
		t.Errorf("Write with ancient entries: got %v, want ErrRejected for 2 entries", err)
	}
	after := time.Now()
	got := query(t, s, logstore.Query{})
	byMsg := map[string]logstore.Entry{}
	for _, e := range got {
		byMsg[e.Message] = e
	}
	if len(got) != 3 {
		t.Fatalf("got %q, want future, zero time and other zone", messages(got))
	}
	f := byMsg["future"]
	if f.Time.Before(before.Add(-time.Second)) || f.Time.After(after) {
		t.Errorf("future entry: time %s not clamped to the write time", f.Time)
	}
	if f.Fields[logstore.FieldOrigTime] != future.Format(time.RFC3339Nano) {
		t.Errorf("future entry: %s = %q, want %q", logstore.FieldOrigTime, f.Fields[logstore.FieldOrigTime], future.Format(time.RFC3339Nano))
	}
	if z := byMsg["zero time"]; z.Time.Before(before.Add(-time.Second)) || z.Time.After(after) {
		t.Errorf("zero time: got %s, want the write time", z.Time)
	}
	if o := byMsg["other zone"]; !o.Time.Equal(before.Add(-time.Hour)) || o.Time.Location() != time.UTC {
		t.Errorf("other zone: got %s, want %s in UTC", o.Time, before.Add(-time.Hour).UTC())
	}
	// Within MaxFuture is kept as is.
	soon := time.Now().Add(time.Hour).UTC()
	write(t, s, logstore.Entry{Time: soon, Host: "h", App: "a", Message: "soon"})
	if got := query(t, s, logstore.Query{Limit: 1}); len(got) != 1 || !got[0].Time.Equal(soon) {
		t.Errorf("entry an hour ahead: got %+v, want time %s", got, soon)
	}
}

func testFields(t *testing.T, s logstore.Store) {
	t0 := base()
	fields := map[string]string{
		"user":           "alice",
		"http.status":    "503",
		"with space":     "v w",
		`quo"te'`:        `va"l'ue\`,
		"unicode-ключ":   "значение",
		"level":          "shadows nothing", // a user field named like a core field
		"_msg":           "not the message",
		"empty":          "", // dropped: empty values are not stored
		"":               "no key",
		"multi\nline":    "a\nb",
		"number_like_42": "42",
	}
	many := map[string]string{}
	for i := 0; i < logstore.MaxFields+10; i++ {
		many[fmt.Sprintf("k%03d", i)] = "v"
	}
	write(t, s,
		logstore.Entry{Time: t0, Host: "h", App: "a", Level: "info", Message: "with fields", Fields: fields},
		logstore.Entry{Time: t0.Add(time.Second), Host: "h", App: "a", Message: "many fields", Fields: many},
		logstore.Entry{Time: t0.Add(2 * time.Second), Host: "h", App: "a", Message: "no fields"},
	)
	got := query(t, s, logstore.Query{})
	if len(got) != 3 {
		t.Fatalf("got %d entries, want 3", len(got))
	}
	want := maps.Clone(fields)
	delete(want, "empty")
	delete(want, "")
	if !maps.Equal(got[2].Fields, want) {
		t.Errorf("fields round trip:\n got %q\nwant %q", got[2].Fields, want)
	}
	if got[2].Level != "info" || got[2].Message != "with fields" {
		t.Errorf("user fields must not shadow core fields: %+v", got[2])
	}
	if n := len(got[1].Fields); n != logstore.MaxFields+1 || got[1].Fields[logstore.FieldsDropped] != "10" {
		t.Errorf("many fields: got %d fields, %s=%q; want %d and 10", n, logstore.FieldsDropped, got[1].Fields[logstore.FieldsDropped], logstore.MaxFields+1)
	}
	if len(got[0].Fields) != 0 {
		t.Errorf("no fields: got %q", got[0].Fields)
	}
	if len(fields) != 11 || fields["empty"] != "" {
		t.Errorf("Write modified the caller's Fields map")
	}
}

// testFieldFilters: Query.Fields selects by structured fields, exactly,
// whatever the message says.
func testFieldFilters(t *testing.T, s logstore.Store) {
	t0 := base()
	write(t, s,
		logstore.Entry{Time: t0, Host: "h1", App: "a", Message: "m1", Fields: map[string]string{"check": "disk", "outcome": "processed"}},
		logstore.Entry{Time: t0.Add(time.Second), Host: "h1", App: "a", Message: "m2", Fields: map[string]string{"check": "disk", "outcome": "silenced"}},
		logstore.Entry{Time: t0.Add(2 * time.Second), Host: "h2", App: "a", Message: "m3 check=disk outcome=processed", Fields: map[string]string{"check": "disk-io", "outcome": "processed"}},
		logstore.Entry{Time: t0.Add(3 * time.Second), Host: "h2", App: "a", Message: "m4", Fields: map[string]string{"check": `q"uo'te\`}},
		logstore.Entry{Time: t0.Add(4 * time.Second), Host: "h2", App: "a", Message: "m5"},
	)
	for _, tc := range []struct {
		name   string
		fields map[string]string
		want   []string
	}{
		{"one field", map[string]string{"check": "disk"}, []string{"m2", "m1"}},
		{"exact, not a prefix or the message", map[string]string{"check": "dis"}, nil},
		{"all given", map[string]string{"check": "disk", "outcome": "processed"}, []string{"m1"}},
		{"another field", map[string]string{"outcome": "processed"}, []string{"m3 check=disk outcome=processed", "m1"}},
		{"quotes are values", map[string]string{"check": `q"uo'te\`}, []string{"m4"}},
		{"empty matches a missing field", map[string]string{"outcome": ""}, []string{"m5", "m4"}},
		{"unknown field", map[string]string{"nosuch": "x"}, nil},
	} {
		got := messages(query(t, s, logstore.Query{Fields: tc.fields}))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Fields %q: got %q, want %q", tc.name, tc.fields, got, tc.want)
		}
	}
	// Stats count what Query finds.
	b, err := s.Stats(ctx(t), logstore.Query{Fields: map[string]string{"check": "disk"}}, logstore.ByHost, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || b[0].Key != "h1" || b[0].Count != 2 {
		t.Errorf("Stats with Fields check=disk: got %+v, want h1: 2", b)
	}
	if _, err := s.Query(ctx(t), logstore.Query{Fields: map[string]string{"bad name": "x"}}); !errors.Is(err, logstore.ErrInvalidQuery) {
		t.Errorf("Fields with a key that is not a plain name: got %v, want ErrInvalidQuery", err)
	}
}

func testConcurrentWriters(t *testing.T, s logstore.Store) {
	t0 := base()
	const writers, batches, per = 6, 5, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := 0; w < writers; w++ {
		wg.Go(func() {
			for b := 0; b < batches; b++ {
				es := make([]logstore.Entry, per)
				for i := range es {
					es[i] = logstore.Entry{
						Time: t0.Add(time.Duration(w*batches*per+b*per+i) * time.Microsecond),
						Host: fmt.Sprintf("w%d", w), App: "conc", Level: "info", Message: fmt.Sprintf("w%d b%d i%d", w, b, i),
					}
				}
				if err := s.Write(context.Background(), es); err != nil {
					errs <- err
				}
				// Interleave reads with writes.
				if _, err := s.Query(context.Background(), logstore.Query{Host: fmt.Sprintf("w%d", w), Limit: 10}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := query(t, s, logstore.Query{App: "conc", Limit: logstore.MaxLimit})
	if len(got) != writers*batches*per {
		t.Errorf("got %d entries, want %d", len(got), writers*batches*per)
	}
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.Message] {
			t.Fatalf("duplicate %q", e.Message)
		}
		seen[e.Message] = true
	}
}

func testInvalid(t *testing.T, s logstore.Store) {
	c := ctx(t)
	now := time.Now()
	for name, err := range map[string]error{
		"negative limit":   second(s.Query(c, logstore.Query{Limit: -1})),
		"until <= since":   second(s.Query(c, logstore.Query{Since: now, Until: now})),
		"stats bad by":     second(s.Stats(c, logstore.Query{}, "message", time.Hour)),
		"stats 0 interval": second(s.Stats(c, logstore.Query{}, logstore.ByLevel, 0)),
		"stats sub-second": second(s.Stats(c, logstore.Query{}, logstore.ByLevel, 1500*time.Millisecond)),
		"empty trace":      second(s.Trace(c, "", time.Time{}, time.Time{})),
	} {
		if !errors.Is(err, logstore.ErrInvalidQuery) {
			t.Errorf("%s: got %v, want ErrInvalidQuery", name, err)
		}
	}
	if err := s.Write(c, nil); err != nil {
		t.Errorf("empty Write: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Write(cancelled, []logstore.Entry{{Message: "x"}}); err == nil {
		t.Errorf("Write with a cancelled context: want an error")
	}
}

func second[T any](_ T, err error) error { return err }

// BenchmarkWrite writes batches of batchSize realistic lines and reports lines/s.
func BenchmarkWrite(b *testing.B, s logstore.Store, batchSize int) {
	t0 := time.Now().Add(-time.Hour)
	batch := make([]logstore.Entry, batchSize)
	for i := range batch {
		batch[i] = logstore.Entry{
			Host: fmt.Sprintf("host-%02d", i%20), App: []string{"api", "db", "worker", "nginx"}[i%4],
			Level: []string{"info", "info", "info", "debug", "warn", "error"}[i%6], TraceID: fmt.Sprintf("%016x", i/8),
			Message: fmt.Sprintf("GET /api/v1/items/%d 200 %dms user=u%d bytes=%d", i, i%300, i%1000, i*37%65536),
			Cluster: "prod", Fields: map[string]string{"status": "200", "method": "GET"},
		}
	}
	c := context.Background()
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n++ {
		for i := range batch {
			batch[i].Time = t0.Add(time.Duration(n*batchSize+i) * time.Microsecond)
		}
		if err := s.Write(c, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batchSize)/time.Since(start).Seconds(), "lines/s")
}
