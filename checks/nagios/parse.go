package nagios

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Output is a plugin's stdout, split as the guidelines lay it out:
//
//	TEXT OUTPUT | OPTIONAL PERFDATA
//	LONG TEXT LINE 1
//	LONG TEXT LINE 2
//	...
//	LONG TEXT LINE N | PERFDATA LINE 2
//	PERFDATA LINE 3
//	...
type Output struct {
	// Text is the first line up to its first '|', trimmed.
	Text string
	// LongText is lines 2..n up to the first '|' found in them, joined with
	// "\n". Each line loses its trailing white space (and so a CR of CRLF
	// output), leading and trailing blank lines are dropped, and indentation
	// is kept since plugins use it for structure.
	LongText string
	// Perfdata holds the items parsed from the first line's perfdata and from
	// everything after the first '|' of the later lines, in order; nil if
	// there are none.
	Perfdata []Perf
	// Errors describes each perfdata item that could not be parsed (its text
	// and why), and each threshold, min or max that was dropped from an item
	// whose value was still kept.
	Errors []string
}

// Perf is one performance data item: 'label'=value[UOM];[warn];[crit];[min];[max].
type Perf struct {
	// Label is the label without its enclosing quotes and with each
	// doubled quote inside them unescaped to a single one.
	Label string
	// Value is NaN when the plugin printed "U" (the value could not be
	// determined), which the guidelines allow; it is not an error.
	Value float64
	// UOM is the unit as printed: "", "s", "ms", "us", "%", "B", "KB", "MB",
	// "GB", "TB", "c" per the guidelines, or any other unit a plugin uses.
	UOM string
	// Warn and Crit are the parsed thresholds, nil when the field is empty
	// or could not be parsed (see Output.Errors).
	Warn, Crit *Range
	// WarnText and CritText are the threshold fields exactly as printed,
	// empty when the field was empty or rejected (see Output.Errors).
	WarnText, CritText string
	// Min and Max are nil when the plugin left them out.
	Min, Max *float64
}

// maxErrors bounds Output.Errors: text that merely contains '|' (a table in
// the long output, say) turns everything after it into perfdata, and a
// thousand lines of "not a perfdata item" helps no operator.
const maxErrors = 20

// maxPrealloc bounds the Perfdata capacity Parse reserves up front.
const maxPrealloc = 64

// errCut names an item dropped because the output's size cap ended inside it.
const errCut = "cut off by the output size limit; dropped"

// maxItemQuote bounds how much of a bad item an error message quotes.
const maxItemQuote = 120

// Parse splits a plugin's output into text, long text and perfdata. It never
// fails: malformed perfdata items are described in Output.Errors and the rest
// is still parsed. A '|' always ends the text part, even inside quotes,
// because status text is prose ("can't connect") where a quote is just an
// apostrophe; within perfdata, quotes do protect '|' in labels and a
// stray unquoted '|' separates items like white space.
func Parse(output string) Output { return parse(output, false) }

// ParseCut parses output that a size cap cut short. The last perfdata item
// may have lost characters (`cut=123456789` cut to `cut=1234`), so an item
// that runs to the very end of the output is dropped and named in Errors
// rather than exported as a wrong number.
func ParseCut(output string) Output { return parse(output, true) }

func parse(output string, cut bool) Output {
	var out Output
	p := perfParser{out: &out}

	first, rest, multiline := strings.Cut(output, "\n")
	text, perf1, _ := strings.Cut(first, "|")
	out.Text = strings.TrimSpace(text)
	var perf2 string
	if multiline {
		var long string
		long, perf2, _ = strings.Cut(rest, "|")
		out.LongText = cleanLongText(long)
	}
	// Size Perfdata once: each item has one '='. Capped, since garbage
	// full of '=' must not make us allocate for it.
	if n := strings.Count(perf1, "=") + strings.Count(perf2, "="); n > 0 {
		out.Perfdata = make([]Perf, 0, min(n, maxPrealloc))
	}
	// Only the section that holds the output's end can have been cut.
	p.parse(perf1, cut && !multiline)
	p.parse(perf2, cut && multiline)
	if len(out.Perfdata) == 0 {
		out.Perfdata = nil // nil whenever there is none, as documented
	}
	if p.dropped > 0 {
		out.Errors = append(out.Errors, fmt.Sprintf("%d more perfdata problems not listed", p.dropped))
	}
	return out
}

// cleanLongText trims each line's end and drops blank lines at both ends.
func cleanLongText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRightFunc(l, isSpaceRune)
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

func isSpaceRune(r rune) bool {
	return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f'
}

// isSep reports whether c separates perfdata items. Newlines count because
// perfdata after a later line's '|' runs on over the following lines.
func isSep(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '|':
		return true
	}
	return false
}

type perfParser struct {
	out     *Output
	dropped int // errors beyond maxErrors
}

func (p *perfParser) errorf(item, format string, args ...any) {
	if len(p.out.Errors) >= maxErrors {
		p.dropped++
		return
	}
	p.out.Errors = append(p.out.Errors, fmt.Sprintf("perfdata %q: ", quoteItem(item))+fmt.Sprintf(format, args...))
}

// quoteItem shortens an item for an error message, on a rune boundary.
func quoteItem(s string) string {
	if len(s) <= maxItemQuote {
		return s
	}
	n := maxItemQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// parse reads the space-separated items of one perfdata section. When cut,
// the section ends where a size cap cut the output, and an item reaching
// that end is incomplete.
func (p *perfParser) parse(s string, cut bool) {
	i := 0
	for i < len(s) {
		if isSep(s[i]) {
			i++
			continue
		}
		if s[i] == '\'' {
			i = p.quoted(s, i, cut)
			continue
		}
		end := i
		for end < len(s) && !isSep(s[end]) {
			end++
		}
		item := s[i:end]
		if cut && end == len(s) {
			p.errorf(item, errCut)
			return
		}
		label, data, ok := strings.Cut(item, "=")
		switch {
		case !ok:
			p.errorf(item, "not a perfdata item: no '=' between label and value")
		case label == "":
			p.errorf(item, "the label before '=' is empty")
		default:
			p.item(item, label, data)
		}
		i = end
	}
}

// quoted reads an item whose label starts with a quote at s[i] and returns
// where the next item may start. Inside the quotes a doubled quote stands
// for one quote, and spaces, '=' and '|' are part of the label.
func (p *perfParser) quoted(s string, i int, cut bool) int {
	j := i + 1
	escaped := false
	for {
		if j >= len(s) || s[j] == '\n' || s[j] == '\r' {
			// No closing quote on this line: nothing after the quote can be
			// attributed safely, so give up on the rest of the line rather
			// than report its pieces under wrong labels.
			end := j
			for end < len(s) && s[end] != '\n' {
				end++
			}
			if cut && end == len(s) {
				p.errorf(s[i:end], errCut)
			} else {
				p.errorf(s[i:end], "the quoted label has no closing quote")
			}
			return end
		}
		if s[j] == '\'' {
			if j+1 < len(s) && s[j+1] == '\'' {
				escaped = true
				j += 2
				continue
			}
			break
		}
		j++
	}
	label := s[i+1 : j]
	if escaped {
		label = strings.ReplaceAll(label, "''", "'")
	}
	j++ // past the closing quote
	end := j
	for end < len(s) && !isSep(s[end]) {
		end++
	}
	item := s[i:end]
	if cut && end == len(s) {
		p.errorf(item, errCut)
		return end
	}
	switch {
	case j >= len(s) || s[j] != '=':
		p.errorf(item, "the quoted label must be followed directly by '='")
	case label == "":
		p.errorf(item, "the label is empty")
	default:
		p.item(item, label, s[j+1:end])
	}
	return end
}

// optional holds an item's thresholds and bounds so that one allocation
// serves the four pointers of Perf.
type optional struct {
	warn, crit Range
	min, max   float64
}

// item parses data, the part after '=': value[UOM];[warn];[crit];[min];[max].
// A bad value drops the item; a bad threshold or bound only drops that field,
// since the value itself is still worth graphing.
func (p *perfParser) item(item, label, data string) {
	var fields [5]string
	n := 0
	for rest := data; ; n++ {
		if n == len(fields) {
			p.errorf(item, "too many ';'-separated fields: at most 5 are allowed (value;warn;crit;min;max)")
			return
		}
		f, r, more := strings.Cut(rest, ";")
		fields[n] = f
		if !more {
			break
		}
		rest = r
	}

	perf := Perf{Label: label}
	switch v := fields[0]; {
	case v == "":
		p.errorf(item, "there is no value after '='")
		return
	case v == "U":
		perf.Value = math.NaN()
	default:
		k := scanNumber(v)
		if k == 0 || (k < len(v) && !validUOM(v[k:])) {
			err := notANumber(v, k)
			if k > 0 && v[k] != ',' {
				err = fmt.Errorf("%q is not a number followed by a unit", v)
			}
			p.errorf(item, "value %v", err)
			return
		}
		f, err := toFloat(v[:k])
		if err != nil {
			p.errorf(item, "value %v", err)
			return
		}
		perf.Value, perf.UOM = f, v[k:]
	}

	var opt *optional
	get := func() *optional {
		if opt == nil {
			opt = new(optional)
		}
		return opt
	}
	// A rejected threshold keeps no text either: an event must not carry a
	// threshold that nothing evaluated.
	if t := fields[1]; t != "" {
		if r, err := parseRange(t); err != nil {
			p.errorf(item, "warning threshold %q ignored: %v", t, err)
		} else {
			perf.WarnText = t
			o := get()
			o.warn = r
			perf.Warn = &o.warn
		}
	}
	if t := fields[2]; t != "" {
		if r, err := parseRange(t); err != nil {
			p.errorf(item, "critical threshold %q ignored: %v", t, err)
		} else {
			perf.CritText = t
			o := get()
			o.crit = r
			perf.Crit = &o.crit
		}
	}
	if t := fields[3]; t != "" {
		if v, err := parseNumber(t); err != nil {
			p.errorf(item, "min ignored: %v", err)
		} else {
			o := get()
			o.min = v
			perf.Min = &o.min
		}
	}
	if t := fields[4]; t != "" {
		if v, err := parseNumber(t); err != nil {
			p.errorf(item, "max ignored: %v", err)
		} else {
			o := get()
			o.max = v
			perf.Max = &o.max
		}
	}
	p.out.Perfdata = append(p.out.Perfdata, perf)
}

// validUOM accepts any unit that cannot be the rest of a malformed number:
// "1.2.3" or "0,5" must not pass as 1.2 with unit ".3" or 0 with ",5".
func validUOM(u string) bool {
	if u[0] == '+' || u[0] == '-' {
		return false
	}
	return !strings.ContainsAny(u, "0123456789.,'=")
}
