package nagios

import (
	"math"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that its result keeps the
// promises callers rely on, whatever a plugin prints.
func FuzzParse(f *testing.F) {
	for _, base := range corpusCases(f) {
		b, err := os.ReadFile(base + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{
		"", "|", "||", "'", "''", "'''", "=", "a=", "=1", "a=U", "a=1;;;;;", "\n|\n|",
		"OK | 'a''b'=1;@~:;10:;-1;2e3", "OK\r\n|\r\n'x\r\ny'=1", "OK | a=1e999", "OK | a=-",
		"\x00|\x00=\x00", "OK | '\xff'=1\xff", "\t\v\f\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		o := Parse(in)
		if strings.ContainsAny(o.Text, "\n") {
			t.Errorf("Text has a newline: %q", o.Text)
		}
		if o.Text != strings.TrimSpace(o.Text) {
			t.Errorf("Text not trimmed: %q", o.Text)
		}
		if !strings.Contains(in, o.Text) {
			t.Errorf("Text %q is not part of the input", o.Text)
		}
		if strings.HasPrefix(o.LongText, "\n") || strings.HasSuffix(o.LongText, "\n") {
			t.Errorf("LongText starts or ends with a blank line: %q", o.LongText)
		}
		for _, l := range strings.Split(o.LongText, "\n") {
			if strings.TrimRight(l, " \t\r\v\f") != l {
				t.Errorf("LongText line has trailing white space: %q", l)
			}
		}
		if len(o.Errors) > maxErrors+1 {
			t.Errorf("%d errors, more than the limit", len(o.Errors))
		}
		for _, e := range o.Errors {
			if e == "" {
				t.Error("empty error message")
			}
		}
		if o.Perfdata != nil && len(o.Perfdata) == 0 {
			t.Error("Perfdata is empty but not nil")
		}
		for _, p := range o.Perfdata {
			if p.Label == "" {
				t.Errorf("empty label in %s", p.debug())
			}
			if math.IsInf(p.Value, 0) {
				t.Errorf("infinite value in %s", p.debug())
			}
			if strings.ContainsAny(p.UOM, " \t\r\n;=|0123456789") {
				t.Errorf("UOM %q holds a separator or digit", p.UOM)
			}
			for _, b := range []*float64{p.Min, p.Max} {
				if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
					t.Errorf("min/max not finite in %s", p.debug())
				}
			}
			for _, th := range []struct {
				r    *Range
				text string
			}{{p.Warn, p.WarnText}, {p.Crit, p.CritText}} {
				if th.r == nil {
					continue
				}
				if th.text == "" {
					t.Errorf("threshold parsed from nothing in %s", p.debug())
				}
				if back, err := ParseRange(th.text); err != nil || back != *th.r {
					t.Errorf("threshold %q parsed as %+v but ParseRange gives %+v, %v", th.text, *th.r, back, err)
				}
			}
		}
		// Parse is a pure function.
		o2 := Parse(in)
		if o2.Text != o.Text || o2.LongText != o.LongText || len(o2.Perfdata) != len(o.Perfdata) || len(o2.Errors) != len(o.Errors) {
			t.Errorf("Parse is not deterministic")
		}
	})
}

// FuzzParseRange checks that ParseRange never panics, that accepted ranges
// are well-formed and survive String, and that the inclusive ends hold.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{
		"10", "10:", "~:10", "10:20", "@10:20", "@~:", ":", ":10", "1e3", "-1.5:-0.5", "1,5", "~", "@", "", "1e999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid range") {
				t.Errorf("error %q does not say what failed", err)
			}
			return
		}
		for _, v := range []float64{r.Start, r.End} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("ParseRange(%q) = %+v: not finite", s, r)
			}
		}
		if !r.StartInf && !r.EndInf && r.Start > r.End {
			t.Fatalf("ParseRange(%q) = %+v: start > end", s, r)
		}
		back, err := ParseRange(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRange(%q).String() = %q does not read back: %+v, %v", s, r.String(), back, err)
		}
		// Ends are inclusive: inside the range at both ends.
		if !r.StartInf && r.Alerts(r.Start) != r.Inside {
			t.Errorf("range %q: Alerts(start %v) = %v", s, r.Start, !r.Inside)
		}
		if !r.EndInf && r.Alerts(r.End) != r.Inside {
			t.Errorf("range %q: Alerts(end %v) = %v", s, r.End, !r.Inside)
		}
		if r.Alerts(math.NaN()) {
			t.Errorf("range %q alerts on NaN", s)
		}
	})
}
