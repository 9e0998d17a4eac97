package nagios

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func fp(f float64) *float64 { return &f }

func rp(t *testing.T, s string) *Range {
	t.Helper()
	r, err := ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return &r
}

// samePerf compares two items, with NaN equal to NaN so that "U" values
// can be expected.
func samePerf(a, b Perf) bool {
	sameF := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	sameFP := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || sameF(*x, *y)) }
	sameR := func(x, y *Range) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Label == b.Label && sameF(a.Value, b.Value) && a.UOM == b.UOM &&
		sameR(a.Warn, b.Warn) && sameR(a.Crit, b.Crit) &&
		a.WarnText == b.WarnText && a.CritText == b.CritText &&
		sameFP(a.Min, b.Min) && sameFP(a.Max, b.Max)
}

func (p Perf) debug() string {
	s := fmt.Sprintf("{%q %v %q w=%q c=%q", p.Label, p.Value, p.UOM, p.WarnText, p.CritText)
	if p.Warn != nil {
		s += " W=" + p.Warn.String()
	}
	if p.Crit != nil {
		s += " C=" + p.Crit.String()
	}
	if p.Min != nil {
		s += fmt.Sprint(" min=", *p.Min)
	}
	if p.Max != nil {
		s += fmt.Sprint(" max=", *p.Max)
	}
	return s + "}"
}

func checkOutput(t *testing.T, in string, got, want Output, wantErrs []string) {
	t.Helper()
	if got.Text != want.Text {
		t.Errorf("Parse(%q).Text = %q, want %q", in, got.Text, want.Text)
	}
	if got.LongText != want.LongText {
		t.Errorf("Parse(%q).LongText = %q, want %q", in, got.LongText, want.LongText)
	}
	if len(got.Perfdata) != len(want.Perfdata) {
		var g []string
		for _, p := range got.Perfdata {
			g = append(g, p.debug())
		}
		t.Errorf("Parse(%q): %d perfdata items %v, want %d", in, len(got.Perfdata), g, len(want.Perfdata))
	} else {
		for i := range got.Perfdata {
			if !samePerf(got.Perfdata[i], want.Perfdata[i]) {
				t.Errorf("Parse(%q).Perfdata[%d] = %s, want %s", in, i, got.Perfdata[i].debug(), want.Perfdata[i].debug())
			}
		}
	}
	if len(got.Errors) != len(wantErrs) {
		t.Errorf("Parse(%q).Errors = %q, want %d errors like %q", in, got.Errors, len(wantErrs), wantErrs)
		return
	}
	for i, w := range wantErrs {
		if !strings.Contains(got.Errors[i], w) {
			t.Errorf("Parse(%q).Errors[%d] = %q, want it to contain %q", in, i, got.Errors[i], w)
		}
	}
}

func TestParse(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		in   string
		want Output
		errs []string
	}{
		{name: "empty", in: ""},
		{name: "only white space", in: " \t\r\n \n"},
		{name: "text only", in: "OK: hello\n", want: Output{Text: "OK: hello"}},
		{name: "text without newline", in: "CRITICAL", want: Output{Text: "CRITICAL"}},
		{
			name: "check_load",
			in:   "LOAD OK - total load average: 0.19, 0.43, 0.24|load1=0.190;5.000;10.000;0; load5=0.430;5.000;10.000;0; load15=0.240;5.000;10.000;0; \n",
			want: Output{Text: "LOAD OK - total load average: 0.19, 0.43, 0.24", Perfdata: []Perf{
				{Label: "load1", Value: 0.19, Warn: rp(t, "5"), Crit: rp(t, "10"), WarnText: "5.000", CritText: "10.000", Min: fp(0)},
				{Label: "load5", Value: 0.43, Warn: rp(t, "5"), Crit: rp(t, "10"), WarnText: "5.000", CritText: "10.000", Min: fp(0)},
				{Label: "load15", Value: 0.24, Warn: rp(t, "5"), Crit: rp(t, "10"), WarnText: "5.000", CritText: "10.000", Min: fp(0)},
			}},
		},
		{
			name: "check_disk",
			in:   "DISK OK - free space: / 80518MiB (86% inode=97%);| /=13363052544B;243497277849;257024904396;0;270552530944\n",
			want: Output{Text: "DISK OK - free space: / 80518MiB (86% inode=97%);", Perfdata: []Perf{
				{Label: "/", Value: 13363052544, UOM: "B", Warn: rp(t, "243497277849"), Crit: rp(t, "257024904396"),
					WarnText: "243497277849", CritText: "257024904396", Min: fp(0), Max: fp(270552530944)},
			}},
		},
		{
			name: "check_users with ':' and '@' thresholds",
			in:   "USERS CRITICAL - 0 users currently logged in |users=0;:0;@0;0\n",
			want: Output{Text: "USERS CRITICAL - 0 users currently logged in", Perfdata: []Perf{
				{Label: "users", Value: 0, Warn: &Range{}, Crit: &Range{Inside: true}, WarnText: ":0", CritText: "@0", Min: fp(0)},
			}},
		},
		{
			name: "only perfdata",
			in:   "| a=1 b=2",
			want: Output{Perfdata: []Perf{{Label: "a", Value: 1}, {Label: "b", Value: 2}}},
		},
		{name: "empty perfdata", in: "OK |", want: Output{Text: "OK"}},
		{name: "blank perfdata", in: "OK |  \t \n", want: Output{Text: "OK"}},
		{
			name: "guidelines multi-line example",
			in: "DISK OK - free space: / 3326 MB (56%); | /=2643MB;5948;5958;0;5968\n" +
				"/ 15272 MB (77%);\n" +
				"/boot 68 MB (69%);\n" +
				"/home 69357 MB (27%);\n" +
				"/var/log 819 MB (84%); | /boot=68MB;88;93;0;98\n" +
				"/home=69357MB;253404;253409;0;253414 \n" +
				"/var/log=818MB;970;975;0;980\n",
			want: Output{
				Text:     "DISK OK - free space: / 3326 MB (56%);",
				LongText: "/ 15272 MB (77%);\n/boot 68 MB (69%);\n/home 69357 MB (27%);\n/var/log 819 MB (84%);",
				Perfdata: []Perf{
					{Label: "/", Value: 2643, UOM: "MB", Warn: rp(t, "5948"), Crit: rp(t, "5958"), WarnText: "5948", CritText: "5958", Min: fp(0), Max: fp(5968)},
					{Label: "/boot", Value: 68, UOM: "MB", Warn: rp(t, "88"), Crit: rp(t, "93"), WarnText: "88", CritText: "93", Min: fp(0), Max: fp(98)},
					{Label: "/home", Value: 69357, UOM: "MB", Warn: rp(t, "253404"), Crit: rp(t, "253409"), WarnText: "253404", CritText: "253409", Min: fp(0), Max: fp(253414)},
					{Label: "/var/log", Value: 818, UOM: "MB", Warn: rp(t, "970"), Crit: rp(t, "975"), WarnText: "970", CritText: "975", Min: fp(0), Max: fp(980)},
				},
			},
		},
		{
			// check_smtp on a refused port prints the connect error first,
			// so its perfdata comes after a '|' on line 2.
			name: "perfdata only on a later line",
			in:   "connect to address 127.0.0.1 and port 1: Connection refused\nSMTP CRITICAL - 0.000 sec. response time|time=0.000064s;;;0.000000\n",
			want: Output{
				Text:     "connect to address 127.0.0.1 and port 1: Connection refused",
				LongText: "SMTP CRITICAL - 0.000 sec. response time",
				Perfdata: []Perf{{Label: "time", Value: 0.000064, UOM: "s", Min: fp(0)}},
			},
		},
		{
			name: "a later '|' in perfdata separates items",
			in:   "OK\nlong | a=1 | b=2|c=3\n| d=4",
			want: Output{Text: "OK", LongText: "long", Perfdata: []Perf{
				{Label: "a", Value: 1}, {Label: "b", Value: 2}, {Label: "c", Value: 3}, {Label: "d", Value: 4},
			}},
		},
		{
			name: "first-line perfdata ends with the line",
			in:   "OK | a=1\nb=2\nc=3",
			want: Output{Text: "OK", LongText: "b=2\nc=3", Perfdata: []Perf{{Label: "a", Value: 1}}},
		},
		{
			name: "CRLF",
			in:   "OK - agent | a=1;2;3\r\nsecond line\r\nthird line | b=2s\r\nc=3\r\n",
			want: Output{Text: "OK - agent", LongText: "second line\nthird line", Perfdata: []Perf{
				{Label: "a", Value: 1, Warn: rp(t, "2"), Crit: rp(t, "3"), WarnText: "2", CritText: "3"},
				{Label: "b", Value: 2, UOM: "s"},
				{Label: "c", Value: 3},
			}},
		},
		{
			name: "white space, blank lines and indentation",
			in:   "  OK - padded \t\n\n   \n  first\n\n\tsecond  \n\n\n",
			want: Output{Text: "OK - padded", LongText: "  first\n\n\tsecond"},
		},
		{
			name: "tabs separate items",
			in:   "OK |a=1\tb=2 \t c=3",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "a", Value: 1}, {Label: "b", Value: 2}, {Label: "c", Value: 3}}},
		},
		{
			name: "quoted labels",
			in:   `OK | 'C:\ Label:System  Serial Number 5c1b2e3a'=48.5GB;100;110;0;119.2 'it''s'=1 'a=b'=2 'x|y'=3 ''''=4 'two words'=5%`,
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: `C:\ Label:System  Serial Number 5c1b2e3a`, Value: 48.5, UOM: "GB", Warn: rp(t, "100"), Crit: rp(t, "110"), WarnText: "100", CritText: "110", Min: fp(0), Max: fp(119.2)},
				{Label: "it's", Value: 1},
				{Label: "a=b", Value: 2},
				{Label: "x|y", Value: 3},
				{Label: "'", Value: 4},
				{Label: "two words", Value: 5, UOM: "%"},
			}},
		},
		{
			name: "quoted label whose quotes hide the first-line '|'",
			in:   "OK | 'a|b'=1 c=2\nlong",
			want: Output{Text: "OK", LongText: "long", Perfdata: []Perf{{Label: "a|b", Value: 1}, {Label: "c", Value: 2}}},
		},
		{
			name: "'|' in the status text ends it even inside quotes",
			in:   "CRITICAL - can't reach 'db|primary' | time=10s;1;5",
			want: Output{Text: "CRITICAL - can't reach 'db", Perfdata: []Perf{
				{Label: "time", Value: 10, UOM: "s", Warn: rp(t, "1"), Crit: rp(t, "5"), WarnText: "1", CritText: "5"},
			}},
			errs: []string{`perfdata "primary'": not a perfdata item: no '=' between label and value`},
		},
		{
			name: "trailing semicolons",
			in:   "OK | a=1;2;3;0;10 b=1;2;3;0 c=1;2;3 d=1;2 e=1 f=1;;;; g=1;;3 h=1;;;0 i=1;;;;10 j=1;",
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: "a", Value: 1, Warn: rp(t, "2"), Crit: rp(t, "3"), WarnText: "2", CritText: "3", Min: fp(0), Max: fp(10)},
				{Label: "b", Value: 1, Warn: rp(t, "2"), Crit: rp(t, "3"), WarnText: "2", CritText: "3", Min: fp(0)},
				{Label: "c", Value: 1, Warn: rp(t, "2"), Crit: rp(t, "3"), WarnText: "2", CritText: "3"},
				{Label: "d", Value: 1, Warn: rp(t, "2"), WarnText: "2"},
				{Label: "e", Value: 1},
				{Label: "f", Value: 1},
				{Label: "g", Value: 1, Crit: rp(t, "3"), CritText: "3"},
				{Label: "h", Value: 1, Min: fp(0)},
				{Label: "i", Value: 1, Max: fp(10)},
				{Label: "j", Value: 1},
			}},
		},
		{
			name: "undetermined values",
			in:   "UNKNOWN | 'sensor 2'=U;60;80 fan=U",
			want: Output{Text: "UNKNOWN", Perfdata: []Perf{
				{Label: "sensor 2", Value: nan, Warn: rp(t, "60"), Crit: rp(t, "80"), WarnText: "60", CritText: "80"},
				{Label: "fan", Value: nan},
			}},
		},
		{
			name: "number formats",
			in:   "OK | a=0.012 b=-1 c=1e3 d=1.5E-3ms e=.5 f=5. g=+2 h=007 i=-0.0 j=5e k=2events",
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: "a", Value: 0.012},
				{Label: "b", Value: -1},
				{Label: "c", Value: 1000},
				{Label: "d", Value: 0.0015, UOM: "ms"},
				{Label: "e", Value: 0.5},
				{Label: "f", Value: 5},
				{Label: "g", Value: 2},
				{Label: "h", Value: 7},
				{Label: "i", Value: 0},
				{Label: "j", Value: 5, UOM: "e"}, // no exponent digits: a unit
				{Label: "k", Value: 2, UOM: "events"},
			}},
		},
		{
			name: "units",
			in:   "OK | a=1s b=2ms c=3us d=4% e=5B f=6KB g=7MB h=8GB i=9TB j=10c k=11B/s",
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: "a", Value: 1, UOM: "s"}, {Label: "b", Value: 2, UOM: "ms"}, {Label: "c", Value: 3, UOM: "us"},
				{Label: "d", Value: 4, UOM: "%"}, {Label: "e", Value: 5, UOM: "B"}, {Label: "f", Value: 6, UOM: "KB"},
				{Label: "g", Value: 7, UOM: "MB"}, {Label: "h", Value: 8, UOM: "GB"}, {Label: "i", Value: 9, UOM: "TB"},
				{Label: "j", Value: 10, UOM: "c"}, {Label: "k", Value: 11, UOM: "B/s"},
			}},
		},
		{
			name: "comma decimals are refused",
			in:   "OK | load=0,5;1,0;2,0 ok=1",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "ok", Value: 1}}},
			errs: []string{`perfdata "load=0,5;1,0;2,0": value "0,5" uses ',' as the decimal separator (a locale setting of the plugin?); the guidelines require '.'`},
		},
		{
			name: "bad values drop the item",
			in:   "OK | a= =1 b c=abc d=1.2.3 e=0x10 f=inf g=NaN h=u i=12abc34 j=1- k=1e999s",
			want: Output{Text: "OK"},
			errs: []string{
				`perfdata "a=": there is no value after '='`,
				`perfdata "=1": the label before '=' is empty`,
				`perfdata "b": not a perfdata item`,
				`perfdata "c=abc": value "abc" is not a number`,
				`perfdata "d=1.2.3": value "1.2.3" is not a number followed by a unit`,
				`perfdata "e=0x10": value "0x10" is not a number followed by a unit`,
				`perfdata "f=inf": value "inf" is not a number`,
				`perfdata "g=NaN": value "NaN" is not a number`,
				`perfdata "h=u": value "u" is not a number`,
				`perfdata "i=12abc34": value "12abc34" is not a number followed by a unit`,
				`perfdata "j=1-": value "1-" is not a number followed by a unit`,
				`perfdata "k=1e999s": value "1e999" is out of the range of a 64-bit float`,
			},
		},
		{
			name: "too many fields",
			in:   "OK | a=1;2;3;4;5;6 b=1;2;3;4;5",
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: "b", Value: 1, Warn: rp(t, "2"), Crit: rp(t, "3"), WarnText: "2", CritText: "3", Min: fp(4), Max: fp(5)},
			}},
			errs: []string{`perfdata "a=1;2;3;4;5;6": too many ';'-separated fields: at most 5 are allowed (value;warn;crit;min;max)`},
		},
		{
			// A rejected threshold keeps neither its range nor its text:
			// an event must not show a threshold nothing evaluated.
			name: "bad thresholds and bounds keep the value, not the bad field",
			in:   "OK | a=5;abc;10 b=5;20:10 c=5;;1,5 d=5;;;zero;U e=5s;10s",
			want: Output{Text: "OK", Perfdata: []Perf{
				{Label: "a", Value: 5, Crit: rp(t, "10"), CritText: "10"},
				{Label: "b", Value: 5},
				{Label: "c", Value: 5},
				{Label: "d", Value: 5},
				{Label: "e", Value: 5, UOM: "s"},
			}},
			errs: []string{
				`perfdata "a=5;abc;10": warning threshold "abc" ignored: "abc" is not a number`,
				`perfdata "b=5;20:10": warning threshold "20:10" ignored: start 20 is greater than end 10`,
				`perfdata "c=5;;1,5": critical threshold "1,5" ignored: "1,5" uses ',' as the decimal separator`,
				`perfdata "d=5;;;zero;U": min ignored: "zero" is not a number`,
				`perfdata "d=5;;;zero;U": max ignored: "U" is not a number`,
				`perfdata "e=5s;10s": warning threshold "10s" ignored: "10s" is not a number`,
			},
		},
		{
			name: "bad quoted labels",
			in:   "OK | 'noeq' 'q'x=1 ''=2 'open=3 lost=4\n| after=5",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "after", Value: 5}}},
			errs: []string{
				`perfdata "'noeq'": the quoted label must be followed directly by '='`,
				`perfdata "'q'x=1": the quoted label must be followed directly by '='`,
				`perfdata "''=2": the label is empty`,
				`perfdata "'open=3 lost=4": the quoted label has no closing quote`,
			},
		},
		{
			// An unterminated quote gives up on the rest of its line only.
			name: "unterminated quote on a perfdata line",
			in:   "OK\n| a=1 'open=2 b=3\nc=4",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "a", Value: 1}, {Label: "c", Value: 4}}},
			errs: []string{`perfdata "'open=2 b=3": the quoted label has no closing quote`},
		},
		{
			name: "unterminated quote before CRLF",
			in:   "OK\n| 'open=2\r\nc=4",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "c", Value: 4}}},
			errs: []string{`perfdata "'open=2\r": the quoted label has no closing quote`},
		},
		{
			name: "unquoted label with a quote is taken as printed",
			in:   "OK | don't=1",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "don't", Value: 1}}},
		},
		{
			name: "'=' in the value part",
			in:   "OK | a=1=2",
			want: Output{Text: "OK"},
			errs: []string{`perfdata "a=1=2": value "1=2" is not a number followed by a unit`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOutput(t, tt.in, Parse(tt.in), tt.want, tt.errs)
		})
	}
}

// TestParseCut: output a size cap cut short loses the item at its end, and
// says so, instead of exporting `cut=123456789` as 1234.
func TestParseCut(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Output
		errs []string
	}{
		{
			name: "last item on the first line cut",
			in:   "OK | good=1 cut=1234",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "good", Value: 1}}},
			errs: []string{`perfdata "cut=1234": cut off by the output size limit; dropped`},
		},
		{
			name: "cut right after a separator keeps every item",
			in:   "OK | good=1 also=2 ",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "good", Value: 1}, {Label: "also", Value: 2}}},
		},
		{
			name: "quoted label cut",
			in:   "OK | good=1 'disk us",
			want: Output{Text: "OK", Perfdata: []Perf{{Label: "good", Value: 1}}},
			errs: []string{`perfdata "'disk us": cut off by the output size limit; dropped`},
		},
		{
			name: "quoted item cut in its value",
			in:   "OK | 'disk use'=12",
			want: Output{Text: "OK"},
			errs: []string{`perfdata "'disk use'=12": cut off by the output size limit; dropped`},
		},
		{
			name: "first-line perfdata is whole when the cut is in the long text",
			in:   "OK | a=1\nline two\nline thr",
			want: Output{Text: "OK", LongText: "line two\nline thr", Perfdata: []Perf{{Label: "a", Value: 1}}},
		},
		{
			name: "long-text perfdata cut",
			in:   "OK | a=1\nmore | b=2 c=99",
			want: Output{Text: "OK", LongText: "more", Perfdata: []Perf{{Label: "a", Value: 1}, {Label: "b", Value: 2}}},
			errs: []string{`perfdata "c=99": cut off by the output size limit; dropped`},
		},
		{
			name: "text only",
			in:   "CRITICAL: something long that was cu",
			want: Output{Text: "CRITICAL: something long that was cu"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOutput(t, tt.in, ParseCut(tt.in), tt.want, tt.errs)
		})
	}
}

func TestParseErrorLimit(t *testing.T) {
	in := "OK |" + strings.Repeat(" x", maxErrors+7) + " good=1"
	o := Parse(in)
	if len(o.Perfdata) != 1 || o.Perfdata[0].Label != "good" {
		t.Errorf("good item lost among bad ones: %+v", o.Perfdata)
	}
	if len(o.Errors) != maxErrors+1 {
		t.Fatalf("got %d errors, want %d and a summary", len(o.Errors), maxErrors)
	}
	if last := o.Errors[maxErrors]; last != "7 more perfdata problems not listed" {
		t.Errorf("summary = %q", last)
	}
}

func TestParseErrorQuotesLongItemShortly(t *testing.T) {
	item := strings.Repeat("é", 200) // 400 bytes; the cut must not split a rune
	o := Parse("OK | " + item)
	if len(o.Errors) != 1 {
		t.Fatalf("errors = %q", o.Errors)
	}
	want := fmt.Sprintf("perfdata %q: ", strings.Repeat("é", maxItemQuote/2)+"...")
	if !strings.HasPrefix(o.Errors[0], want) {
		t.Errorf("error = %q, want prefix %q", o.Errors[0], want)
	}
}

func TestParseManyLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("OK - many\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString("end | ")
	for i := range 1000 {
		fmt.Fprintf(&b, "m%d=%d;;;0\n", i, i)
	}
	o := Parse(b.String())
	if o.Text != "OK - many" || len(o.Errors) != 0 || len(o.Perfdata) != 1000 {
		t.Fatalf("text %q, %d errors, %d perfdata", o.Text, len(o.Errors), len(o.Perfdata))
	}
	if n := strings.Count(o.LongText, "\n") + 1; n != 5001 {
		t.Errorf("long text has %d lines, want 5001", n)
	}
	if p := o.Perfdata[999]; p.Label != "m999" || p.Value != 999 || p.Min == nil || *p.Min != 0 {
		t.Errorf("last item = %s", p.debug())
	}
}

// Items are independent: the pointers of one item must not alias another's.
func TestParsePointersIndependent(t *testing.T) {
	o := Parse("OK | a=1;2;3;4;5 b=1;6;7;8;9")
	a, b := o.Perfdata[0], o.Perfdata[1]
	if *a.Warn == *b.Warn || *a.Crit == *b.Crit || *a.Min == *b.Min || *a.Max == *b.Max {
		t.Fatalf("items share thresholds: %s %s", a.debug(), b.debug())
	}
	*a.Min = 100
	if *b.Min != 8 {
		t.Errorf("changing one item's Min changed another's")
	}
}

// BenchmarkParse parses check_disk output for five file systems.
func BenchmarkParse(b *testing.B) {
	const in = "DISK OK - free space: / 80518MiB (86% inode=97%); /boot 412MiB (84% inode=99%); /home 201455MiB (71% inode=98%); /var 18230MiB (62% inode=93%); /tmp 9870MiB (99% inode=99%);| " +
		"/=13363052544B;243497277849;257024904396;0;270552530944 " +
		"/boot=82837504B;462422016;488112128;0;513802240 " +
		"/home=88015667200B;273812013465;289023791769;0;304235570176 " +
		"/var=11744051200B;27640594841;29176183500;0;30711772160 " +
		"/tmp=104857600B;9433940377;9958048174;0;10482155520\n"
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		o := Parse(in)
		if len(o.Perfdata) != 5 {
			b.Fatal(o.Errors)
		}
	}
}
