// Package labelsel parses and matches label selectors as kubectl's -l
// takes them: comma-separated requirements, all of which must hold.
//
//	key=value, key==value   the label is set to value
//	key!=value              the label is not set to value (or not set)
//	key in (a,b)            the label is set to one of the values
//	key notin (a,b)         the label is not set to any of them (or not set)
//	key                     the label is set
//	!key                    the label is not set
package labelsel

import (
	"fmt"
	"slices"
	"strings"
)

type op int

const (
	opEq op = iota
	opNotEq
	opIn
	opNotIn
	opExists
	opNotExists
)

type requirement struct {
	key    string
	op     op
	values []string
}

// Selector is a parsed selector; the zero value selects everything.
type Selector struct {
	reqs []requirement
}

// Empty reports whether the selector selects everything.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Matches reports whether labels meet every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.reqs {
		v, set := labels[r.key]
		var ok bool
		switch r.op {
		case opEq:
			ok = set && v == r.values[0]
		case opNotEq:
			ok = !set || v != r.values[0]
		case opIn:
			ok = set && slices.Contains(r.values, v)
		case opNotIn:
			ok = !set || !slices.Contains(r.values, v)
		case opExists:
			ok = set
		case opNotExists:
			ok = !set
		}
		if !ok {
			return false
		}
	}
	return true
}

// Parse reads a selector; "" selects everything.
func Parse(s string) (Selector, error) {
	var sel Selector
	for _, part := range split(s) {
		r, err := parseRequirement(strings.TrimSpace(part))
		if err != nil {
			return Selector{}, fmt.Errorf("selector %q: %w", s, err)
		}
		sel.reqs = append(sel.reqs, r)
	}
	return sel, nil
}

// split cuts at the commas outside parentheses.
func split(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func parseRequirement(p string) (requirement, error) {
	if p == "" {
		return requirement{}, fmt.Errorf("an empty requirement (two commas in a row?)")
	}
	if k, v, ok := strings.Cut(p, "!="); ok {
		return keyValue(k, v, opNotEq)
	}
	if k, v, ok := strings.Cut(p, "=="); ok {
		return keyValue(k, v, opEq)
	}
	if k, v, ok := strings.Cut(p, "="); ok {
		return keyValue(k, v, opEq)
	}
	if f := strings.Fields(p); len(f) >= 2 && (f[1] == "in" || f[1] == "notin") {
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p[len(f[0]):]), f[1]))
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return requirement{}, fmt.Errorf("%q: expected %s (value,...)", p, f[1])
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			return requirement{}, fmt.Errorf("%q: no values in the parentheses", p)
		}
		o := opIn
		if f[1] == "notin" {
			o = opNotIn
		}
		return requirement{key: f[0], op: o, values: vals}, nil
	}
	if k, ok := strings.CutPrefix(p, "!"); ok {
		return key(strings.TrimSpace(k), opNotExists)
	}
	return key(p, opExists)
}

func keyValue(k, v string, o op) (requirement, error) {
	r, err := key(strings.TrimSpace(k), o)
	r.values = []string{strings.TrimSpace(v)}
	return r, err
}

func key(k string, o op) (requirement, error) {
	if k == "" || strings.ContainsAny(k, " \t()!=,") {
		return requirement{}, fmt.Errorf("%q is not a label key", k)
	}
	return requirement{key: k, op: o}, nil
}
