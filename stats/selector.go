package stats

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/VictoriaMetrics/metricsql"
)

// Selector is a MetricsQL series selector such as node_load1{env="prod"} or
// {__name__=~"node_.*"}: the unit statistics are configured and queried in.
type Selector struct {
	text   string
	groups [][]filter // or-groups of and-ed filters
}

type filter struct {
	metricsql.LabelFilter
	re *regexp.Regexp // for =~ and !~
}

// ParseSelector parses a series selector; anything else (a function, an
// arithmetic expression) is refused.
func ParseSelector(s string) (*Selector, error) {
	e, err := metricsql.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("series selector %q: %w", s, err)
	}
	me, ok := e.(*metricsql.MetricExpr)
	if !ok || me.IsEmpty() {
		return nil, fmt.Errorf("series selector %q: want a selector such as node_load1{node=\"web1\"}, not an expression", s)
	}
	sel := &Selector{text: s}
	for _, lfs := range me.LabelFilterss {
		var g []filter
		for _, lf := range lfs {
			f := filter{LabelFilter: lf}
			if lf.IsRegexp {
				// Label regexps are anchored, as in PromQL.
				if f.re, err = regexp.Compile("^(?:" + lf.Value + ")$"); err != nil {
					return nil, fmt.Errorf("series selector %q: label %s: %w", s, lf.Label, err)
				}
			}
			g = append(g, f)
		}
		sel.groups = append(sel.groups, g)
	}
	return sel, nil
}

// String is the selector as written.
func (s *Selector) String() string { return s.text }

// Name is the metric name the selector requires, or "" if it allows several.
func (s *Selector) Name() string {
	name := ""
	for _, g := range s.groups {
		n := ""
		for _, f := range g {
			if f.Label == "__name__" && !f.IsRegexp && !f.IsNegative {
				n = f.Value
			}
		}
		if n == "" || (name != "" && n != name) {
			return ""
		}
		name = n
	}
	return name
}

// WithName narrows the selector to one metric name, for working through a
// big selection one name at a time.
func (s *Selector) WithName(name string) string { return s.WithLabel("__name__", name) }

// WithLabel narrows the selector to series whose label has value, which
// must be one the selector allows (as TSDB.LabelValues answers for it): an
// exact filter on the label is replaced, since MetricsQL refuses a metric
// name set twice.
func (s *Selector) WithLabel(label, value string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, g := range s.groups {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.Write((&metricsql.LabelFilter{Label: label, Value: value}).AppendString(nil))
		for _, f := range g {
			if f.Label == label && !f.IsRegexp && !f.IsNegative {
				continue
			}
			b.WriteByte(',')
			b.Write(f.AppendString(nil))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// Matches reports whether a label set (with __name__) is selected; a
// missing label matches as the empty value, as in PromQL.
func (s *Selector) Matches(labels map[string]string) bool {
	for _, g := range s.groups {
		all := true
		for _, f := range g {
			v := labels[f.Label]
			var ok bool
			if f.re != nil {
				ok = f.re.MatchString(v)
			} else {
				ok = v == f.Value
			}
			if ok == f.IsNegative {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
