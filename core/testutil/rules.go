package testutil

import (
	"fmt"
	"strings"
)

// HundredRules is a manifest of 100 event rules, the set the pipeline
// benchmarks measure with: 94 action rules opening alerts for warning and
// critical results of checks check-0 … check-39, a resolve rule for
// successes, and three silence rules (nodes maint-N…) and three filter rules
// (messages with "ignore me N") that the benchmarks' results do not match
// but every result is tested against.
func HundredRules() string {
	var b strings.Builder
	for i := range 94 {
		fmt.Fprintf(&b, "---\nkind: EventRule\nname: act-%02d\nspec: {type: action, priority: %d, match: {check: \"check-%d\", levels: [critical, warning]}, actions: [{create_alert: {}}], owner: bench, reason: bench}\n", i, i%7, i%40)
	}
	for i := range 3 {
		fmt.Fprintf(&b, "---\nkind: EventRule\nname: quiet-%d\nspec: {type: silence, match: {node: \"maint-%d.*\"}, owner: bench, reason: bench}\n", i, i)
		fmt.Fprintf(&b, "---\nkind: EventRule\nname: drop-%d\nspec: {type: filter, match: {message: \".*ignore me %d.*\"}, owner: bench, reason: bench}\n", i, i)
	}
	b.WriteString("---\nkind: EventRule\nname: resolve\nspec: {type: action, priority: 100, match: {levels: [success]}, actions: [{delete_alert: {}}], continue: true, owner: bench, reason: bench}\n")
	return b.String()
}
