package pipeline

import (
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/eventrules"
)

// Reissue suppresses a repeat at the same level within the check's reissue
// window (eventrules.Reissue), and opens a new window otherwise.
type Reissue struct{}

// Process implements Stage.
func (Reissue) Process(st *State, d *Decision, ev *Event) bool {
	nc := NodeCheck{Node: ev.GetNode(), Check: ev.GetCheck()}
	last, have := st.issued(d, nc)
	if !eventrules.Reissue(last, have, ev.Event, ev.At) {
		ev.Explanation.Outcome = "suppressed"
		ev.step("reissue", "", fmt.Sprintf("the same %s event was processed at %s, within its reissue window of %s",
			ev.GetLevel().Name(), last.At.UTC().Format(time.RFC3339), ev.GetReissue().AsDuration()))
		return false
	}
	d.Issued[nc] = eventrules.Issued{Level: ev.GetLevel(), At: ev.At}
	return true
}
