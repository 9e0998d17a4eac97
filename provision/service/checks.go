package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// The states of a replica's update checks (ComputeChecks.state).
const (
	ChecksPending = "pending"
	ChecksPassing = "passing"
	ChecksFailing = "failing"
)

// JudgeChecks judges a replica's update checks (spec.update.checks): the
// latest result of each named check on the replica's node, by check name,
// counts only when it started at or after activeAt (a result from before
// the instance ran says nothing of it). One counted result that is not OK
// fails the replica; a check without a counted result keeps it pending;
// all OK pass it. With no checks named it returns "" (Active suffices).
func JudgeChecks(names []string, node string, activeAt time.Time, latest map[string]*unyov1.Event) (state, message string) {
	if len(names) == 0 {
		return "", ""
	}
	var pending []string
	for _, name := range names {
		e := latest[name]
		if e == nil || e.GetStartedAt().AsTime().Before(activeAt) {
			pending = append(pending, name)
			continue
		}
		if st := e.GetStatus(); st != unyov1.CheckStatus_CHECK_STATUS_OK {
			return ChecksFailing, fmt.Sprintf("check %s on node %s is %s: %s", name, node, strings.ToUpper(st.Name()), e.GetOutput())
		}
	}
	if len(pending) > 0 {
		return ChecksPending, fmt.Sprintf("waiting for a result of %s on node %s since the replica became Active", strings.Join(pending, ", "), node)
	}
	return ChecksPassing, ""
}

// checksOK says whether a compute's update checks let it count as ready:
// none named, or all passing for its instance.
func checksOK(c *unyov1.Compute) bool {
	return len(c.GetSpec().GetUpdate().GetChecks()) == 0 || c.GetStatus().GetChecks().GetState() == ChecksPassing
}

// checksFailing is why a compute's update checks fail, or "".
func checksFailing(c *unyov1.Compute) string {
	if len(c.GetSpec().GetUpdate().GetChecks()) == 0 || c.GetStatus().GetChecks().GetState() != ChecksFailing {
		return ""
	}
	return c.GetName() + ": " + c.GetStatus().GetChecks().GetMessage()
}
