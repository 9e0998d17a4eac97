package config

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with the configuration, with where it is.
// At most one of File, Env and Flag names the source of the value; none does
// for a missing value when no file was read.
type Problem struct {
	File string // configuration file
	Line int    // line in File, 0 if not known
	Env  string // environment variable, e.g. UNYO_STORE_DSN
	Flag string // command-line flag, without dashes
	Key  string // full dotted key, e.g. agent.checks[2].name; "" for YAML syntax errors
	Msg  string // what is wrong and what was expected
}

// String formats the problem for an operator:
//
//	configs/agent.yaml: agent.max_output: invalid size "64QB" (...)
//	configs/agent.yaml line 12: yaml: could not find expected ':'
//	environment UNYO_CLUSTER_LEASE_TTL: invalid duration "x" (...)
//	flag --server-listen: invalid address "x" (...)
//
// An environment variable or flag stands for its key, so the key is not
// repeated after it.
func (p Problem) String() string {
	var parts []string
	switch {
	case p.Env != "":
		parts = append(parts, "environment "+p.Env)
	case p.Flag != "":
		parts = append(parts, "flag --"+p.Flag)
	case p.File != "" && p.Key == "" && p.Line > 0:
		parts = append(parts, fmt.Sprintf("%s line %d", p.File, p.Line))
	case p.File != "":
		parts = append(parts, p.File)
	}
	if p.Key != "" && p.Env == "" && p.Flag == "" {
		parts = append(parts, p.Key)
	}
	return strings.Join(append(parts, p.Msg), ": ")
}

// Error is every problem Load found, in the order: file (in file order),
// environment, flags, role, then rules across keys. Its message has one
// problem per line.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// origin is where a value came from: the location fields of a Problem.
type origin struct {
	file string
	line int
	env  string
	flag string
}

// String names the origin as Problem.String does.
func (o origin) String() string {
	switch {
	case o.env != "":
		return "environment " + o.env
	case o.flag != "":
		return "flag --" + o.flag
	case o.file != "":
		return o.file
	}
	return "default"
}

func (o origin) problem(key, msg string) Problem {
	return Problem{File: o.file, Line: o.line, Env: o.env, Flag: o.flag, Key: key, Msg: msg}
}

// setting is a checked value and where it came from.
type setting struct {
	value any
	from  origin
}

// relatedKeys reports whether one key is the other or lies inside it, so a
// rule about server.tls is not reported on top of a type error in
// server.tls.key_file.
func relatedKeys(a, b string) bool {
	inside := func(x, y string) bool {
		return strings.HasPrefix(x, y+".") || strings.HasPrefix(x, y+"[")
	}
	return a == b || inside(a, b) || inside(b, a)
}

// unknownKey words the problem for a key that is not in section, with the
// nearest known key: a sibling (by its name) or, failing that, a key of
// another section (by its full key, since the name alone would be wrong
// there too).
func unknownKey(root, section *field, name string) string {
	var siblings []string
	for _, f := range section.fields {
		siblings = append(siblings, f.name)
	}
	if near := nearest(name, siblings); len(near) > 0 {
		return fmt.Sprintf("unknown key (did you mean %s?)", near[0])
	}
	// Elsewhere, only the nearest: admin_tokens should not also suggest
	// server.join_tokens.
	var elsewhere []string
	best := -1
	for _, f := range root.all() {
		if slices.Contains(section.fields, f) || !closeEnough(name, f.name) {
			continue
		}
		switch d := editDistance(name, f.name); {
		case best < 0 || d < best:
			best, elsewhere = d, []string{f.key}
		case d == best:
			elsewhere = append(elsewhere, f.key)
		}
	}
	if len(elsewhere) > 0 && len(elsewhere) <= 3 {
		return fmt.Sprintf("unknown key (did you mean %s?)", strings.Join(elsewhere, " or "))
	}
	return fmt.Sprintf("unknown key (expected one of: %s)", strings.Join(siblings, ", "))
}

// nearest returns the candidates close enough to name, nearest first.
func nearest(name string, candidates []string) []string {
	var near []string
	for _, c := range candidates {
		if closeEnough(name, c) {
			near = append(near, c)
		}
	}
	slices.SortStableFunc(near, func(a, b string) int {
		return editDistance(name, a) - editDistance(name, b)
	})
	return near
}

// closeEnough allows one edit in short names and up to three in long ones:
// enough for typos, not so much that unrelated keys are suggested.
func closeEnough(name, candidate string) bool {
	limit := max(1, min(3, len(candidate)/3))
	return editDistance(name, candidate) <= limit
}

// editDistance is the optimal string alignment distance, ignoring case:
// insertions, deletions, substitutions and swaps of adjacent letters
// (lgo -> log) each cost one.
func editDistance(a, b string) int {
	s, t := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
