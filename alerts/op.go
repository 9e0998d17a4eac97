package alerts

import (
	"errors"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// OpKind is what an Op does to the alert of its key.
type OpKind int

const (
	// OpFire opens an alert for the key, or fires the active one again
	// (a create_alert action).
	OpFire OpKind = iota + 1
	// OpResolve resolves the active alert of the key, and closes it too
	// when Close is set (a delete_alert action).
	OpResolve
)

// Op is an alert transition as data, decided by the event pipeline and
// applied by the store to the active alert of Key read in its transaction.
type Op struct {
	Kind OpKind
	Key  string
	// Rule signs the transition ("rule:NAME").
	Rule string
	// By, when set, signs the transition instead of Rule: the cluster
	// itself acting on an operator's change (a check or node deleted).
	By string
	// At is the transition's time.
	At time.Time

	// Fire: the level (unspecified: from the event), the summary (empty:
	// the event's output) and the event that fired.
	Level   unyov1.AlertLevel
	Summary string
	Event   *unyov1.Event
	// RefreshOnly fires only an open or acknowledged alert and otherwise
	// does nothing: a repeat within the reissue window keeps an alert's
	// count and last seen moving, but opens or reopens none.
	RefreshOnly bool

	// Resolve: why, and whether the alert is closed as well.
	Reason string
	Close  bool
}

// Apply runs op on cur, the active alert of op.Key (nil when there is
// none), and returns the alert to store (nil: nothing changes) and the
// outcome as an event's explanation shows it. cur may be changed in place
// and returned. An error means op itself is malformed.
func Apply(cur *unyov1.Alert, op Op) (next *unyov1.Alert, outcome string, err error) {
	if cur != nil && !Active(cur) {
		cur = nil // a closed alert is history; its key is free
	}
	switch op.Kind {
	case OpFire:
		if op.Event == nil {
			return nil, "", errors.New("an alert firing needs the event that fired")
		}
		if op.RefreshOnly && (cur == nil || cur.GetState() == unyov1.AlertState_ALERT_STATE_RESOLVED) {
			return nil, fmt.Sprintf("create_alert: no open alert with key %q to refresh; a repeat within the reissue window opens none", op.Key), nil
		}
		a, opened, reopened := Raise(cur, op.Key, op.Level, op.Summary, op.Event, op.Rule, op.At)
		switch {
		case opened:
			return a, fmt.Sprintf("create_alert: opened alert %s (%s, key %q)", a.GetId(), a.GetLevel().Name(), op.Key), nil
		case reopened:
			return a, fmt.Sprintf("create_alert: reopened alert %s (count %d, key %q)", a.GetId(), a.GetCount(), op.Key), nil
		}
		return a, fmt.Sprintf("create_alert: refreshed alert %s (count %d, key %q)", a.GetId(), a.GetCount(), op.Key), nil
	case OpResolve:
		if cur == nil {
			return nil, fmt.Sprintf("delete_alert: no active alert with key %q", op.Key), nil
		}
		by := RuleActor(op.Rule)
		if op.By != "" {
			by = op.By
		}
		if err := Resolve(cur, by, op.Reason, op.At); err != nil {
			return nil, "delete_alert: " + err.Error(), nil
		}
		if op.Close {
			if err := Close(cur, by, op.Reason, op.At); err == nil {
				return cur, fmt.Sprintf("delete_alert: resolved and closed alert %s", cur.GetId()), nil
			}
		}
		return cur, fmt.Sprintf("delete_alert: resolved alert %s", cur.GetId()), nil
	}
	return nil, "", fmt.Errorf("unknown alert operation %d for key %q", op.Kind, op.Key)
}
