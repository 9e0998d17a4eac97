package eventrules

import (
	"cmp"
	"slices"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Set is a cluster's event rules in evaluation order: priority descending,
// then name ascending. It is immutable and safe for concurrent use; build a
// new Set when rules change. A nil *Set has no rules, so a pipeline that
// has not loaded its rules yet decides as if there were none.
type Set struct {
	all []Rule
	// byType holds each type's rules in the same order, so that a decision
	// walks only the rules that can take it.
	byType [TypeAction + 1][]Rule
}

// NewSet sorts a copy of rules. Rules with the same priority and name (which
// a store keyed by name never produces) keep their given order.
func NewSet(rules []Rule) *Set {
	s := &Set{all: slices.Clone(rules)}
	slices.SortStableFunc(s.all, func(a, b Rule) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, r := range s.all {
		if r.Type >= TypeFilter && r.Type <= TypeAction {
			s.byType[r.Type] = append(s.byType[r.Type], r)
		}
	}
	return s
}

// Rules returns the rules in evaluation order (a copy).
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	return slices.Clone(s.all)
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

func (s *Set) ofType(t Type) []Rule {
	if s == nil {
		return nil
	}
	return s.byType[t]
}

// first is the first rule of type t matching e.
func (s *Set) first(t Type, e *unyov1.Event, now time.Time) (Rule, bool) {
	rules := s.ofType(t)
	for i := range rules {
		if rules[i].matches(e, now) {
			return rules[i], true
		}
	}
	return Rule{}, false
}

// Filter returns the first filter rule matching e: the pipeline drops the
// event before storing it.
func (s *Set) Filter(e *unyov1.Event, now time.Time) (Rule, bool) {
	return s.first(TypeFilter, e, now)
}

// Silence returns the first silence rule matching e: the pipeline marks the
// event silenced by it and runs no actions.
func (s *Set) Silence(e *unyov1.Event, now time.Time) (Rule, bool) {
	return s.first(TypeSilence, e, now)
}

// Aggregate returns the first aggregate rule matching e: the pipeline adds
// the event to the rule's group GroupKey(rule, e).
func (s *Set) Aggregate(e *unyov1.Event, now time.Time) (Rule, bool) {
	return s.first(TypeAggregate, e, now)
}

// Actions returns the action rules to run for e, in order. Every action rule
// is tested in priority order; a matching rule is taken, and the walk stops
// after the first matching rule without Continue. A rule that does not match
// never stops the walk. It returns nil when no rule matches.
func (s *Set) Actions(e *unyov1.Event, now time.Time) []Rule {
	var out []Rule
	rules := s.ofType(TypeAction)
	for i := range rules {
		if !rules[i].matches(e, now) {
			continue
		}
		out = append(out, rules[i])
		if !rules[i].Continue {
			break
		}
	}
	return out
}

// Named returns the rule called name.
func (s *Set) Named(name string) (Rule, bool) {
	if s == nil {
		return Rule{}, false
	}
	for i := range s.all {
		if s.all[i].Name == name {
			return s.all[i], true
		}
	}
	return Rule{}, false
}
