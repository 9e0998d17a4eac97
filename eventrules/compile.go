package eventrules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// MaxWait bounds spec.wait: an aggregate that waits longer than a day is a
// report, not an alert.
const MaxWait = 24 * time.Hour

// ValidationError is every invalid field of one event rule, so an operator
// fixes them all in one round trip. Compile returns it as a
// *ValidationError.
type ValidationError struct {
	// Rule is the name as written, which may itself be invalid or empty.
	Rule   string
	Fields []validate.FieldError
}

// Error lists one field per line, each prefixed with the rule name so that
// it still reads well when log lines are split.
func (e *ValidationError) Error() string {
	return validate.Message("event rule", e.Rule, e.Fields)
}

type validator struct{ validate.Fields }

// err returns nil (not a typed nil pointer) when every field is valid.
func (v *validator) err(name string) error {
	if len(v.Fields) == 0 {
		return nil
	}
	return &ValidationError{Rule: name, Fields: v.Fields}
}

// Compile validates an event rule and compiles its patterns and templates.
// On failure it returns a *ValidationError naming every invalid field.
//
// Rules beyond the schema's comments: owner and reason are required; the
// match needs at least one condition; patterns are Go regular expressions
// (RE2 syntax) anchored at both ends; levels and create_alert.level are
// case-insensitive; group_by and wait belong to aggregate rules only (wait
// required, in (0, 24h]); actions are required for action and aggregate
// rules and not allowed for filter and silence rules; continue belongs to
// action rules only; templates may use .Node .Check .Cluster .Level .Status
// .Output and .Labels, range only over .Labels and not nested, and no
// define, template or block. An until in the past is accepted (the rule
// simply never matches), since Compile has no clock.
func Compile(r *unyov1.EventRule) (Rule, error) {
	v := &validator{}
	rule := Rule{Name: r.GetName(), Revision: r.GetRevision()}
	v.Name("name", rule.Name)

	spec := r.GetSpec()
	if spec == nil {
		v.Add("spec", "required: an event rule needs at least spec.type, spec.match, spec.owner and spec.reason")
		return Rule{}, v.err(rule.Name)
	}

	switch raw := spec.GetType(); raw {
	case "filter":
		rule.Type = TypeFilter
	case "silence":
		rule.Type = TypeSilence
	case "aggregate":
		rule.Type = TypeAggregate
	case "action":
		rule.Type = TypeAction
	case "":
		v.Add("spec.type", `required: "filter", "silence", "aggregate" or "action"`)
	default:
		v.Addf("spec.type", `must be "filter", "silence", "aggregate" or "action", got %q`, raw)
	}
	typeName := rule.Type.String()

	rule.match = compileMatch(v, spec.GetMatch())
	rule.Priority = int(spec.GetPriority())

	if raw := spec.GetUntil(); raw != "" {
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			v.Addf("spec.until", "invalid time %q (expected RFC 3339, such as 2026-07-01T09:00:00Z)", raw)
		} else {
			rule.Until = t
		}
	}

	rule.Owner, rule.Reason = strings.TrimSpace(spec.GetOwner()), strings.TrimSpace(spec.GetReason())
	if rule.Owner == "" {
		v.Add("spec.owner", "required: say who is responsible for this rule (a person or team), so that it can be asked about later")
	}
	if rule.Reason == "" {
		v.Add("spec.reason", "required: say why this rule exists, such as the incident or ticket it is for")
	}

	aggregate := rule.Type == TypeAggregate
	known := rule.Type != 0

	if gb := spec.GetGroupBy(); len(gb) > 0 {
		if known && !aggregate {
			v.Addf("spec.group_by", "only aggregate rules group events; remove it from this %s rule", typeName)
		} else {
			rule.GroupBy, rule.group = compileGroupBy(v, gb)
		}
	}

	switch raw := spec.GetWait(); {
	case raw == "" && aggregate:
		v.Add("spec.wait", "required: how long a group gathers events before its actions run, such as 5m")
	case raw == "":
	case known && !aggregate:
		v.Addf("spec.wait", "only aggregate rules wait; remove it from this %s rule", typeName)
	default:
		if d, ok := v.Duration("spec.wait", raw); ok {
			switch {
			case d <= 0:
				v.Addf("spec.wait", "must be positive, got %q", raw)
			case d > MaxWait:
				v.Addf("spec.wait", "must be at most %s, got %q", MaxWait, raw)
			default:
				rule.Wait = d
			}
		}
	}

	actions := spec.GetActions()
	switch {
	case len(actions) == 0 && (aggregate || rule.Type == TypeAction):
		v.Addf("spec.actions", "required: a%s %s rule needs at least one action (create_alert, delete_alert or api_hook)", article(typeName), typeName)
	case len(actions) > 0 && (rule.Type == TypeFilter || rule.Type == TypeSilence):
		v.Addf("spec.actions", "a %s rule runs no actions; remove them, or add an action rule with the same match", typeName)
	default:
		for i, a := range actions {
			if ca, ok := compileAction(v, fmt.Sprintf("spec.actions[%d]", i), a); ok {
				rule.Actions = append(rule.Actions, ca)
			}
		}
	}

	rule.Continue = spec.GetContinue()
	if rule.Continue && known && rule.Type != TypeAction {
		v.Addf("spec.continue", "only action rules continue to lower-priority rules; remove it from this %s rule", typeName)
	}

	if err := v.err(rule.Name); err != nil {
		return Rule{}, err
	}
	return rule, nil
}

func article(word string) string {
	if strings.IndexByte("aeiou", word[0]) >= 0 {
		return "n"
	}
	return ""
}

func compileMatch(v *validator, m *unyov1.EventMatch) matcher {
	if m.GetNode() == "" && m.GetCheck() == "" && m.GetMessage() == "" && len(m.GetLevels()) == 0 && len(m.GetLabels()) == 0 {
		v.Add("spec.match", `give at least one condition; an empty match would match nothing (to match every event, write node: ".*")`)
		return matcher{}
	}
	mt := matcher{set: true}
	pattern := func(field, expr string) stringMatcher {
		if expr == "" {
			return stringMatcher{}
		}
		sm, err := compilePattern(expr)
		if err != nil {
			v.Add(field, err.Error())
		}
		return sm
	}
	mt.node = pattern("spec.match.node", m.GetNode())
	mt.check = pattern("spec.match.check", m.GetCheck())
	mt.message = pattern("spec.match.message", m.GetMessage())

	for i, raw := range m.GetLevels() {
		field := fmt.Sprintf("spec.match.levels[%d]", i)
		l, err := unyov1.ParseLevel(raw)
		switch {
		case err == nil:
			mt.levels |= 1 << uint(l)
		case strings.EqualFold(raw, unyov1.AlertLevel_ALERT_LEVEL_FATAL.Name()):
			v.Add(field, `"fatal" is an alert level, not an event level; match "critical" and set create_alert.level: fatal`)
		default:
			v.Addf(field, `must be "success", "warning" or "critical", got %q`, raw)
		}
	}

	labels := m.GetLabels()
	for _, name := range sortedKeys(labels) {
		if name == "" {
			v.Add("spec.match.labels", "a label name is empty")
			continue
		}
		mt.labels = append(mt.labels, labelCond{name: name, value: labels[name]})
	}
	return mt
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
