package nagios

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Range is a threshold range in the guidelines' format [@]start:end.
// StartInf means the start is negative infinity ("~"), EndInf that the end is
// positive infinity (nothing after the ':'); Start or End is then 0 and
// meaningless. Both ends are inclusive.
type Range struct {
	Start, End       float64
	StartInf, EndInf bool
	// Inside is the '@' prefix: alert when the value is inside the range
	// instead of outside it.
	Inside bool
}

// ParseRange parses a threshold range as the guidelines define it:
//
//	10      alert if < 0 or > 10   (start defaults to 0)
//	10:     alert if < 10          (no end means +infinity)
//	~:10    alert if > 10          ('~' is -infinity)
//	10:20   alert if < 10 or > 20
//	@10:20  alert if >= 10 and <= 20
//
// ":10" is accepted as 0:10, as the monitoring-plugins C library reads it.
// Numbers are decimal with '.' as the separator and an optional exponent.
func ParseRange(s string) (Range, error) {
	r, err := parseRange(s)
	if err != nil {
		return Range{}, fmt.Errorf("invalid range %q: %w", s, err)
	}
	return r, nil
}

func parseRange(s string) (Range, error) {
	var r Range
	if s == "" {
		return r, errors.New("it is empty")
	}
	if s[0] == '@' {
		r.Inside = true
		s = s[1:]
	}
	start, end, hasColon := strings.Cut(s, ":")
	if !hasColon {
		// A bare number is the end; the start is 0.
		if s == "" {
			return r, errors.New("'@' must be followed by a range, e.g. @10:20")
		}
		if s == "~" {
			return r, errors.New("'~' (negative infinity) must be followed by ':' and an end, e.g. ~:10")
		}
		v, err := parseNumber(s)
		if err != nil {
			return r, err
		}
		r.End = v
	} else {
		if strings.Contains(end, ":") {
			return r, errors.New("it has more than one ':'")
		}
		if start == "" && end == "" {
			return r, errors.New("it has neither a start nor an end")
		}
		switch start {
		case "~":
			r.StartInf = true
		case "":
			// Start 0, as the reference C implementation does.
		default:
			v, err := parseNumber(start)
			if err != nil {
				return r, fmt.Errorf("start: %w", err)
			}
			r.Start = v
		}
		switch end {
		case "":
			r.EndInf = true
		case "~":
			return r, errors.New("'~' only means negative infinity as the start; leave the end empty for positive infinity, e.g. 10:")
		default:
			v, err := parseNumber(end)
			if err != nil {
				return r, fmt.Errorf("end: %w", err)
			}
			r.End = v
		}
	}
	if !r.StartInf && !r.EndInf && r.Start > r.End {
		return r, fmt.Errorf("start %s is greater than end %s", formatNumber(r.Start), formatNumber(r.End))
	}
	return r, nil
}

// Alerts reports whether v raises an alert for this threshold: when v lies
// outside the range, or inside it for an '@' range. Both ends are inclusive
// per the guidelines, so for "10:20" neither 10 nor 20 alerts, and for
// "@10:20" both do. NaN (an undetermined "U" value) never alerts: whether an
// unknown value is a problem is the caller's decision, not the range's.
func (r Range) Alerts(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	in := (r.StartInf || v >= r.Start) && (r.EndInf || v <= r.End)
	return in == r.Inside
}

// String returns the range in its shortest guidelines form, which ParseRange
// reads back to the same Range.
func (r Range) String() string {
	var b strings.Builder
	if r.Inside {
		b.WriteByte('@')
	}
	switch {
	case r.StartInf:
		b.WriteString("~:")
	case r.Start == 0 && !r.EndInf:
		// "10" means 0:10.
	default:
		b.WriteString(formatNumber(r.Start))
		b.WriteByte(':')
	}
	if !r.EndInf {
		b.WriteString(formatNumber(r.End))
	}
	return b.String()
}

// formatNumber prints a float without an exponent, the way plugins print
// thresholds, so that String's output is valid for any plugin's -w/-c.
func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// scanNumber returns the length of the longest prefix of s that is a decimal
// number: [+-] digits [. digits] [e [+-] digits], with digits on at least one
// side of the point. It deliberately rejects what strconv.ParseFloat would
// also take (Inf, NaN, hex, '_' separators): no plugin means those, and
// taking them would hide broken output.
func scanNumber(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		frac := 0
		for j < len(s) && isDigit(s[j]) {
			j++
			frac++
		}
		if digits+frac > 0 {
			i = j
			digits += frac
		}
	}
	if digits == 0 {
		return 0
	}
	// An exponent only counts when digits follow, so "5e" is 5 with unit "e".
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > j {
			i = k
		}
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseNumber parses s, which must be exactly one number as scanNumber
// defines it, with an error worded for whoever wrote or runs the plugin.
func parseNumber(s string) (float64, error) {
	n := scanNumber(s)
	if n == 0 || n != len(s) {
		return 0, notANumber(s, n)
	}
	return toFloat(s)
}

// notANumber explains why s (whose first n bytes are numeric) is not a
// number, pointing out comma decimals, the usual cause: a plugin run under a
// locale such as de_DE. They are refused rather than read as '.', since
// "1,500" may as well mean fifteen hundred.
func notANumber(s string, n int) error {
	if n > 0 && n+1 < len(s) && s[n] == ',' && isDigit(s[n+1]) {
		return fmt.Errorf("%q uses ',' as the decimal separator (a locale setting of the plugin?); the guidelines require '.'", s)
	}
	return fmt.Errorf("%q is not a number", s)
}

// toFloat converts a string already checked by scanNumber.
func toFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Only overflow is possible here, e.g. "1e999".
		return 0, fmt.Errorf("%q is out of the range of a 64-bit float", s)
	}
	return v, nil
}
