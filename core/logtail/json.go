package logtail

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON lines are scanned by hand rather than with encoding/json: we need
// only flat string key/value pairs (nested objects flattened with dots,
// arrays kept as JSON text, numbers as written) and unescaped strings are
// substrings of the line, which makes the common case allocation-free apart
// from the Fields map. encoding/json into map[string]any is several times
// slower and allocates per value.

const (
	maxFlattenDepth = 8  // deeper objects are kept as JSON text
	maxJSONDepth    = 64 // deeper nesting is not a log line we want to parse
)

type jsonScanner struct {
	s   string
	i   int
	kvs []kv
}

// parseJSON scans line as one JSON object into p.kvs. It reports false when
// line is not exactly one valid JSON object (surrounding spaces allowed).
func (p *parser) parseJSON(line string) bool {
	sc := jsonScanner{s: line, kvs: p.kvs[:0]}
	sc.ws()
	ok := sc.i < len(sc.s) && sc.s[sc.i] == '{' && sc.object("", 0)
	if ok {
		sc.ws()
		ok = sc.i == len(sc.s)
	}
	p.kvs = sc.kvs
	return ok
}

func (sc *jsonScanner) ws() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\r', '\n':
			sc.i++
		default:
			return
		}
	}
}

// object scans an object at sc.i ('{'), adding its members under prefix.
func (sc *jsonScanner) object(prefix string, depth int) bool {
	sc.i++ // '{'
	sc.ws()
	if sc.i < len(sc.s) && sc.s[sc.i] == '}' {
		sc.i++
		return true
	}
	for {
		sc.ws()
		key, ok := sc.str()
		if !ok {
			return false
		}
		sc.ws()
		if sc.i >= len(sc.s) || sc.s[sc.i] != ':' {
			return false
		}
		sc.i++
		sc.ws()
		if sc.i >= len(sc.s) {
			return false
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		switch c := sc.s[sc.i]; {
		case c == '"':
			v, ok := sc.str()
			if !ok {
				return false
			}
			sc.kvs = append(sc.kvs, kv{key: key, val: v})
		case c == '{' && depth+1 < maxFlattenDepth:
			if !sc.object(key, depth+1) {
				return false
			}
		case c == '{' || c == '[':
			start := sc.i
			if !sc.skip(depth + 1) {
				return false
			}
			sc.kvs = append(sc.kvs, kv{key: key, val: sc.s[start:sc.i]})
		case c == 't':
			if !sc.lit("true") {
				return false
			}
			sc.kvs = append(sc.kvs, kv{key: key, val: "true"})
		case c == 'f':
			if !sc.lit("false") {
				return false
			}
			sc.kvs = append(sc.kvs, kv{key: key, val: "false"})
		case c == 'n':
			if !sc.lit("null") {
				return false
			}
			// A null says nothing; leaving it out keeps Fields small.
		default:
			start := sc.i
			if !sc.number() {
				return false
			}
			sc.kvs = append(sc.kvs, kv{key: key, val: sc.s[start:sc.i], num: true})
		}
		sc.ws()
		if sc.i >= len(sc.s) {
			return false
		}
		switch sc.s[sc.i] {
		case ',':
			sc.i++
		case '}':
			sc.i++
			return true
		default:
			return false
		}
	}
}

func (sc *jsonScanner) lit(w string) bool {
	if !strings.HasPrefix(sc.s[sc.i:], w) {
		return false
	}
	sc.i += len(w)
	return true
}

func (sc *jsonScanner) number() bool {
	s, i := sc.s, sc.i
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == start || s[start] == '0' && i-start > 1 {
		return false // no digits, or a leading zero
	}
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == es {
			return false
		}
	}
	sc.i = i
	return true
}

// skip passes over any value at sc.i, checking its syntax.
func (sc *jsonScanner) skip(depth int) bool {
	if depth > maxJSONDepth || sc.i >= len(sc.s) {
		return false
	}
	switch c := sc.s[sc.i]; c {
	case '"':
		_, ok := sc.strEnd()
		return ok
	case 't':
		return sc.lit("true")
	case 'f':
		return sc.lit("false")
	case 'n':
		return sc.lit("null")
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		sc.i++
		sc.ws()
		if sc.i < len(sc.s) && sc.s[sc.i] == end {
			sc.i++
			return true
		}
		for {
			sc.ws()
			if c == '{' {
				if sc.i >= len(sc.s) || sc.s[sc.i] != '"' {
					return false
				}
				if _, ok := sc.strEnd(); !ok {
					return false
				}
				sc.ws()
				if sc.i >= len(sc.s) || sc.s[sc.i] != ':' {
					return false
				}
				sc.i++
				sc.ws()
			}
			if !sc.skip(depth + 1) {
				return false
			}
			sc.ws()
			if sc.i >= len(sc.s) {
				return false
			}
			switch sc.s[sc.i] {
			case ',':
				sc.i++
			case end:
				sc.i++
				return true
			default:
				return false
			}
		}
	default:
		return sc.number()
	}
}

// strEnd passes over a string at sc.i and reports whether it has escapes.
func (sc *jsonScanner) strEnd() (escaped, ok bool) {
	s := sc.s
	for i := sc.i + 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			sc.i = i + 1
			return escaped, true
		case '\\':
			escaped = true
			i++
		}
	}
	return false, false
}

// str scans a string at sc.i and returns its value: a substring of the line
// when it has no escapes.
func (sc *jsonScanner) str() (string, bool) {
	if sc.i >= len(sc.s) || sc.s[sc.i] != '"' {
		return "", false
	}
	start := sc.i + 1
	escaped, ok := sc.strEnd()
	if !ok {
		return "", false
	}
	raw := sc.s[start : sc.i-1]
	if !escaped {
		return raw, true
	}
	return unescapeJSON(raw)
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func unescapeJSON(s string) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return "", false
		}
		switch s[i] {
		case '"', '\\', '/':
			b.WriteByte(s[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A lone surrogate cannot be encoded in UTF-8 and becomes
				// U+FFFD, as in encoding/json.
				r2, ok := rune(0), false
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2, ok = hex4(s[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
	}
	return b.String(), true
}
