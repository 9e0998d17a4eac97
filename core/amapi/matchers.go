package amapi

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Matcher is one label matcher as Alertmanager's API carries it.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual *bool  `json:"isEqual,omitempty"`
}

func (m Matcher) equal() bool { return m.IsEqual == nil || *m.IsEqual }

// matcher is a compiled filter matcher.
type matcher struct {
	name  string
	neg   bool
	value string
	re    *regexp.Regexp
}

func (m matcher) matches(labels map[string]string) bool {
	v := labels[m.name]
	ok := v == m.value
	if m.re != nil {
		ok = m.re.MatchString(v)
	}
	return ok != m.neg
}

// parseFilter reads one filter parameter as amtool and karma send it:
// name="value", name!="value", name=~"regex" or name!~"regex", the value
// quoted or bare, optionally in braces.
func parseFilter(s string) (matcher, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "{"), "}"))
	i := strings.IndexAny(s, "=!")
	if i <= 0 {
		return matcher{}, fmt.Errorf("filter %q: expected name=\"value\", name!=, name=~ or name!~", s)
	}
	m := matcher{name: strings.TrimSpace(s[:i])}
	rest := s[i:]
	var regex bool
	switch {
	case strings.HasPrefix(rest, "=~"):
		regex, rest = true, rest[2:]
	case strings.HasPrefix(rest, "!~"):
		regex, m.neg, rest = true, true, rest[2:]
	case strings.HasPrefix(rest, "!="):
		m.neg, rest = true, rest[2:]
	case strings.HasPrefix(rest, "="):
		rest = rest[1:]
	default:
		return matcher{}, fmt.Errorf("filter %q: unknown operator", s)
	}
	v := strings.TrimSpace(rest)
	if strings.HasPrefix(v, `"`) {
		u, err := strconv.Unquote(v)
		if err != nil {
			return matcher{}, fmt.Errorf("filter %q: bad quoted value: %w", s, err)
		}
		v = u
	}
	m.value = v
	if regex {
		re, err := regexp.Compile("^(?:" + v + ")$")
		if err != nil {
			return matcher{}, fmt.Errorf("filter %q: %w", s, err)
		}
		m.re = re
	}
	return m, nil
}

func parseFilters(fs []string) ([]matcher, error) {
	out := make([]matcher, 0, len(fs))
	for _, f := range fs {
		m, err := parseFilter(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func matchAll(ms []matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.matches(labels) {
			return false
		}
	}
	return true
}
