// Package alerts is the alert lifecycle.
//
// An alert is opened by an event rule's create_alert action and
// deduplicated by key: while an alert for the key is active (not closed),
// further firings refresh it instead of opening another one. Transitions:
//
//	open         -> acknowledged (Ack), resolved (Resolve), closed (Close)
//	acknowledged -> resolved (Resolve), closed (Close)
//	resolved     -> open (Fire: "fired again"), closed (Close)
//	closed       -> none; the next firing opens a new alert (New)
//
// The condition clearing resolves an alert; it still waits for an operator
// to close it, unless a rule closes it explicitly (delete_alert with
// close). A resolved alert that fires again reopens, and says so in its
// history. A closed alert never reopens: the next firing for its key opens
// a new alert with a new id, so a closed alert's record stays as the
// operator left it.
//
// Every transition is appended to Alert.history with who made it (an
// operator's name, or "rule:NAME"), when and why. The functions here change
// the *unyov1.Alert in place and leave it untouched when they return an
// error; storing it is the caller's business. They take the time as an
// argument so that callers and tests decide what "now" is.
package alerts

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// HistoryLimit bounds Alert.history: the opening transition is always kept,
// plus the last HistoryLimit transitions. An alert flapping for weeks
// (fire, resolve, fire again...) would otherwise grow without bound in the
// store and in every API response; the oldest middle entries are the least
// useful to whoever handles it now.
const HistoryLimit = 100

// RulePrefix marks a transition made by an event rule rather than by an
// operator: "rule:NAME".
const RulePrefix = "rule:"

// RuleActor is how a rule signs the transitions it makes.
func RuleActor(rule string) string { return RulePrefix + rule }

// IsRule reports whether by names a rule rather than an operator.
func IsRule(by string) bool { return strings.HasPrefix(by, RulePrefix) }

// Reasons recorded when the caller gives none.
const (
	ReasonFired        = "fired"
	ReasonFiredAgain   = "fired again"
	ReasonCleared      = "condition cleared"
	ReasonClosedByRule = "closed by rule"
)

var (
	// ErrReasonRequired: an operator closing an alert must say why, because
	// the closed alert is the record of how the problem ended.
	ErrReasonRequired = errors.New("closing an alert needs a reason")
	// ErrActorRequired: a transition must record who made it.
	ErrActorRequired = errors.New("who is acting is required: an operator name, or rule:NAME")
)

// StateError is an action the alert's current state does not allow. The
// API reports it as FailedPrecondition; ErrReasonRequired and
// ErrActorRequired are InvalidArgument.
type StateError struct {
	ID    string
	State unyov1.AlertState
	// Action is what was refused, worded to follow "it cannot be":
	// "acknowledged", "resolved", "closed again", "reopened".
	Action string
	// Hint says what to do instead; may be empty.
	Hint string
}

func (e *StateError) Error() string {
	s := fmt.Sprintf("alert %s is %s; it cannot be %s", e.ID, e.State.Name(), e.Action)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// New opens an alert for key from the event e, on behalf of rule.
//
// The id is a UUIDv7, so ids sort by creation time. An empty summary
// defaults to the event's output, and an unspecified level to the event's
// level (LevelFromEvent), or warning when the event has none that maps.
// Node, check and cluster are those of the opening event and are not
// changed by later firings, which may come from other nodes when the key
// spans them.
func New(key string, level unyov1.AlertLevel, summary string, e *unyov1.Event, rule string, now time.Time) *unyov1.Alert {
	if summary == "" {
		summary = e.GetOutput()
	}
	ts := timestamppb.New(now)
	a := &unyov1.Alert{
		Id:          uuid.Must(uuid.NewV7()).String(),
		Cluster:     e.GetCluster(),
		Key:         key,
		Level:       firingLevel(level, e),
		State:       unyov1.AlertState_ALERT_STATE_OPEN,
		Node:        e.GetNode(),
		Check:       e.GetCheck(),
		Summary:     summary,
		Rule:        rule,
		Count:       1,
		FirstSeen:   ts,
		LastSeen:    timestamppb.New(now),
		LastEventId: e.GetId(),
	}
	record(a, unyov1.AlertState_ALERT_STATE_UNSPECIFIED, a.State, RuleActor(rule), ReasonFired, now)
	return a
}

// Fire records that the condition behind a fired again: last_seen, count,
// last_event_id, and the level and summary of the latest firing (an empty
// summary keeps the current one unless the event has output). A level
// change is recorded in the history; an acknowledged alert stays
// acknowledged. A resolved alert reopens, recorded as resolved -> open
// "fired again", and reopened is true.
//
// Firing the same event twice (a replay: e's id equals last_event_id) is a
// no-op, so at-least-once processing does not inflate the count.
//
// A closed alert cannot fire: Fire returns a *StateError and the caller
// opens a new alert for the key with New.
func Fire(a *unyov1.Alert, level unyov1.AlertLevel, summary string, e *unyov1.Event, rule string, now time.Time) (reopened bool, err error) {
	if a.GetState() == unyov1.AlertState_ALERT_STATE_CLOSED {
		return false, &StateError{ID: a.GetId(), State: a.GetState(), Action: "reopened",
			Hint: fmt.Sprintf("a new alert is opened for key %q instead", a.GetKey())}
	}
	if id := e.GetId(); id != "" && id == a.GetLastEventId() {
		return false, nil
	}
	by := RuleActor(rule)
	level = firingLevel(level, e)
	var change string
	if level != a.GetLevel() {
		change = fmt.Sprintf("level changed from %s to %s", a.GetLevel().Name(), level.Name())
	}
	switch state := a.GetState(); {
	case state == unyov1.AlertState_ALERT_STATE_RESOLVED:
		reason := ReasonFiredAgain
		if change != "" {
			reason += "; " + change
		}
		record(a, state, unyov1.AlertState_ALERT_STATE_OPEN, by, reason, now)
		a.State, reopened = unyov1.AlertState_ALERT_STATE_OPEN, true
	case change != "":
		// Same state on both sides: the entry exists to show the change.
		record(a, state, state, by, change, now)
	}
	a.Level = level
	a.Count++
	a.LastEventId = e.GetId()
	// Events can be processed out of order; last_seen never goes back.
	if a.GetLastSeen() == nil || now.After(a.GetLastSeen().AsTime()) {
		a.LastSeen = timestamppb.New(now)
	}
	if summary == "" {
		summary = e.GetOutput()
	}
	if summary != "" {
		a.Summary = summary
	}
	return reopened, nil
}

// Raise is what a create_alert action does with the alert currently
// stored for its key (nil if none): fire it if it is active, else open a
// new one. opened is true when the returned alert is new and must be
// inserted rather than updated.
func Raise(current *unyov1.Alert, key string, level unyov1.AlertLevel, summary string, e *unyov1.Event, rule string, now time.Time) (a *unyov1.Alert, opened, reopened bool) {
	if current == nil || !Active(current) {
		return New(key, level, summary, e, rule, now), true, false
	}
	reopened, _ = Fire(current, level, summary, e, rule, now) // active, so no error
	return current, false, reopened
}

// Resolve records that the condition cleared: open or acknowledged ->
// resolved. Resolving a resolved alert is a no-op (no new transition), so
// every success event of a cleared check can call it. An empty reason is
// recorded as "condition cleared". A closed alert cannot be resolved.
func Resolve(a *unyov1.Alert, by, reason string, now time.Time) error {
	if strings.TrimSpace(by) == "" {
		return ErrActorRequired
	}
	switch state := a.GetState(); state {
	case unyov1.AlertState_ALERT_STATE_RESOLVED:
		return nil
	case unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED:
		if reason == "" {
			reason = ReasonCleared
		}
		record(a, state, unyov1.AlertState_ALERT_STATE_RESOLVED, by, reason, now)
		a.State = unyov1.AlertState_ALERT_STATE_RESOLVED
		return nil
	default:
		return &StateError{ID: a.GetId(), State: state, Action: "resolved"}
	}
}

// Ack records that someone is handling the alert: open -> acknowledged.
// Acknowledging an acknowledged alert is a no-op. A resolved alert cannot
// be acknowledged (it needs closing, or reopens by itself if it fires
// again), nor a closed one.
func Ack(a *unyov1.Alert, by, reason string, now time.Time) error {
	if strings.TrimSpace(by) == "" {
		return ErrActorRequired
	}
	switch state := a.GetState(); state {
	case unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED:
		return nil
	case unyov1.AlertState_ALERT_STATE_OPEN:
		record(a, state, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED, by, reason, now)
		a.State = unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED
		return nil
	case unyov1.AlertState_ALERT_STATE_RESOLVED:
		return &StateError{ID: a.GetId(), State: state, Action: "acknowledged",
			Hint: "its condition already cleared; close it once it is dealt with"}
	default:
		return &StateError{ID: a.GetId(), State: state, Action: "acknowledged"}
	}
}

// Close ends the alert: any state but closed -> closed. An operator must
// give a reason (ErrReasonRequired); a rule's empty reason is recorded as
// "closed by rule". Closing a closed alert is an error rather than a no-op,
// because two operators closing the same alert should learn that the other
// one did.
func Close(a *unyov1.Alert, by, reason string, now time.Time) error {
	if strings.TrimSpace(by) == "" {
		return ErrActorRequired
	}
	state := a.GetState()
	if state == unyov1.AlertState_ALERT_STATE_CLOSED {
		return &StateError{ID: a.GetId(), State: state, Action: "closed again"}
	}
	if strings.TrimSpace(reason) == "" {
		if !IsRule(by) {
			return ErrReasonRequired
		}
		reason = ReasonClosedByRule
	}
	record(a, state, unyov1.AlertState_ALERT_STATE_CLOSED, by, reason, now)
	a.State = unyov1.AlertState_ALERT_STATE_CLOSED
	return nil
}

// Active reports whether the alert still needs an operator: any state but
// closed. At most one active alert exists per key.
func Active(a *unyov1.Alert) bool {
	return a.GetState() != unyov1.AlertState_ALERT_STATE_CLOSED
}

// Less orders alerts for consoles: the most severe level first (fatal,
// critical, warning), then by state (open, acknowledged, resolved, closed),
// then the oldest first, so what has waited longest for an operator is on
// top. Ties break by id to make the order total.
func Less(a, b *unyov1.Alert) bool { return compare(a, b) < 0 }

// Sort sorts alerts in console order (see Less).
func Sort(as []*unyov1.Alert) { slices.SortFunc(as, compare) }

// compare stops at the first difference (cmp.Or would evaluate every
// key): the console sorts 10,000 alerts per page.
func compare(a, b *unyov1.Alert) int {
	if c := cmp.Compare(b.GetLevel(), a.GetLevel()); c != 0 {
		return c
	}
	if c := cmp.Compare(stateRank(a.GetState()), stateRank(b.GetState())); c != 0 {
		return c
	}
	fa, fb := a.GetFirstSeen(), b.GetFirstSeen()
	if c := cmp.Compare(fa.GetSeconds(), fb.GetSeconds()); c != 0 {
		return c
	}
	if c := cmp.Compare(fa.GetNanos(), fb.GetNanos()); c != 0 {
		return c
	}
	return strings.Compare(a.GetId(), b.GetId())
}

func stateRank(s unyov1.AlertState) int {
	switch s {
	case unyov1.AlertState_ALERT_STATE_OPEN:
		return 0
	case unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED:
		return 1
	case unyov1.AlertState_ALERT_STATE_RESOLVED:
		return 2
	case unyov1.AlertState_ALERT_STATE_CLOSED:
		return 3
	}
	return 4
}

// record appends a transition and trims the history to the opening
// transition plus the last HistoryLimit.
func record(a *unyov1.Alert, from, to unyov1.AlertState, by, reason string, now time.Time) {
	a.History = append(a.History, &unyov1.AlertTransition{
		At: timestamppb.New(now), From: from, To: to, By: by, Reason: reason,
	})
	if n := len(a.History); n > HistoryLimit+1 {
		// slices.Delete zeroes the freed tail, so trimmed entries are not
		// kept alive by the backing array.
		a.History = slices.Delete(a.History, 1, n-HistoryLimit)
	}
}

// firingLevel is the level a firing gives its alert: the rule's, else the
// event's, else warning.
func firingLevel(level unyov1.AlertLevel, e *unyov1.Event) unyov1.AlertLevel {
	if level != unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED {
		return level
	}
	if l := LevelFromEvent(e.GetLevel()); l != unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED {
		return l
	}
	return unyov1.AlertLevel_ALERT_LEVEL_WARNING
}

// LevelFromEvent maps an event level to the alert level a create_alert
// action without a level uses: critical -> critical, warning -> warning.
// Success (and unspecified) map to unspecified: they do not open alerts.
// Fatal is never implied; only a rule can say that users are affected.
func LevelFromEvent(l unyov1.Level) unyov1.AlertLevel {
	switch l {
	case unyov1.Level_LEVEL_CRITICAL:
		return unyov1.AlertLevel_ALERT_LEVEL_CRITICAL
	case unyov1.Level_LEVEL_WARNING:
		return unyov1.AlertLevel_ALERT_LEVEL_WARNING
	}
	return unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED
}
