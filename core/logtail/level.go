package logtail

// Normalized levels. Record.Level is one of these or "".
const (
	LevelTrace = "trace"
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
	LevelFatal = "fatal"
)

// lowerASCII writes the ASCII lower case of s into buf and returns it, or
// nil when s does not fit. Key and level lookups use it so that matching is
// case-insensitive without allocating.
func lowerASCII(buf []byte, s string) []byte {
	if len(s) > len(buf) {
		return nil
	}
	b := buf[:len(s)]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return b
}

// normalizeLevel maps a level word to a normalized level, "" when it is not
// one. Single letters (W, E, ...) are accepted only when letters is true:
// they are unambiguous in a level field but not as words in free text.
func normalizeLevel(s string, letters bool) string {
	var buf [16]byte
	b := lowerASCII(buf[:], s)
	if b == nil {
		return ""
	}
	if len(b) == 1 {
		if !letters {
			return ""
		}
		switch b[0] {
		case 't':
			return LevelTrace
		case 'd':
			return LevelDebug
		case 'i', 'n':
			return LevelInfo
		case 'w':
			return LevelWarn
		case 'e':
			return LevelError
		case 'f', 'c':
			return LevelFatal
		}
		return ""
	}
	switch string(b) {
	case "trace", "trc", "trac", "finest", "finer", "verbose":
		return LevelTrace
	case "debug", "dbg", "debu", "fine":
		return LevelDebug
	case "info", "inf", "information", "informational", "notice", "config":
		return LevelInfo
	case "warn", "warning", "wrn", "warnings":
		return LevelWarn
	case "error", "err", "erro", "eror", "errors", "severe":
		return LevelError
	case "fatal", "fata", "ftl", "crit", "critical", "alert", "emerg", "emergency", "panic", "pani", "dpanic":
		return LevelFatal
	}
	return ""
}

// syslogLevel maps a syslog severity (0 emerg .. 7 debug).
func syslogLevel(sev int) string {
	switch {
	case sev < 0 || sev > 7:
		return ""
	case sev <= 2:
		return LevelFatal // emerg, alert, crit
	case sev == 3:
		return LevelError
	case sev == 4:
		return LevelWarn
	case sev <= 6:
		return LevelInfo // notice, info
	}
	return LevelDebug
}

// numericLevel maps a number found in a level field. Only the bunyan/pino
// scale (10 trace .. 60 fatal) is unambiguous there; a bare 0..7 could be
// syslog or something else, so it stays unknown.
func numericLevel(n int) string {
	switch n {
	case 10:
		return LevelTrace
	case 20:
		return LevelDebug
	case 30:
		return LevelInfo
	case 40:
		return LevelWarn
	case 50:
		return LevelError
	case 60:
		return LevelFatal
	}
	return ""
}

// otelLevel maps an OpenTelemetry SeverityNumber (1..24).
func otelLevel(n int) string {
	switch {
	case n < 1 || n > 24:
		return ""
	case n <= 4:
		return LevelTrace
	case n <= 8:
		return LevelDebug
	case n <= 12:
		return LevelInfo
	case n <= 16:
		return LevelWarn
	case n <= 20:
		return LevelError
	}
	return LevelFatal
}

// smallInt parses a short unsigned decimal, -1 when s is not one.
func smallInt(s string) int {
	if len(s) == 0 || len(s) > 4 {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
