package logtail

import (
	"strings"
	"time"
)

// parsePlain reads free text: an optional syslog priority, a leading
// timestamp (ISO-like, BSD syslog, klog, bracketed) or an access-log time in
// brackets, then a level word near the start. What is left is the message.
func parsePlain(rec *Record, line string, now time.Time) {
	s := line
	// <PRI> of a syslog line written to a file as received.
	if len(s) > 3 && s[0] == '<' {
		if j := strings.IndexByte(s[:min(len(s), 5)], '>'); j > 1 {
			if pri := smallInt(s[1:j]); pri >= 0 && pri <= 191 {
				rec.Level = syslogLevel(pri & 7)
				s = s[j+1:]
				if len(s) > 2 && s[0] == '1' && s[1] == ' ' && parseRFC5424(rec, s[2:], now) {
					return
				}
			}
		}
	}

	var ts time.Time
	var tsRaw string
	found, syslog := false, false
	if lv, t, n, ok := parseKlogPrefix(s, now); ok {
		if rec.Level == "" {
			rec.Level = lv
		}
		ts, tsRaw, found = t, s[:n], true
		s = klogHeader(rec, s[n:])
	} else if t, n, ok := parseISOPrefix(s); ok {
		ts, tsRaw, found = t, s[:n], true
		s = s[n:]
		if len(tsRaw) > 19 && tsRaw[10] == 'T' && strings.ContainsAny(tsRaw[19:], "Zz+-") {
			// rsyslog's RSYSLOG_FileFormat (Debian's default) and
			// journalctl -o short-iso: RFC 3339, then host and tag.
			var hdr bool
			s, hdr = syslogHeader(rec, s)
			syslog = hdr
		}
	} else if len(s) > 20 && s[0] == '[' {
		// "[2024-01-02 15:04:05,123] INFO ..." (Kafka, PHP, many others).
		if t, n, ok := parseISOPrefix(s[1:]); ok && n+1 < len(s) && s[n+1] == ']' {
			ts, tsRaw, found = t, s[1:n+1], true
			s = s[n+2:]
		}
	}
	if !found {
		if t, n, ok := parseSyslogPrefix(s, now); ok {
			ts, tsRaw, found, syslog = t, s[:n], true, true
			s, _ = syslogHeader(rec, s[n:])
		}
	}
	clf := false
	if !found {
		// Access logs: 1.2.3.4 - - [02/Jan/2006:15:04:05 -0700] "GET ..."
		head := s[:min(len(s), 80)]
		if j := strings.IndexByte(head, '['); j > 0 && j+27 < len(s) && s[j+27] == ']' {
			if t, ok := parseCLF(s[j+1:]); ok {
				ts, tsRaw, found, clf = t, s[j+1:j+27], true, true
			}
		}
	}
	if found {
		if saneTime(ts, now) {
			rec.Time = ts
		} else {
			rec.Time = now
			setField(rec, FieldOriginalTime, tsRaw)
		}
	}
	if clf {
		// The time is in the middle; the whole line is the message.
		rec.Message = line
		return
	}
	s = strings.TrimLeft(s, " \t")
	if found && len(s) > 1 && (s[0] == '-' || s[0] == '|') && s[1] == ' ' {
		s = strings.TrimLeft(s[1:], " \t") // "2006-01-02 15:04:05 - name - ..."
	}
	if rec.Level == "" {
		if lv, start, end := findLevel(s); lv != "" {
			rec.Level = lv
			if start == 0 && !syslog {
				// The level opens the message: drop it and its separator.
				s = strings.TrimLeft(s[end:], " \t-:|")
			}
		}
	}
	rec.Message = s
}

func setApp(rec *Record, app string) {
	if rec.App == "" {
		rec.App = app
	} else {
		setField(rec, "app", app)
	}
}

// syslogHeader reads " host tag[pid]: " after a syslog timestamp and
// returns the message and whether the header was there. When the rest does
// not have that shape it is all message.
func syslogHeader(rec *Record, s string) (string, bool) {
	if len(s) < 2 || s[0] != ' ' {
		return s, false
	}
	rest := s[1:]
	sp := strings.IndexByte(rest, ' ')
	if sp <= 0 {
		return s, false
	}
	host, tail := rest[:sp], rest[sp+1:]
	if strings.ContainsAny(host, ":[]=") || normalizeLevel(host, false) != "" {
		return s, false
	}
	// tag: [A-Za-z0-9_./@-]+, then "[pid]:" or ":".
	i := 0
	for i < len(tail) && i < 64 {
		c := tail[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '.' || c == '-' || c == '/' || c == '@') {
			break
		}
		i++
	}
	if i == 0 || i >= len(tail) {
		return s, false
	}
	tag := tail[:i]
	pid := ""
	j := i
	if tail[j] == '[' {
		k := strings.IndexByte(tail[j:], ']')
		if k < 0 {
			return s, false
		}
		pid = tail[j+1 : j+k]
		j += k + 1
	}
	if j >= len(tail) || tail[j] != ':' || normalizeLevel(tag, false) != "" {
		return s, false
	}
	setField(rec, "hostname", host)
	setApp(rec, tag)
	if pid != "" {
		setField(rec, "pid", pid)
	}
	return tail[j+1:], true
}

// klogHeader reads "   1234 file.go:12] " after a klog timestamp.
func klogHeader(rec *Record, s string) string {
	t := strings.TrimLeft(s, " ")
	sp := strings.IndexByte(t, ' ')
	if sp <= 0 || smallInt(t[:sp]) < 0 && !allDigits(t[:sp]) {
		return s
	}
	pid, rest := t[:sp], t[sp+1:]
	end := strings.Index(rest[:min(len(rest), 128)], "] ")
	if end <= 0 || strings.IndexByte(rest[:end], ' ') >= 0 {
		return s
	}
	setField(rec, "pid", pid)
	setField(rec, "source", rest[:end])
	return rest[end+2:]
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// parseRFC5424 reads "TIMESTAMP HOST APP PROCID MSGID SD MSG" after "<PRI>1 ".
func parseRFC5424(rec *Record, s string, now time.Time) bool {
	var tok [5]string
	rest := s
	for k := range tok {
		sp := strings.IndexByte(rest, ' ')
		if sp <= 0 {
			return false
		}
		tok[k], rest = rest[:sp], rest[sp+1:]
	}
	if tok[0] != "-" {
		t, n, ok := parseISOPrefix(tok[0])
		if !ok || n != len(tok[0]) {
			return false
		}
		if saneTime(t, now) {
			rec.Time = t
		} else {
			rec.Time = now
			setField(rec, FieldOriginalTime, tok[0])
		}
	}
	sd, msg, ok := structuredData(rest)
	if !ok {
		return false
	}
	for k, name := range [...]string{1: "hostname", 3: "pid", 4: "msgid"} {
		if name != "" && tok[k] != "-" {
			setField(rec, name, tok[k])
		}
	}
	if tok[2] != "-" {
		setApp(rec, tok[2])
	}
	if sd != "-" {
		setField(rec, "structured_data", sd)
	}
	msg = strings.TrimPrefix(msg, "\ufeff")
	rec.Message = msg
	return true
}

// structuredData splits RFC 5424 STRUCTURED-DATA ("-" or "[id k="v"]...")
// from the message after it.
func structuredData(s string) (sd, msg string, ok bool) {
	if strings.HasPrefix(s, "-") {
		return "-", strings.TrimPrefix(s[1:], " "), true
	}
	i := 0
	for i < len(s) && s[i] == '[' {
		i++
		for i < len(s) && s[i] != ']' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return "", "", false
		}
		i++ // ']'
	}
	if i == 0 {
		return "", "", false
	}
	return s[:i], strings.TrimPrefix(s[i:], " "), true
}

// findLevel looks for a level among the first words of s: "[ERROR]",
// "<warn>", "error:", "ERROR:root:msg", "level=warn", or a bare upper-case
// word. It returns the level and where its text is.
func findLevel(s string) (level string, start, end int) {
	i := 0
	for w := 0; w < 4 && i < len(s) && i < 96; w++ {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		start = i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		if lv, n := levelWord(s[start:i], w); lv != "" {
			return lv, start, start + n
		}
	}
	return "", 0, 0
}

// strongLevel tells the upper-case words accepted as a level even when
// they are not the first word ("2006-01-02 15:04:05 - app - ERROR - ...").
func strongLevel(w string) bool {
	switch w {
	case "TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "CRITICAL":
		return true
	}
	return false
}

// levelWord reads a level from word number pos of a line and returns it
// and how much of the word it took.
func levelWord(w string, pos int) (string, int) {
	if len(w) < 3 {
		return "", 0
	}
	n := len(w)
	if w = strings.TrimRight(w, ","); len(w) < 3 {
		return "", 0
	}
	if w[0] == '[' && w[len(w)-1] == ']' || w[0] == '<' && w[len(w)-1] == '>' {
		return normalizeLevel(strings.TrimSpace(w[1:len(w)-1]), false), n
	}
	if len(w) > 3 && w[0] == '[' && strings.HasSuffix(w, "]:") {
		return normalizeLevel(w[1:len(w)-2], false), n
	}
	if k := strings.IndexByte(w, '='); k > 0 {
		if key := w[:k]; strings.EqualFold(key, "level") || strings.EqualFold(key, "lvl") || strings.EqualFold(key, "severity") {
			return normalizeLevel(strings.Trim(w[k+1:], `"`), true), n
		}
		return "", 0
	}
	if k := strings.IndexByte(w, ':'); k > 0 && (k == len(w)-1 || pos == 0) {
		// "error: ..." anywhere near the start; "ERROR:root:msg" (Python's
		// default format) only as the first word.
		return normalizeLevel(w[:k], false), k + 1
	}
	if !hasLower(w) && (pos == 0 || strongLevel(w)) {
		return normalizeLevel(w, false), n
	}
	return "", 0
}

func hasLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			return true
		}
	}
	return false
}
