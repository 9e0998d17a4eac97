package tsdb_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/internal/vmerr"
)

func TestValidateSample(t *testing.T) {
	ok := []tsdb.Sample{
		{Name: "up"}, {Name: "a:b_c9"}, {Name: "_x", Labels: map[string]string{"job": "", "_y1": "ünï"}},
	}
	for _, s := range ok {
		if err := tsdb.ValidateSample(0, &s); err != nil {
			t.Errorf("ValidateSample(%+v) = %v", s, err)
		}
	}
	bad := []tsdb.Sample{
		{Name: ""}, {Name: "9a"}, {Name: "a.b"}, {Name: strings.Repeat("a", tsdb.MaxNameLen+1)},
		{Name: "m", Labels: map[string]string{"a:b": "x"}},
		{Name: "m", Labels: map[string]string{"__x": "x"}},
		{Name: "m", Labels: map[string]string{"0a": "x"}},
	}
	for _, s := range bad {
		err := tsdb.ValidateSample(3, &s)
		var ise *tsdb.InvalidSampleError
		if !errors.As(err, &ise) || ise.Index != 3 || !strings.Contains(err.Error(), "#3") {
			t.Errorf("ValidateSample(%+v) = %v, want InvalidSampleError #3", s, err)
		}
	}
}

func TestValidateSeries(t *testing.T) {
	tests := []struct {
		name   string
		s      tsdb.SeriesPoints
		reason string // empty: valid
	}{
		{"no labels", tsdb.SeriesPoints{Name: "up", TimesMs: []int64{1}, Values: []float64{1}}, ""},
		{"sorted labels", tsdb.SeriesPoints{Name: "up", Labels: []tsdb.Label{{"a", "1"}, {"b", ""}}}, ""},
		{"bad name", tsdb.SeriesPoints{Name: "a.b"}, "metric name"},
		{"bad label", tsdb.SeriesPoints{Name: "m", Labels: []tsdb.Label{{"0a", "x"}}}, "label name"},
		{"reserved label", tsdb.SeriesPoints{Name: "m", Labels: []tsdb.Label{{"__name__", "x"}}}, "reserved"},
		{"unsorted", tsdb.SeriesPoints{Name: "m", Labels: []tsdb.Label{{"b", "1"}, {"a", "2"}}}, `"a" follows "b"`},
		{"duplicate", tsdb.SeriesPoints{Name: "m", Labels: []tsdb.Label{{"a", "1"}, {"a", "2"}}}, "without duplicates"},
		{"long value", tsdb.SeriesPoints{Name: "m", Labels: []tsdb.Label{{"a", strings.Repeat("x", tsdb.MaxLabelValueLen+1)}}}, "at most"},
		{"lengths", tsdb.SeriesPoints{Name: "m", TimesMs: []int64{1, 2}, Values: []float64{1}}, "2 times but 1 values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tsdb.ValidateSeries(4, &tt.s)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("ValidateSeries = %v, want nil", err)
				}
				return
			}
			var ise *tsdb.InvalidSampleError
			if !errors.As(err, &ise) || ise.Index != 4 || !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), tt.s.Name+"{") {
				t.Fatalf("ValidateSeries = %v, want InvalidSampleError #4 naming the series and %q", err, tt.reason)
			}
		})
	}
}

func TestAcceptWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	w := tsdb.AcceptWindow(now, 24*time.Hour)
	for d, want := range map[time.Duration]int{0: 0, -23 * time.Hour: 0, -25 * time.Hour: -1, 23 * time.Hour: 0, 25 * time.Hour: 1} {
		if got := w.Classify(now.Add(d).UnixMilli()); got != want {
			t.Errorf("Classify(now%+v) = %d, want %d", d, got, want)
		}
	}
	if got := tsdb.AcceptWindow(now, 0).Classify(0); got != 0 {
		t.Errorf("no retention: Classify(epoch) = %d, want 0", got)
	}
}

func TestTooLarge(t *testing.T) {
	err := fmt.Errorf("ctx: %w", tsdb.TooLarge("MaxSeries", errors.New("vm says no")))
	if !errors.Is(err, tsdb.ErrTooLarge) || !strings.Contains(err.Error(), "MaxSeries") || !strings.Contains(err.Error(), "vm says no") {
		t.Errorf("TooLarge error %q", err)
	}
	c := vmerr.Classify(errors.New("the number of matching timeseries exceeds 10; either narrow down"))
	if !errors.Is(c, tsdb.ErrTooLarge) {
		t.Errorf("Classify did not recognise the series limit: %v", c)
	}
	if c := vmerr.Classify(errors.New("syntax error")); errors.Is(c, tsdb.ErrTooLarge) {
		t.Errorf("Classify misfiled %v", c)
	}
}
