// Package eventrules is unyo's event rule model and the decisions the
// cluster's event pipeline takes with it: which filter drops an event, which
// silence mutes it, which aggregate groups it, which action rules run, when
// a result becomes an event (occurrences) and when a repeat is processed
// again (reissue window).
//
// The package holds no state and does no I/O: the pipeline keeps counters,
// issued events and aggregation groups in its database and passes them in,
// together with the current time, so every decision is reproducible in a
// test. Compiled rules and sets are immutable and safe for concurrent use.
package eventrules

import (
	"time"
)

// Type is what a rule does with the events it matches.
type Type int

// The zero Type is invalid; Compile never returns it.
const (
	// TypeFilter drops a matching event before it is stored.
	TypeFilter Type = iota + 1
	// TypeSilence marks a matching event silenced: no actions run.
	TypeSilence
	// TypeAggregate gathers matching events into groups for Wait, then runs
	// the rule's actions once per group.
	TypeAggregate
	// TypeAction runs the rule's actions for every matching event.
	TypeAction
)

// String is the name used in spec.type.
func (t Type) String() string {
	switch t {
	case TypeFilter:
		return "filter"
	case TypeSilence:
		return "silence"
	case TypeAggregate:
		return "aggregate"
	case TypeAction:
		return "action"
	}
	return "unknown"
}

// Rule is a compiled event rule: every field validated, every default
// applied, regular expressions and templates compiled. Build one with
// Compile; the zero Rule matches nothing.
type Rule struct {
	Name     string
	Type     Type
	Revision int64
	// Priority orders rules: higher first, ties by name.
	Priority int
	// Until is when the rule stops matching; zero means never.
	Until time.Time
	// Owner and Reason say who made the rule and why; both are required so
	// that a forgotten silence can be traced to someone.
	Owner  string
	Reason string
	// GroupBy is spec.group_by sorted (aggregate rules only): node, check,
	// level, cluster or label:NAME.
	GroupBy []string
	// Wait is how long an aggregate group gathers events (aggregate only).
	Wait time.Duration
	// Actions run in order (action and aggregate rules only).
	Actions []Action
	// Continue lets lower-priority action rules run after this one.
	Continue bool

	match matcher
	group []groupField
}

// WindowEnd is when an aggregate group that received its first event at
// first closes and its actions run.
func (r Rule) WindowEnd(first time.Time) time.Time {
	return first.Add(r.Wait)
}
