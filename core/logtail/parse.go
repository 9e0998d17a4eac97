package logtail

import (
	"strings"
	"time"
)

// Formats of FileConfig.Format.
const (
	FormatAuto   = "auto"   // JSON, logfmt or plain, decided per line
	FormatJSON   = "json"   // one JSON object per line
	FormatLogfmt = "logfmt" // key=value pairs (Go slog text, logrus, go-kit)
	FormatPlain  = "plain"  // free text with an optional leading timestamp and level
)

// Field names that the parsers set in Record.Fields besides the line's own.
const (
	// FieldOriginalTime holds a timestamp that was replaced by the read
	// time because it was too far in the future or the past.
	FieldOriginalTime = "original_time"
)

// role is what a key of a structured line means for Record.
type role uint8

const (
	roleNone role = iota
	roleTime
	roleLevel
	roleMessage
	roleApp
	roleTrace
	numRoles
)

// How the value of a level key is read.
const (
	levelKindWord   = iota // "warn", "E", or pino's 10..60
	levelKindOTel          // OpenTelemetry SeverityNumber 1..24
	levelKindSyslog        // syslog severity 0..7 (journald PRIORITY)
)

// keyRole says which Record field a key fills. Lower rank wins when a line
// has several keys for one role (msg over log); the losers go to Fields.
// Matching ignores case: journald writes MESSAGE, Serilog Level.
func keyRole(key string) (r role, rank, kind int8) {
	var buf [24]byte
	b := lowerASCII(buf[:], key)
	if b == nil {
		return roleNone, 0, 0
	}
	switch string(b) {
	case "time", "ts", "timestamp", "@timestamp", "@t", "datetime":
		return roleTime, 0, 0
	case "asctime", "__realtime_timestamp", "eventtime", "event_time", "date":
		return roleTime, 1, 0
	case "level", "lvl", "severity", "levelname", "loglevel", "log_level", "log.level", "@l", "severity_text", "severitytext":
		return roleLevel, 0, levelKindWord
	case "severity_number", "severitynumber":
		return roleLevel, 1, levelKindOTel
	case "priority", "syslog.severity", "syslog_severity":
		return roleLevel, 2, levelKindSyslog
	case "msg", "message", "@m":
		return roleMessage, 0, 0
	case "log", "body", "short_message":
		return roleMessage, 1, 0 // Docker's json-file driver, OTel, GELF
	case "app", "service", "service.name", "application", "app_name", "appname", "service_name":
		return roleApp, 0, 0
	case "syslog_identifier", "syslog.appname":
		return roleApp, 1, 0
	case "trace_id", "traceid", "trace.id", "dd.trace_id":
		return roleTrace, 0, 0
	}
	return roleNone, 0, 0
}

// kv is one key and value of a structured line.
type kv struct {
	key, val string
	num      bool // a JSON number: a time value is then Unix time
}

// parser turns lines into records. It keeps scratch space between lines and
// so belongs to one goroutine.
type parser struct {
	kvs []kv
}

// parse fills the line-derived fields of rec (Time, Level, App when rec.App
// is still empty, TraceID, Message, Fields). line is valid UTF-8 without its
// newline; now is the read time.
func (p *parser) parse(rec *Record, line, format string, now time.Time) {
	switch format {
	case FormatJSON:
		if p.parseJSON(line) {
			p.assemble(rec, now)
		} else {
			parsePlain(rec, line, now)
		}
	case FormatLogfmt:
		if p.parseLogfmt(line, false) {
			p.assemble(rec, now)
		} else {
			parsePlain(rec, line, now)
		}
	case FormatPlain:
		parsePlain(rec, line, now)
	default:
		switch {
		case firstNonSpace(line) == '{' && p.parseJSON(line):
			p.assemble(rec, now)
		case p.parseLogfmt(line, true):
			p.assemble(rec, now)
		default:
			parsePlain(rec, line, now)
		}
	}
	if rec.Time.IsZero() {
		rec.Time = now
	}
}

func firstNonSpace(s string) byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' {
			return c
		}
	}
	return 0
}

func setField(rec *Record, k, v string) {
	if rec.Fields == nil {
		rec.Fields = make(map[string]string, 4)
	}
	rec.Fields[k] = v
}

// assemble maps p.kvs onto rec: the best key of each role fills its Record
// field, everything else (and values that do not parse) goes to Fields.
func (p *parser) assemble(rec *Record, now time.Time) {
	kvs := p.kvs
	var best [numRoles]int // index+1 into kvs
	var rank, kind [numRoles]int8
	for i := range kvs {
		r, rk, kd := keyRole(kvs[i].key)
		if r == roleNone || (best[r] != 0 && rank[r] <= rk) {
			continue
		}
		best[r], rank[r], kind[r] = i+1, rk, kd
	}
	if i := best[roleTime]; i > 0 {
		v := &kvs[i-1]
		var t time.Time
		var ok bool
		if v.num {
			t, ok = parseUnix(v.val)
		} else {
			t, ok = parseTimeValue(v.val, now)
		}
		switch {
		case !ok:
			best[roleTime] = 0 // keep it as a field
		case saneTime(t, now):
			rec.Time = t
		default:
			rec.Time = now
			setField(rec, FieldOriginalTime, v.val)
		}
	}
	if i := best[roleLevel]; i > 0 {
		v := kvs[i-1].val
		switch kind[roleLevel] {
		case levelKindOTel:
			rec.Level = otelLevel(smallInt(v))
		case levelKindSyslog:
			rec.Level = syslogLevel(smallInt(v))
		default:
			if n := smallInt(v); n >= 0 {
				rec.Level = numericLevel(n)
			} else {
				rec.Level = normalizeLevel(v, true)
			}
		}
		if rec.Level == "" {
			best[roleLevel] = 0 // unknown level: keep the original
		}
	}
	if i := best[roleMessage]; i > 0 {
		rec.Message = strings.TrimRight(kvs[i-1].val, "\r\n")
	}
	if i := best[roleApp]; i > 0 {
		if rec.App == "" {
			rec.App = kvs[i-1].val
		} else {
			best[roleApp] = 0 // configured App wins; keep the line's as a field
		}
	}
	if i := best[roleTrace]; i > 0 {
		rec.TraceID = kvs[i-1].val
	}

	n := len(kvs)
	for _, b := range best {
		if b > 0 {
			n--
		}
	}
	if n == 0 {
		return
	}
	if rec.Fields == nil {
		rec.Fields = make(map[string]string, n)
	}
	for i := range kvs {
		if best[roleTime] == i+1 || best[roleLevel] == i+1 || best[roleMessage] == i+1 || best[roleApp] == i+1 || best[roleTrace] == i+1 {
			continue
		}
		rec.Fields[kvs[i].key] = kvs[i].val
	}
}
