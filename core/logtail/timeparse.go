package logtail

import (
	"strconv"
	"strings"
	"time"
)

// Timestamps outside [now-maxPast, now+maxFuture] are not trusted: a host
// with a broken clock must not write records that the store's retention
// drops at once or keeps forever.
const (
	maxFuture = 24 * time.Hour
	maxPast   = 365 * 24 * time.Hour
)

func saneTime(t, now time.Time) bool {
	return !t.After(now.Add(maxFuture)) && !t.Before(now.Add(-maxPast))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// dn parses n decimal digits at s[i:], -1 if they are not all digits (or
// s is too short).
func dn(s string, i, n int) int {
	if i+n > len(s) {
		return -1
	}
	v := 0
	for k := i; k < i+n; k++ {
		c := s[k]
		if !isDigit(c) {
			return -1
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// fraction parses ".123" or ",123" (Python logging uses a comma) at s[i:]
// and returns nanoseconds and the index after it.
func fraction(s string, i int) (nsec, next int) {
	if i+1 >= len(s) || (s[i] != '.' && s[i] != ',') || !isDigit(s[i+1]) {
		return 0, i
	}
	i++
	digits := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		if digits < 9 {
			nsec = nsec*10 + int(s[i]-'0')
			digits++
		}
	}
	for ; digits < 9; digits++ {
		nsec *= 10
	}
	return nsec, i
}

func validClock(hh, mm, ss int) bool {
	return hh >= 0 && hh <= 23 && mm >= 0 && mm <= 59 && ss >= 0 && ss <= 60
}

// parseISOPrefix parses an ISO-8601-like timestamp at the start of s:
// "2006-01-02T15:04:05", with ' ' instead of 'T', '/' instead of '-'
// (Go's log package, nginx), an optional ".frac" or ",frac" and an optional
// zone "Z", "+07:00", "+0700", "+07", " +0700" (Go's time.String) or " UTC".
// Without a zone the time is local. It returns the number of bytes used.
// It is hand-written because plain lines are tried against it on every
// line and time.Parse with several layouts is several times slower.
func parseISOPrefix(s string) (t time.Time, n int, ok bool) {
	if len(s) < 19 {
		return t, 0, false
	}
	year := dn(s, 0, 4)
	sep := s[4]
	if year < 0 || (sep != '-' && sep != '/') || s[7] != sep {
		return t, 0, false
	}
	month, day := dn(s, 5, 2), dn(s, 8, 2)
	if c := s[10]; c != 'T' && c != 't' && c != ' ' {
		return t, 0, false
	}
	if s[13] != ':' || s[16] != ':' {
		return t, 0, false
	}
	hh, mm, ss := dn(s, 11, 2), dn(s, 14, 2), dn(s, 17, 2)
	if month < 1 || month > 12 || day < 1 || day > 31 || !validClock(hh, mm, ss) {
		return t, 0, false
	}
	nsec, i := fraction(s, 19)

	loc := time.Local
	var off int // seconds east of UTC
	numeric := false
	j := i
	if j+1 < len(s) && s[j] == ' ' && (s[j+1] == '+' || s[j+1] == '-') {
		j++ // "2006-01-02 15:04:05 +0700"
	}
	if j < len(s) {
		switch c := s[j]; c {
		case 'Z', 'z':
			loc, i = time.UTC, j+1
		case '+', '-':
			if zh := dn(s, j+1, 2); zh >= 0 && zh <= 14 {
				zm, k := 0, j+3
				switch {
				case k < len(s) && s[k] == ':' && dn(s, k+1, 2) >= 0:
					zm, k = dn(s, k+1, 2), k+3
				case dn(s, k, 2) >= 0:
					zm, k = dn(s, k, 2), k+2
				}
				off = (zh*60 + zm) * 60
				if c == '-' {
					off = -off
				}
				loc, i, numeric = time.UTC, k, true
			}
		}
	}
	switch {
	case numeric:
		// Go's time.String appends the zone name after the offset, which
		// already says everything.
		i += zoneName(s[i:])
	case loc == time.Local:
		if rest := s[i:]; strings.HasPrefix(rest, " UTC") || strings.HasPrefix(rest, " GMT") {
			loc, i = time.UTC, i+4
		}
	}
	t = time.Date(year, time.Month(month), day, hh, mm, ss, nsec, loc)
	if off != 0 {
		// Building the instant in UTC and shifting avoids allocating a
		// FixedZone per line.
		t = t.Add(-time.Duration(off) * time.Second)
	}
	return t, i, true
}

// zoneName returns the length of a " MST"-style zone abbreviation at the
// start of s, 0 if there is none.
func zoneName(s string) int {
	if len(s) < 4 || s[0] != ' ' {
		return 0
	}
	n := 1
	for n < len(s) && n <= 6 && 'A' <= s[n] && s[n] <= 'Z' {
		n++
	}
	if n < 4 || n > 6 || (n < len(s) && s[n] != ' ') || normalizeLevel(s[1:n], false) != "" {
		return 0 // "+0000 WARN ..." is a level, not a zone
	}
	return n
}

func monthAbbrev(s string) time.Month {
	if len(s) < 3 {
		return 0
	}
	switch s[:3] {
	case "Jan":
		return time.January
	case "Feb":
		return time.February
	case "Mar":
		return time.March
	case "Apr":
		return time.April
	case "May":
		return time.May
	case "Jun":
		return time.June
	case "Jul":
		return time.July
	case "Aug":
		return time.August
	case "Sep":
		return time.September
	case "Oct":
		return time.October
	case "Nov":
		return time.November
	case "Dec":
		return time.December
	}
	return 0
}

// withYear completes a local time that has no year (syslog, klog): the
// current year, or the previous one when that would put it in the future
// (December lines read in January).
func withYear(month time.Month, day, hh, mm, ss, nsec int, now time.Time) time.Time {
	t := time.Date(now.Year(), month, day, hh, mm, ss, nsec, time.Local)
	if t.After(now.Add(maxFuture)) {
		t = time.Date(now.Year()-1, month, day, hh, mm, ss, nsec, time.Local)
	}
	return t
}

// parseSyslogPrefix parses a BSD syslog timestamp "Jan _2 15:04:05" (with
// an optional fraction, as rsyslog's high-precision format omits the year
// but some setups add microseconds) at the start of s.
func parseSyslogPrefix(s string, now time.Time) (t time.Time, n int, ok bool) {
	if len(s) < 14 || s[3] != ' ' {
		return t, 0, false
	}
	month := monthAbbrev(s)
	if month == 0 {
		return t, 0, false
	}
	i := 4
	if s[i] == ' ' {
		i++ // space-padded day
	}
	day := 0
	switch {
	case dn(s, i, 2) >= 0:
		day, i = dn(s, i, 2), i+2
	case dn(s, i, 1) >= 0:
		day, i = dn(s, i, 1), i+1
	default:
		return t, 0, false
	}
	if i+9 > len(s) || s[i] != ' ' || s[i+3] != ':' || s[i+6] != ':' {
		return t, 0, false
	}
	hh, mm, ss := dn(s, i+1, 2), dn(s, i+4, 2), dn(s, i+7, 2)
	if day < 1 || day > 31 || !validClock(hh, mm, ss) {
		return t, 0, false
	}
	nsec, i := fraction(s, i+9)
	return withYear(month, day, hh, mm, ss, nsec, now), i, true
}

// parseKlogPrefix parses the header of Kubernetes' klog/glog lines,
// "E0102 15:04:05.123456", which carries the level as its first letter.
func parseKlogPrefix(s string, now time.Time) (level string, t time.Time, n int, ok bool) {
	if len(s) < 21 || s[5] != ' ' || s[8] != ':' || s[11] != ':' || s[14] != '.' {
		return "", t, 0, false
	}
	switch s[0] {
	case 'I':
		level = LevelInfo
	case 'W':
		level = LevelWarn
	case 'E':
		level = LevelError
	case 'F':
		level = LevelFatal
	default:
		return "", t, 0, false
	}
	month, day := dn(s, 1, 2), dn(s, 3, 2)
	hh, mm, ss := dn(s, 6, 2), dn(s, 9, 2), dn(s, 12, 2)
	if month < 1 || month > 12 || day < 1 || day > 31 || !validClock(hh, mm, ss) {
		return "", t, 0, false
	}
	nsec, i := fraction(s, 14)
	return level, withYear(time.Month(month), day, hh, mm, ss, nsec, now), i, true
}

// parseCLF parses the Common Log Format time "02/Jan/2006:15:04:05 -0700"
// (nginx and Apache access logs) at the start of s.
func parseCLF(s string) (t time.Time, ok bool) {
	if len(s) < 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' {
		return t, false
	}
	day, month, year := dn(s, 0, 2), monthAbbrev(s[3:]), dn(s, 7, 4)
	hh, mm, ss := dn(s, 12, 2), dn(s, 15, 2), dn(s, 18, 2)
	zh, zm := dn(s, 22, 2), dn(s, 24, 2)
	if day < 1 || day > 31 || month == 0 || year < 0 || !validClock(hh, mm, ss) || zh < 0 || zm < 0 || (s[21] != '+' && s[21] != '-') {
		return t, false
	}
	off := time.Duration(zh*60+zm) * time.Minute
	if s[21] == '-' {
		off = -off
	}
	return time.Date(year, month, day, hh, mm, ss, 0, time.UTC).Add(-off), true
}

// parseUnix parses a Unix time given as a decimal number. The unit is
// guessed from the number of integer digits: up to 10 seconds (good until
// 2286), 13 milliseconds, 16 microseconds, 19 nanoseconds. Loggers use all
// four (zap: float seconds, pino/bunyan: ms, journald: µs).
func parseUnix(s string) (time.Time, bool) {
	if s == "" || s[0] == '-' {
		return time.Time{}, false
	}
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1e19 {
			return time.Time{}, false
		}
		for f >= 1e11 { // same unit guess as below
			f /= 1000
		}
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), true
	}
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" || len(ip) > 19 {
		return time.Time{}, false
	}
	var unit int64
	switch {
	case len(ip) <= 10:
		unit = 1e9
	case len(ip) <= 13:
		unit = 1e6
	case len(ip) <= 16:
		unit = 1e3
	default:
		unit = 1
	}
	n, err := strconv.ParseInt(ip, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var frac, scale int64 = 0, 1
	for i := 0; i < len(fp); i++ {
		c := fp[i]
		if !isDigit(c) {
			return time.Time{}, false
		}
		if i < 9 {
			frac = frac*10 + int64(c-'0')
			scale *= 10
		}
	}
	if n > (1<<63-1)/unit {
		return time.Time{}, false
	}
	return time.Unix(0, n*unit+frac*unit/scale).UTC(), true
}

func looksNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && c != '.' {
			return false
		}
	}
	return true
}

// parseTimeValue parses the value of a time field (JSON, logfmt): a Unix
// number, an ISO-like timestamp or one of the common textual layouts.
func parseTimeValue(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if looksNumeric(s) || strings.ContainsAny(s, "eE") && !strings.ContainsAny(s, " :") {
		return parseUnix(s)
	}
	if t, n, ok := parseISOPrefix(s); ok && n == len(s) {
		return t, true
	}
	if t, ok := parseCLF(s); ok && len(s) == 26 {
		return t, true
	}
	if t, n, ok := parseSyslogPrefix(s, now); ok && n == len(s) {
		return t, true
	}
	for _, layout := range [...]string{time.RFC1123Z, time.RFC1123, time.RFC850, time.ANSIC, time.UnixDate, time.RubyDate} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
