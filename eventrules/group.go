package eventrules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

type groupKind int

const (
	groupNode groupKind = iota + 1
	groupCheck
	groupLevel
	groupCluster
	groupLabel
)

// groupField is one parsed spec.group_by entry.
type groupField struct {
	// name is the entry as written ("node", "label:team"): the key's part
	// before '='.
	name  string
	kind  groupKind
	label string
}

// compileGroupBy validates group_by and returns it sorted, so that the same
// dimensions in any order give the same keys.
func compileGroupBy(v *validator, entries []string) ([]string, []groupField) {
	var fields []groupField
	seen := map[string]bool{}
	for i, raw := range entries {
		field := fmt.Sprintf("spec.group_by[%d]", i)
		g := groupField{name: raw}
		switch {
		case raw == "node":
			g.kind = groupNode
		case raw == "check":
			g.kind = groupCheck
		case raw == "level":
			g.kind = groupLevel
		case raw == "cluster":
			g.kind = groupCluster
		case strings.HasPrefix(raw, "label:"):
			g.kind, g.label = groupLabel, strings.TrimPrefix(raw, "label:")
			if g.label == "" {
				v.Add(field, `"label:" needs a label name, such as label:team`)
				continue
			}
		default:
			v.Addf(field, `must be "node", "check", "level", "cluster" or "label:NAME", got %q`, raw)
			continue
		}
		if seen[raw] {
			v.Addf(field, "%q is listed twice", raw)
			continue
		}
		seen[raw] = true
		fields = append(fields, g)
	}
	slices.SortFunc(fields, func(a, b groupField) int { return strings.Compare(a.name, b.name) })
	names := make([]string, len(fields))
	for i, g := range fields {
		names[i] = g.name
	}
	return names, fields
}

// GroupKey identifies the aggregation group of an event under an aggregate
// rule: the rule's group_by values in sorted order, such as
// "check=disk,node=web1" or "label:team=ops,level=critical". An absent
// label counts as empty. Characters that would make keys ambiguous ('%',
// ',' and '=') are percent-encoded. A rule without group_by has one group,
// the key "". Keys are unique only within one rule: the pipeline keys its
// groups by rule name and GroupKey together.
func GroupKey(r Rule, e *unyov1.Event) string {
	if len(r.group) == 0 {
		return ""
	}
	var b strings.Builder
	for i, g := range r.group {
		if i > 0 {
			b.WriteByte(',')
		}
		writeEscaped(&b, g.name)
		b.WriteByte('=')
		var value string
		switch g.kind {
		case groupNode:
			value = e.GetNode()
		case groupCheck:
			value = e.GetCheck()
		case groupLevel:
			value = e.GetLevel().Name()
		case groupCluster:
			value = e.GetCluster()
		case groupLabel:
			value = e.GetLabels()[g.label]
		}
		writeEscaped(&b, value)
	}
	return b.String()
}

func writeEscaped(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%,=") {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', ',', '=':
			fmt.Fprintf(b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
}
