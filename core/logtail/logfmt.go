package logtail

import (
	"strconv"
	"strings"
)

// validLogfmtKey limits keys when the format is guessed, so that free text
// such as "GET /x?a=1 b=2" is not taken for logfmt.
func validLogfmtKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '.' || c == '-' || c == '@') {
			return false
		}
	}
	return true
}

// parseLogfmt scans key=value pairs into p.kvs. Values may be quoted with
// Go-style escapes (what slog's TextHandler and logrus write). A word
// without '=' is kept as a key with an empty value.
//
// With guess set (format "auto") the line must look like logfmt: the first
// word is a pair, there are at least two pairs, keys are identifier-like and
// quotes are balanced. Otherwise at least one pair is needed.
func (p *parser) parseLogfmt(s string, guess bool) bool {
	kvs := p.kvs[:0]
	defer func() { p.kvs = kvs }()
	pairs := 0
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] > ' ' && s[i] != '=' && s[i] != '"' {
			i++
		}
		key := s[start:i]
		switch {
		case key != "" && i < len(s) && s[i] == '=':
			if guess && !validLogfmtKey(key) {
				return false
			}
			i++
			var val string
			if i < len(s) && s[i] == '"' {
				v, n, ok := unquoteLogfmt(s[i:])
				if !ok {
					if guess {
						return false
					}
					v, n = s[i+1:], len(s)-i // unterminated: take the rest
				}
				val, i = v, i+n
			} else {
				vs := i
				for i < len(s) && s[i] != ' ' && s[i] != '\t' {
					i++
				}
				val = s[vs:i]
			}
			kvs = append(kvs, kv{key: key, val: val})
			pairs++
		case key != "" && (i >= len(s) || s[i] == ' ' || s[i] == '\t'):
			if guess && pairs == 0 {
				return false
			}
			kvs = append(kvs, kv{key: key})
		default:
			// '=' without a key, a quote inside a word, a control byte.
			if guess {
				return false
			}
			for i < len(s) && s[i] != ' ' && s[i] != '\t' {
				i++
			}
		}
	}
	if guess {
		return pairs >= 2
	}
	return pairs >= 1
}

// unquoteLogfmt reads a quoted value at the start of s and returns it and
// the number of bytes it used.
func unquoteLogfmt(s string) (string, int, bool) {
	escaped := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return s[1:i], i + 1, true
			}
			if v, err := strconv.Unquote(s[:i+1]); err == nil {
				return v, i + 1, true
			}
			// Not a Go escape (logrus writes some values with %q, others
			// by hand): undo only \" and \\.
			r := strings.NewReplacer(`\"`, `"`, `\\`, `\`)
			return r.Replace(s[1:i]), i + 1, true
		}
	}
	return "", 0, false
}
