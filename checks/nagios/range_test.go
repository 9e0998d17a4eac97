package nagios

import (
	"math"
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in   string
		want Range
	}{
		// The forms of the guidelines' table.
		{"10", Range{Start: 0, End: 10}},
		{"10:", Range{Start: 10, EndInf: true}},
		{"~:10", Range{StartInf: true, End: 10}},
		{"10:20", Range{Start: 10, End: 20}},
		{"@10:20", Range{Start: 10, End: 20, Inside: true}},
		// Combinations and number formats plugins print.
		{"0", Range{}},
		{"5.000", Range{End: 5}},
		{"0.000001", Range{End: 0.000001}},
		{"@0", Range{Inside: true}},
		{"@10", Range{End: 10, Inside: true}},
		{"@10:", Range{Start: 10, EndInf: true, Inside: true}},
		{"@~:10", Range{StartInf: true, End: 10, Inside: true}},
		{"~:", Range{StartInf: true, EndInf: true}},
		{"@~:", Range{StartInf: true, EndInf: true, Inside: true}},
		{"-10:-5", Range{Start: -10, End: -5}},
		{"-5:5", Range{Start: -5, End: 5}},
		{"-5:", Range{Start: -5, EndInf: true}},
		{"5:5", Range{Start: 5, End: 5}},
		{"1e3", Range{End: 1000}},
		{"1.5e-3:2E+2", Range{Start: 0.0015, End: 200}},
		{".5:+1.", Range{Start: 0.5, End: 1}},
		{":10", Range{End: 10}}, // as the monitoring-plugins C library reads it
		{"~:-10", Range{StartInf: true, End: -10}},
	}
	for _, tt := range tests {
		got, err := ParseRange(tt.in)
		if err != nil {
			t.Errorf("ParseRange(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseRange(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseRangeErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string // a part of the message the operator needs
	}{
		{"", `invalid range "": it is empty`},
		{"@", "'@' must be followed by a range"},
		{"~", "'~' (negative infinity) must be followed by ':'"},
		{"@~", "'~' (negative infinity) must be followed by ':'"},
		{":", "neither a start nor an end"},
		{"@:", "neither a start nor an end"},
		{"20:10", `invalid range "20:10": start 20 is greater than end 10`},
		{"-5", "start 0 is greater than end -5"},
		{"@5:1", "start 5 is greater than end 1"},
		{"10:~", "leave the end empty for positive infinity"},
		{"1:2:3", "more than one ':'"},
		{"abc", `"abc" is not a number`},
		{"10:abc", `end: "abc" is not a number`},
		{"abc:10", `start: "abc" is not a number`},
		{"1,5", "uses ',' as the decimal separator"},
		{"1,5:3", "start: \"1,5\" uses ',' as the decimal separator"},
		{"0,5:1,5", "uses ',' as the decimal separator"},
		{"1,000", "uses ',' as the decimal separator"}, // refused, not guessed
		{"10%", `"10%" is not a number`},
		{"10s:20s", `"10s" is not a number`},
		{" 10", `" 10" is not a number`},
		{"10 ", `"10 " is not a number`},
		{"inf", `"inf" is not a number`},
		{"~:NaN", `"NaN" is not a number`},
		{"0x10", `"0x10" is not a number`},
		{"1_000", `"1_000" is not a number`},
		{"1e999", "out of the range of a 64-bit float"},
		{"-1e999:", "out of the range of a 64-bit float"},
		{"@@5", `"@5" is not a number`},
		{"1e", `"1e" is not a number`},
		{".", `"." is not a number`},
		{"-", `"-" is not a number`},
		{"--5", `"--5" is not a number`},
	}
	for _, tt := range tests {
		_, err := ParseRange(tt.in)
		if err == nil {
			t.Errorf("ParseRange(%q) succeeded, want an error containing %q", tt.in, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseRange(%q) error %q, want it to contain %q", tt.in, err, tt.wantErr)
		}
		if !strings.Contains(err.Error(), "invalid range "+quote(tt.in)) {
			t.Errorf("ParseRange(%q) error %q does not name the text", tt.in, err)
		}
	}
}

func quote(s string) string { return `"` + s + `"` }

func TestAlerts(t *testing.T) {
	type check struct {
		v    float64
		want bool
	}
	tests := []struct {
		rng    string
		checks []check
	}{
		// "10": alert if < 0 or > 10; 0 and 10 themselves are inside.
		{"10", []check{{-0.001, true}, {-1, true}, {0, false}, {5, false}, {10, false}, {10.001, true}, {11, true}}},
		// "10:": alert if < 10.
		{"10:", []check{{9.999, true}, {-1e9, true}, {10, false}, {1e300, false}}},
		// "~:10": alert if > 10.
		{"~:10", []check{{-1e300, false}, {-5, false}, {10, false}, {10.001, true}}},
		// "10:20": alert if < 10 or > 20.
		{"10:20", []check{{9.99, true}, {10, false}, {15, false}, {20, false}, {20.01, true}}},
		// "@10:20": alert if >= 10 and <= 20.
		{"@10:20", []check{{9.99, false}, {10, true}, {15, true}, {20, true}, {20.01, false}}},
		{"@10", []check{{-1, false}, {0, true}, {10, true}, {11, false}}},
		{"@10:", []check{{9, false}, {10, true}, {1e300, true}}},
		{"@~:10", []check{{-1e300, true}, {10, true}, {10.5, false}}},
		{"5:5", []check{{4.9, true}, {5, false}, {5.1, true}}},
		{"@0", []check{{0, true}, {-0.0, true}, {0.1, false}, {-0.1, false}}},
		{"-10:-5", []check{{-11, true}, {-10, false}, {-5, false}, {-4, true}, {0, true}}},
		{"~:", []check{{-1e300, false}, {0, false}, {1e300, false}, {math.Inf(1), false}}},
		{"@~:", []check{{-1e300, true}, {0, true}, {math.Inf(-1), true}}},
		{"10", []check{{math.Inf(1), true}, {math.Inf(-1), true}}},
	}
	for _, tt := range tests {
		r, err := ParseRange(tt.rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tt.checks {
			if got := r.Alerts(c.v); got != c.want {
				t.Errorf("range %q: Alerts(%v) = %v, want %v", tt.rng, c.v, got, c.want)
			}
		}
	}
}

// An undetermined value ("U") never alerts, whatever the range.
func TestAlertsNaN(t *testing.T) {
	for _, s := range []string{"10", "10:", "~:10", "10:20", "@10:20", "~:", "@~:", "@0"} {
		r, err := ParseRange(s)
		if err != nil {
			t.Fatal(err)
		}
		if r.Alerts(math.NaN()) {
			t.Errorf("range %q alerts on NaN", s)
		}
	}
}

func TestRangeString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"10", "10"},
		{"0:10", "10"},
		{":10", "10"},
		{"10:", "10:"},
		{"0:", "0:"},
		{"~:10", "~:10"},
		{"10:20", "10:20"},
		{"@10:20", "@10:20"},
		{"@0", "@0"},
		{"~:", "~:"},
		{"@~:", "@~:"},
		{"5.000", "5"},
		{"1e3:2e3", "1000:2000"},
		{"-1.5:-0.25", "-1.5:-0.25"},
		{"1e-7", "0.0000001"},
	}
	for _, tt := range tests {
		r, err := ParseRange(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.String(); got != tt.want {
			t.Errorf("ParseRange(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseRange(r.String())
		if err != nil || back != r {
			t.Errorf("ParseRange(%q) round trip: %+v, %v; want %+v", r.String(), back, err, r)
		}
	}
}
