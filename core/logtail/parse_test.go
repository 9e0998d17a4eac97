package logtail

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// corpusNow is the read time of the corpus: its lines are from shortly before.
var corpusNow = time.Date(2024, 1, 2, 16, 0, 0, 0, time.UTC)

type corpusCase struct {
	name, format, cfgApp, line string
	want                       Record
	lineNo                     int
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []corpusCase
	var c *corpusCase
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(l, "== "); ok {
			cases = append(cases, corpusCase{name: name, lineNo: n, want: Record{Time: corpusNow}})
			c = &cases[len(cases)-1]
			continue
		}
		if c == nil {
			t.Fatalf("corpus.txt:%d: no case", n)
		}
		if line, ok := strings.CutPrefix(l, "> "); ok {
			c.line = line
			continue
		}
		key, val, _ := strings.Cut(l, " ")
		switch key {
		case "format":
			c.format = val
		case "app":
			if c.line == "" {
				c.cfgApp = val
			}
			c.want.App = val
		case "time":
			tm, err := time.Parse(time.RFC3339Nano, val)
			if err != nil {
				t.Fatalf("corpus.txt:%d: %v", n, err)
			}
			c.want.Time = tm
		case "localtime":
			tm, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", val, time.Local)
			if err != nil {
				t.Fatalf("corpus.txt:%d: %v", n, err)
			}
			c.want.Time = tm
		case "level":
			c.want.Level = val
		case "trace":
			c.want.TraceID = val
		case "msg":
			c.want.Message = val
		case "field":
			k, v, _ := strings.Cut(val, "=")
			if c.want.Fields == nil {
				c.want.Fields = map[string]string{}
			}
			c.want.Fields[k] = v
		default:
			if k, rest, ok := strings.Cut(l, "+"); ok && k == "msg" {
				c.want.Message += "\n" + rest
				continue
			}
			t.Fatalf("corpus.txt:%d: unknown key %q", n, key)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestParseCorpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 40 {
		t.Fatalf("corpus has %d cases", len(cases))
	}
	var p parser
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.line == "" {
				t.Fatalf("corpus.txt:%d: no line", c.lineNo)
			}
			format := c.format
			if format == "" {
				format = FormatAuto
			}
			got := Record{App: c.cfgApp}
			p.parse(&got, c.line, format, corpusNow)
			if !got.Time.Equal(c.want.Time) {
				t.Errorf("time = %v, want %v", got.Time, c.want.Time)
			}
			if got.Level != c.want.Level {
				t.Errorf("level = %q, want %q", got.Level, c.want.Level)
			}
			if got.App != c.want.App {
				t.Errorf("app = %q, want %q", got.App, c.want.App)
			}
			if got.TraceID != c.want.TraceID {
				t.Errorf("trace = %q, want %q", got.TraceID, c.want.TraceID)
			}
			if got.Message != c.want.Message {
				t.Errorf("message = %q\n                    want %q", got.Message, c.want.Message)
			}
			if !maps.Equal(got.Fields, c.want.Fields) {
				t.Errorf("fields = %q\n           want %q", got.Fields, c.want.Fields)
			}
		})
	}
}

func TestNormalizeLevel(t *testing.T) {
	for in, want := range map[string]string{
		"WARNING": LevelWarn, "warn": LevelWarn, "W": LevelWarn, "Warn": LevelWarn,
		"ERR": LevelError, "error": LevelError, "E": LevelError, "SEVERE": LevelError,
		"CRIT": LevelFatal, "FATAL": LevelFatal, "panic": LevelFatal, "emerg": LevelFatal, "alert": LevelFatal,
		"notice": LevelInfo, "INFO": LevelInfo, "information": LevelInfo, "I": LevelInfo,
		"debug": LevelDebug, "DBG": LevelDebug, "trace": LevelTrace, "finest": LevelTrace,
		"": "", "x": "", "warnings-ish": "", "verbose-level-name-too-long": "",
	} {
		if got := normalizeLevel(in, true); got != want {
			t.Errorf("normalizeLevel(%q) = %q, want %q", in, got, want)
		}
	}
	if got := normalizeLevel("E", false); got != "" {
		t.Errorf("single letter outside a level field = %q", got)
	}
	for sev, want := range []string{LevelFatal, LevelFatal, LevelFatal, LevelError, LevelWarn, LevelInfo, LevelInfo, LevelDebug} {
		if got := syslogLevel(sev); got != want {
			t.Errorf("syslogLevel(%d) = %q, want %q", sev, got, want)
		}
	}
}

func TestParseTimeValue(t *testing.T) {
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for in, want := range map[string]time.Time{
		"2024-01-02T15:04:05Z":                    utc("2024-01-02T15:04:05Z"),
		"2024-01-02T15:04:05.123456789Z":          utc("2024-01-02T15:04:05.123456789Z"),
		"2024-01-02T15:04:05-07:00":               utc("2024-01-02T22:04:05Z"),
		"2024-01-02T15:04:05+0530":                utc("2024-01-02T09:34:05Z"),
		"2024-01-02 15:04:05.123 +0000 UTC":       utc("2024-01-02T15:04:05.123Z"),
		"2024-01-02 15:04:05.123456789 +0100 CET": utc("2024-01-02T14:04:05.123456789Z"),
		"1704207845":                              utc("2024-01-02T15:04:05Z"),
		"1704207845.5":                            utc("2024-01-02T15:04:05.5Z"),
		"1704207845123":                           utc("2024-01-02T15:04:05.123Z"),
		"1704207845123456":                        utc("2024-01-02T15:04:05.123456Z"),
		"1704207845123456789":                     utc("2024-01-02T15:04:05.123456789Z"),
		"1.704207845e9":                           utc("2024-01-02T15:04:05Z"),
		"02/Jan/2024:15:04:05 +0000":              utc("2024-01-02T15:04:05Z"),
		"Tue, 02 Jan 2024 15:04:05 GMT":           utc("2024-01-02T15:04:05Z"),
	} {
		got, ok := parseTimeValue(in, corpusNow)
		if !ok || !got.Equal(want) {
			t.Errorf("parseTimeValue(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "yesterday", "2024-13-02T15:04:05Z", "2024-01-02T25:04:05Z", "-5", "12:00", "1704207845x"} {
		if got, ok := parseTimeValue(in, corpusNow); ok {
			t.Errorf("parseTimeValue(%q) = %v, want failure", in, got)
		}
	}
}

// TestParseJSONRejects checks that what is not one JSON object falls
// through to the other parsers.
func TestParseJSONRejects(t *testing.T) {
	var p parser
	for _, in := range []string{
		`{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":tru}`, `{"a":"\x"}`, `{"a":01.}`,
		`{"a":[1,2}`, `{"a":"\u12"}`, `["a"]`, `{"a":1}{"b":2}`, `{"a":"b`,
		`{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		if p.parseJSON(in) {
			t.Errorf("parseJSON(%q) accepted", in)
		}
	}
	for _, in := range []string{` {"a":1} `, `{}`, `{"a":[{"b":[]}],"c":{}}`, `{"a":-1.5e+3,"b":"\ud800"}`} {
		if !p.parseJSON(in) {
			t.Errorf("parseJSON(%q) rejected", in)
		}
	}
}

// FuzzParse checks that no line makes the parsers panic or produce
// invalid UTF-8 from valid input.
func FuzzParse(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.line)
	}
	f.Add(`{"a":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t","b":{"c":[1,{"d":null}]},"e":-0.5e-3}`)
	f.Fuzz(func(t *testing.T, line string) {
		line = strings.ToValidUTF8(line, "\uFFFD")
		var p parser
		// The JSON scanner agrees with encoding/json on what an object is
		// (it also takes raw control characters in strings, as loggers
		// write them) and on the values of top-level strings.
		var obj map[string]any
		stdOK := json.Valid([]byte(line)) && firstNonSpace(line) == '{'
		if json.Unmarshal([]byte(line), &obj) != nil {
			obj = nil // valid but not representable, like 1e700
		}
		ok := p.parseJSON(line)
		hasCtl := strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 })
		if stdOK && !ok && !strings.Contains(line, strings.Repeat("[", maxJSONDepth)) && !strings.Contains(line, strings.Repeat("{", maxJSONDepth)) {
			t.Fatalf("parseJSON rejected %q", line)
		}
		if ok && !stdOK && !hasCtl {
			t.Fatalf("parseJSON accepted %q", line)
		}
		if ok && stdOK {
			got := make(map[string]string)
			for _, kv := range p.kvs {
				got[kv.key] = kv.val
			}
			for k, v := range obj {
				if s, isStr := v.(string); isStr && !strings.Contains(k, ".") && got[k] != s && utf8.ValidString(s) {
					t.Fatalf("%q: key %q = %q, encoding/json says %q", line, k, got[k], s)
				}
			}
		}
		for _, format := range []string{FormatAuto, FormatJSON, FormatLogfmt, FormatPlain} {
			var r Record
			p.parse(&r, line, format, corpusNow)
			if r.Time.IsZero() {
				t.Fatalf("%s: zero time for %q", format, line)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	lines := map[string]string{
		"json":   `{"time":"2024-01-02T15:04:05.123456789+01:00","level":"WARN","msg":"slow request","method":"GET","path":"/api/v1/items","duration":1.5,"user":{"id":42,"name":"bob"},"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		"logfmt": `time=2024-01-02T15:04:05.000Z level=INFO msg="request served" method=GET path=/api/v1/items status=200 duration=1.5ms bytes=1534`,
		"plain":  `2024-01-02 15:04:05,123 ERROR [http-nio-8080-exec-1] c.e.app.OrderController - Order 1234 failed: java.lang.NullPointerException`,
		"syslog": `Jan  2 15:04:05 web-1 sshd[2345]: Accepted publickey for deploy from 10.1.2.3 port 51234 ssh2: ED25519 SHA256:abc`,
		"nginx":  `192.168.1.10 - alice [02/Jan/2024:15:04:05 +0100] "GET /api/v1/items?page=2 HTTP/1.1" 200 1534 "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64)"`,
	}
	for _, name := range []string{"json", "logfmt", "plain", "syslog", "nginx"} {
		line := lines[name]
		b.Run(name, func(b *testing.B) {
			var p parser
			now := corpusNow // the lines are from 2024-01-02
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				var r Record
				p.parse(&r, line, FormatAuto, now)
			}
		})
	}
}
