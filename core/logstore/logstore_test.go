package logstore

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCapStringRuneBoundary(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	for n := 0; n <= len(s); n++ {
		got := capString(s, n)
		if len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(s, got) || len(got) < n-1 {
			t.Fatalf("capString(%d) = %q", n, got)
		}
	}
}

func TestPrepare(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	in := []Entry{
		{Time: now.Add(-time.Hour), Level: " WARN ", Fields: map[string]string{"a": "1"}},
		{Time: now.Add(MaxFuture + time.Second)},
		{Time: now.Add(-31 * 24 * time.Hour)},
		{Message: strings.Repeat("x", MaxMessageBytes+1)},
		{Fields: map[string]string{"k": "v", "bad\xff": "", strings.Repeat("k", 200): "long key"}},
	}
	out, rejected := Prepare(in, now, 30*24*time.Hour)
	if rejected != 1 || len(out) != 4 {
		t.Fatalf("got %d entries, %d rejected", len(out), rejected)
	}
	if out[0].Level != "warn" || out[0].Fields["a"] != "1" {
		t.Errorf("entry 0: %+v", out[0])
	}
	if !out[1].Time.Equal(now) || out[1].Fields[FieldOrigTime] == "" {
		t.Errorf("future entry not clamped: %+v", out[1])
	}
	if len(out[2].Message) != MaxMessageBytes || out[2].Fields[FieldTruncated] != "65537" || !out[2].Time.Equal(now) {
		t.Errorf("long entry: len %d, fields %v", len(out[2].Message), out[2].Fields)
	}
	if f := out[3].Fields; len(f) != 2 || f["k"] != "v" || f[strings.Repeat("k", MaxFieldKeyBytes)] != "long key" {
		t.Errorf("fields: %q", f)
	}
	if len(in[4].Fields) != 3 {
		t.Errorf("input modified")
	}
}

func TestQueryNormalize(t *testing.T) {
	q, err := Query{Levels: []string{"Error", "error", " "}}.Normalize()
	if err != nil || q.Limit != DefaultLimit || len(q.Levels) != 1 || q.Levels[0] != "error" {
		t.Errorf("got %+v, %v", q, err)
	}
	if _, err := (Query{Limit: MaxLimit + 1}).Normalize(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if err := CheckStats("level", 90*time.Second); err != nil {
		t.Errorf("90s interval: %v", err)
	}
}

func TestDropDay(t *testing.T) {
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if !DropDay(day, day.Add(24*time.Hour)) || DropDay(day, day.Add(24*time.Hour-1)) {
		t.Error("a day goes exactly when t reaches its end")
	}
}

func TestTotals(t *testing.T) {
	h := time.Unix(3600, 0).UTC()
	s := NewStats(ByHost, time.Hour, []Bucket{
		{Start: h.Add(time.Hour), Key: "b", Count: 1},
		{Start: h, Key: "b", Count: 2, Errors: 1},
		{Start: h, Key: "a", Count: 2, Warnings: 1},
	})
	tot := s.Totals()
	if len(tot) != 2 || tot[0].Count != 4 || tot[0].ErrorRate() != 0.25 || tot[0].WarningRate() != 0.25 || tot[1].Count != 1 {
		t.Errorf("got %+v", tot)
	}
	if s.Buckets[0].Key != "a" {
		t.Errorf("not sorted: %+v", s.Buckets)
	}
}

func TestEventRecord(t *testing.T) {
	e := EventRecord{EventID: "e1", Kind: "alert", Outcome: "failed", Failed: true, Fields: map[string]string{"x": "y"}}.Entry()
	if e.App != EventsApp || e.Level != "error" || e.Fields[FieldOutcome] != "failed" || e.Fields["x"] != "y" || e.Fields[FieldEventID] != "e1" {
		t.Errorf("got %+v", e)
	}
}
