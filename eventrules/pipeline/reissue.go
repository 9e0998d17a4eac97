package pipeline

import (
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// Reissue suppresses a repeat at the same level within the check's reissue
// window (eventrules.Reissue), and opens a new window otherwise. A
// suppressed event goes on, marked, only to refresh its alerts: what
// notifications do must not freeze an alert's count and last seen.
type Reissue struct{}

// Process implements Stage.
func (Reissue) Process(st *State, d *Decision, ev *Event) bool {
	nc := NodeCheck{Node: ev.GetNode(), Check: ev.GetCheck()}
	last, have := st.issued(d, nc)
	if !eventrules.Reissue(last, have, ev.Event, ev.At) {
		ev.Explanation.Outcome = "suppressed"
		ev.Suppressed = true
		ev.step("reissue", "", fmt.Sprintf("the same %s event was processed at %s, within its reissue window of %s; it only refreshes its alerts",
			ev.GetLevel().Name(), last.At.UTC().Format(time.RFC3339), ev.GetReissue().AsDuration()))
		return true
	}
	ev.Recovered = have && last.Level != unyov1.Level_LEVEL_SUCCESS && ev.GetLevel() == unyov1.Level_LEVEL_SUCCESS
	d.Issued[nc] = eventrules.Issued{Level: ev.GetLevel(), At: ev.At}
	return true
}
