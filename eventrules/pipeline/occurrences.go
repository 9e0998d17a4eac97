package pipeline

import (
	"fmt"

	"github.com/unyo-ops/unyo/eventrules"
)

// Occurrences counts consecutive results at one level per node/check and
// holds a problem back until the check's occurrences are reached
// (eventrules.Occur).
type Occurrences struct{}

// Process implements Stage.
func (Occurrences) Process(st *State, d *Decision, ev *Event) bool {
	nc := NodeCheck{Node: ev.GetNode(), Check: ev.GetCheck()}
	next, raise := eventrules.Occur(st.counter(d, nc), ev.Event)
	d.Counters[nc] = next
	if raise {
		return true
	}
	ev.Explanation.Outcome = "pending"
	ev.step("occurrences", "", fmt.Sprintf("%d of %d consecutive %s results; no event raised yet",
		next.Count, max(1, ev.GetOccurrences()), ev.GetLevel().Name()))
	return false
}
