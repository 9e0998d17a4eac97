package eventrules

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Matches reports whether the rule applies to the event at time now: the
// rule has not expired (Until is zero or after now) and every condition of
// spec.match holds:
//
//   - node and check: the regular expression matches the whole name;
//   - message: the regular expression matches the whole of e.Output, the
//     first line of the plugin's output. LongOutput is not searched: it is
//     multi-line and can be large, and a rule that depends on it would cost
//     every event a scan of it;
//   - levels: e.Level is one of them;
//   - labels: every label is present in e.Labels with the same value (an
//     empty value requires the label to be present and empty).
//
// A nil event and the zero Rule match nothing.
func (r Rule) Matches(e *unyov1.Event, now time.Time) bool {
	return r.matches(e, now)
}

// matches is Matches without copying the Rule, for the Set's loops.
func (r *Rule) matches(e *unyov1.Event, now time.Time) bool {
	if e == nil || !r.match.set {
		return false
	}
	if !r.Until.IsZero() && !r.Until.After(now) {
		return false
	}
	return r.match.matches(e)
}

// matcher is a compiled EventMatch. Conditions are tried cheapest first
// (level bit, literal and prefix tests, labels, then regular expressions),
// because most rules reject most events and a regexp run costs far more
// than a comparison.
type matcher struct {
	// set is false for an empty match, which matches nothing.
	set bool
	// levels has bit 1<<Level for each accepted level; 0 accepts any.
	levels               uint64
	node, check, message stringMatcher
	// labels is sorted by name, so matching is deterministic.
	labels []labelCond
}

type labelCond struct{ name, value string }

func (m *matcher) matches(e *unyov1.Event) bool {
	if m.levels != 0 {
		l := e.GetLevel()
		if l < 0 || l >= 64 || m.levels&(1<<uint(l)) == 0 {
			return false
		}
	}
	node, check, output := e.GetNode(), e.GetCheck(), e.GetOutput()
	if !m.node.quick(node) || !m.check.quick(check) || !m.message.quick(output) {
		return false
	}
	if len(m.labels) > 0 {
		labels := e.GetLabels()
		for _, c := range m.labels {
			if v, ok := labels[c.name]; !ok || v != c.value {
				return false
			}
		}
	}
	return m.node.full(node) && m.check.full(check) && m.message.full(output)
}

// stringMatcher is one anchored regular expression with fast paths: a
// pattern that is a plain string (most node and check patterns are names)
// is compared directly; otherwise a literal prefix ("web.*") and a literal
// that every match contains (".*refused on port 80.*") are tested before
// the regexp runs, which rejects most strings for a fraction of its cost.
type stringMatcher struct {
	given bool
	// literal: the pattern matches exactly the string prefix.
	literal bool
	prefix  string
	// contains is a literal every match contains ("" if none is known).
	contains string
	// re is nil when literal; otherwise the anchored pattern.
	re *regexp.Regexp
}

// quick is false when s certainly does not match.
func (m *stringMatcher) quick(s string) bool {
	if !m.given {
		return true
	}
	if m.literal {
		return s == m.prefix
	}
	return strings.HasPrefix(s, m.prefix) && strings.Contains(s, m.contains)
}

// full is the complete test; call it only after quick said true.
func (m *stringMatcher) full(s string) bool {
	if !m.given || m.literal {
		return true
	}
	return m.re.MatchString(s)
}

// compilePattern compiles expr anchored at both ends. It anchors the parsed
// tree rather than the text, because text concatenation is not safe: in
// `^(?:\Qa)$` the \Q quotes the closing parenthesis and the anchor.
func compilePattern(expr string) (stringMatcher, error) {
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return stringMatcher{}, regexpError(expr, err)
	}
	anchored := &syntax.Regexp{
		Op: syntax.OpConcat,
		Sub: []*syntax.Regexp{
			{Op: syntax.OpBeginText},
			tree,
			{Op: syntax.OpEndText},
		},
	}
	m := stringMatcher{given: true}
	inner := tree
	for inner.Op == syntax.OpCapture {
		inner = inner.Sub[0]
	}
	switch {
	case isLiteral(inner):
		m.literal, m.prefix = true, string(inner.Rune)
		return m, nil
	case inner.Op == syntax.OpConcat && len(inner.Sub) > 0 && isLiteral(inner.Sub[0]):
		m.prefix = string(inner.Sub[0].Rune)
	}
	if c := requiredLiteral(inner); len(c) > len(m.prefix) {
		m.contains = c
	}
	m.re, err = regexp.Compile(anchored.String())
	if err != nil {
		// Only limits such as "expression too large" get here.
		return stringMatcher{}, regexpError(expr, err)
	}
	return m, nil
}

// requiredLiteral returns the longest case-sensitive literal that every
// match of re contains, or "". It follows only constructs that always
// include their operand (concatenation, capture, x+, x{n,} with n >= 1);
// alternations and optional parts contribute nothing.
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if isLiteral(re) {
			return string(re.Rune)
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

// isLiteral reports a case-sensitive literal string. Case-folded literals
// ((?i)web) match more than one string, so they take the regexp path.
func isLiteral(re *syntax.Regexp) bool {
	return re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0
}

func regexpError(expr string, err error) error {
	var se *syntax.Error
	if errors.As(err, &se) {
		if se.Expr != "" && se.Expr != expr {
			return fmt.Errorf("invalid regular expression %q: %s at %q", expr, se.Code, se.Expr)
		}
		return fmt.Errorf("invalid regular expression %q: %s", expr, se.Code)
	}
	return fmt.Errorf("invalid regular expression %q: %v", expr, err)
}
