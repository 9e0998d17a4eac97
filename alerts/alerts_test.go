package alerts_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

const (
	open     = unyov1.AlertState_ALERT_STATE_OPEN
	acked    = unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED
	resolved = unyov1.AlertState_ALERT_STATE_RESOLVED
	closed   = unyov1.AlertState_ALERT_STATE_CLOSED
	unset    = unyov1.AlertState_ALERT_STATE_UNSPECIFIED

	fatal    = unyov1.AlertLevel_ALERT_LEVEL_FATAL
	critical = unyov1.AlertLevel_ALERT_LEVEL_CRITICAL
	warning  = unyov1.AlertLevel_ALERT_LEVEL_WARNING
)

var t0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

func event(id string, level unyov1.Level, output string) *unyov1.Event {
	return &unyov1.Event{Id: id, Cluster: "tokyo", Node: "web1", Check: "disk", Level: level, Output: output}
}

// alertIn returns a fresh alert brought to state the way production does.
func alertIn(t *testing.T, state unyov1.AlertState) *unyov1.Alert {
	t.Helper()
	a := alerts.New("web1/disk", critical, "", event("e1", unyov1.Level_LEVEL_CRITICAL, "DISK CRITICAL"), "page", t0)
	switch state {
	case acked:
		must(t, alerts.Ack(a, "alice", "", t0.Add(time.Minute)))
	case resolved:
		must(t, alerts.Resolve(a, "rule:page", "", t0.Add(time.Minute)))
	case closed:
		must(t, alerts.Close(a, "alice", "disk replaced", t0.Add(time.Minute)))
	}
	if a.GetState() != state {
		t.Fatalf("setup: state = %v, want %v", a.GetState(), state)
	}
	return a
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNew(t *testing.T) {
	e := event("e1", unyov1.Level_LEVEL_CRITICAL, "DISK CRITICAL - / 95%")
	a := alerts.New("web1/disk", fatal, "", e, "page", t0)

	id, err := uuid.Parse(a.GetId())
	if err != nil || id.Version() != 7 {
		t.Errorf("id %q is not a UUIDv7 (%v)", a.GetId(), err)
	}
	want := &unyov1.Alert{
		Id: a.GetId(), Cluster: "tokyo", Key: "web1/disk", Level: fatal, State: open,
		Node: "web1", Check: "disk", Summary: "DISK CRITICAL - / 95%", Rule: "page", Count: 1,
		FirstSeen: timestamppb.New(t0), LastSeen: timestamppb.New(t0), LastEventId: "e1",
		History: []*unyov1.AlertTransition{{At: timestamppb.New(t0), From: unset, To: open, By: "rule:page", Reason: "fired"}},
	}
	if !proto.Equal(a, want) {
		t.Errorf("New =\n%v\nwant\n%v", a, want)
	}
	if b := alerts.New("web1/disk", fatal, "", e, "page", t0); b.GetId() == a.GetId() {
		t.Error("two alerts got the same id")
	}
}

func TestNewLevelAndSummaryDefaults(t *testing.T) {
	tests := []struct {
		level      unyov1.AlertLevel
		eventLevel unyov1.Level
		summary    string
		wantLevel  unyov1.AlertLevel
		wantSum    string
	}{
		{warning, unyov1.Level_LEVEL_CRITICAL, "custom", warning, "custom"},
		{0, unyov1.Level_LEVEL_CRITICAL, "", critical, "out"},
		{0, unyov1.Level_LEVEL_WARNING, "", warning, "out"},
		{0, unyov1.Level_LEVEL_SUCCESS, "", warning, "out"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%v", tt.level, tt.eventLevel), func(t *testing.T) {
			a := alerts.New("k", tt.level, tt.summary, event("e", tt.eventLevel, "out"), "r", t0)
			if a.GetLevel() != tt.wantLevel || a.GetSummary() != tt.wantSum {
				t.Errorf("level, summary = %v, %q; want %v, %q", a.GetLevel(), a.GetSummary(), tt.wantLevel, tt.wantSum)
			}
		})
	}
}

func TestFireRefreshes(t *testing.T) {
	a := alertIn(t, open)
	reopened, err := alerts.Fire(a, critical, "", event("e2", unyov1.Level_LEVEL_CRITICAL, "DISK CRITICAL - / 97%"), "page", t0.Add(5*time.Minute))
	must(t, err)
	if reopened {
		t.Error("an open alert reported reopened")
	}
	if a.GetCount() != 2 || a.GetLastEventId() != "e2" || !a.GetLastSeen().AsTime().Equal(t0.Add(5*time.Minute)) {
		t.Errorf("count, last event, last seen = %d, %q, %v", a.GetCount(), a.GetLastEventId(), a.GetLastSeen().AsTime())
	}
	if a.GetSummary() != "DISK CRITICAL - / 97%" {
		t.Errorf("summary = %q, want the latest output", a.GetSummary())
	}
	if !a.GetFirstSeen().AsTime().Equal(t0) {
		t.Errorf("first seen moved to %v", a.GetFirstSeen().AsTime())
	}
	if len(a.GetHistory()) != 1 {
		t.Errorf("a repeat at the same level added history: %v", a.GetHistory())
	}

	// A replay of the same event changes nothing.
	before := proto.Clone(a)
	if _, err := alerts.Fire(a, critical, "", event("e2", unyov1.Level_LEVEL_CRITICAL, "x"), "page", t0.Add(6*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(a, before) {
		t.Errorf("replaying event e2 changed the alert:\n%v", a)
	}

	// An older event does not move last_seen back.
	must2(t)(alerts.Fire(a, critical, "", event("e0", unyov1.Level_LEVEL_CRITICAL, "x"), "page", t0.Add(time.Minute)))
	if !a.GetLastSeen().AsTime().Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("last seen went back to %v", a.GetLastSeen().AsTime())
	}
}

func must2(t *testing.T) func(bool, error) {
	return func(_ bool, err error) {
		t.Helper()
		must(t, err)
	}
}

func TestFireLevelChange(t *testing.T) {
	for _, state := range []unyov1.AlertState{open, acked} {
		t.Run(state.Name(), func(t *testing.T) {
			a := alertIn(t, state)
			n := len(a.GetHistory())
			must2(t)(alerts.Fire(a, fatal, "", event("e2", unyov1.Level_LEVEL_CRITICAL, "x"), "page", t0.Add(time.Hour)))
			if a.GetLevel() != fatal || a.GetState() != state {
				t.Fatalf("level, state = %v, %v; want fatal, %v", a.GetLevel(), a.GetState(), state)
			}
			h := a.GetHistory()
			if len(h) != n+1 {
				t.Fatalf("history has %d entries, want %d", len(h), n+1)
			}
			last := h[len(h)-1]
			if last.GetFrom() != state || last.GetTo() != state || last.GetBy() != "rule:page" ||
				last.GetReason() != "level changed from critical to fatal" {
				t.Errorf("level change recorded as %v", last)
			}
		})
	}
}

func TestFireReopensResolved(t *testing.T) {
	tests := []struct {
		name       string
		level      unyov1.AlertLevel
		wantReason string
	}{
		{"same level", critical, "fired again"},
		{"level change", warning, "fired again; level changed from critical to warning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := alertIn(t, resolved)
			id := a.GetId()
			reopened, err := alerts.Fire(a, tt.level, "", event("e2", unyov1.Level_LEVEL_WARNING, "x"), "page", t0.Add(time.Hour))
			must(t, err)
			if !reopened || a.GetState() != open || a.GetId() != id {
				t.Fatalf("reopened, state, id = %v, %v, %s; want true, open, %s", reopened, a.GetState(), a.GetId(), id)
			}
			h := a.GetHistory()
			want := &unyov1.AlertTransition{At: timestamppb.New(t0.Add(time.Hour)), From: resolved, To: open, By: "rule:page", Reason: tt.wantReason}
			if !proto.Equal(h[len(h)-1], want) {
				t.Errorf("last transition = %v, want %v", h[len(h)-1], want)
			}
		})
	}
}

func TestFireClosed(t *testing.T) {
	a := alertIn(t, closed)
	before := proto.Clone(a)
	_, err := alerts.Fire(a, critical, "", event("e2", unyov1.Level_LEVEL_CRITICAL, "x"), "page", t0.Add(time.Hour))
	var se *alerts.StateError
	if !errors.As(err, &se) {
		t.Fatalf("Fire on a closed alert: err = %v, want a *StateError", err)
	}
	want := fmt.Sprintf(`alert %s is closed; it cannot be reopened (a new alert is opened for key "web1/disk" instead)`, a.GetId())
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if !proto.Equal(a, before) {
		t.Error("a refused Fire changed the alert")
	}
}

func TestRaise(t *testing.T) {
	e := event("e2", unyov1.Level_LEVEL_CRITICAL, "x")
	tests := []struct {
		name                   string
		current                *unyov1.Alert
		wantOpened, wantReopen bool
	}{
		{"none", nil, true, false},
		{"open", alertIn(t, open), false, false},
		{"resolved", alertIn(t, resolved), false, true},
		{"closed", alertIn(t, closed), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, opened, reopened := alerts.Raise(tt.current, "web1/disk", 0, "", e, "page", t0.Add(time.Hour))
			if opened != tt.wantOpened || reopened != tt.wantReopen {
				t.Errorf("opened, reopened = %v, %v; want %v, %v", opened, reopened, tt.wantOpened, tt.wantReopen)
			}
			if opened == (a == tt.current) {
				t.Errorf("opened = %v but the returned alert is the current one: %v", opened, a == tt.current)
			}
			if a.GetState() != open || a.GetLastEventId() != "e2" {
				t.Errorf("state, last event = %v, %q", a.GetState(), a.GetLastEventId())
			}
		})
	}
}

// TestOperations is the state machine: every operation from every state.
func TestOperations(t *testing.T) {
	type op func(a *unyov1.Alert, by, reason string, now time.Time) error
	ops := map[string]op{"ack": alerts.Ack, "resolve": alerts.Resolve, "close": alerts.Close}
	tests := []struct {
		op      string
		from    unyov1.AlertState
		by      string
		reason  string
		want    unyov1.AlertState
		noop    bool   // no new transition
		wantErr string // substring; %s is the alert id
		// wantReason is the recorded reason when it differs from reason.
		wantReason string
	}{
		{op: "ack", from: open, by: "alice", want: acked},
		{op: "ack", from: open, by: "alice", reason: "looking", want: acked},
		{op: "ack", from: acked, by: "bob", want: acked, noop: true},
		{op: "ack", from: resolved, by: "alice", wantErr: "alert %s is resolved; it cannot be acknowledged (its condition already cleared; close it once it is dealt with)"},
		{op: "ack", from: closed, by: "alice", wantErr: "alert %s is closed; it cannot be acknowledged"},
		{op: "ack", from: open, by: " ", wantErr: "who is acting is required"},

		{op: "resolve", from: open, by: "rule:page", want: resolved, wantReason: "condition cleared"},
		{op: "resolve", from: acked, by: "rule:page", reason: "disk at 40%", want: resolved},
		{op: "resolve", from: open, by: "alice", reason: "fixed by hand", want: resolved},
		{op: "resolve", from: resolved, by: "rule:page", want: resolved, noop: true},
		{op: "resolve", from: closed, by: "rule:page", wantErr: "alert %s is closed; it cannot be resolved"},
		{op: "resolve", from: open, by: "", wantErr: "who is acting is required"},

		{op: "close", from: open, by: "alice", reason: "false positive", want: closed},
		{op: "close", from: acked, by: "alice", reason: "done", want: closed},
		{op: "close", from: resolved, by: "alice", reason: "disk replaced", want: closed},
		{op: "close", from: resolved, by: "rule:autoclose", want: closed, wantReason: "closed by rule"},
		{op: "close", from: open, by: "alice", wantErr: "closing an alert needs a reason"},
		{op: "close", from: resolved, by: "alice", reason: "  ", wantErr: "closing an alert needs a reason"},
		{op: "close", from: closed, by: "bob", reason: "again", wantErr: "alert %s is closed; it cannot be closed again"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s from %s by %q", tt.op, tt.from.Name(), tt.by)
		t.Run(name, func(t *testing.T) {
			a := alertIn(t, tt.from)
			before := proto.Clone(a).(*unyov1.Alert)
			at := t0.Add(time.Hour)
			err := ops[tt.op](a, tt.by, tt.reason, at)
			if tt.wantErr != "" {
				want := tt.wantErr
				if strings.Contains(want, "%s") {
					want = fmt.Sprintf(want, a.GetId())
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
				if !proto.Equal(a, before) {
					t.Errorf("a refused %s changed the alert", tt.op)
				}
				return
			}
			must(t, err)
			if a.GetState() != tt.want {
				t.Errorf("state = %v, want %v", a.GetState(), tt.want)
			}
			h := a.GetHistory()
			if tt.noop {
				if len(h) != len(before.GetHistory()) {
					t.Errorf("a no-op added a transition: %v", h[len(h)-1])
				}
				return
			}
			if len(h) != len(before.GetHistory())+1 {
				t.Fatalf("history has %d entries, want %d", len(h), len(before.GetHistory())+1)
			}
			reason := tt.reason
			if tt.wantReason != "" {
				reason = tt.wantReason
			}
			want := &unyov1.AlertTransition{At: timestamppb.New(at), From: tt.from, To: tt.want, By: tt.by, Reason: reason}
			if !proto.Equal(h[len(h)-1], want) {
				t.Errorf("recorded %v, want %v", h[len(h)-1], want)
			}
		})
	}
}

func TestStateErrorIsTyped(t *testing.T) {
	a := alertIn(t, closed)
	var se *alerts.StateError
	if err := alerts.Ack(a, "alice", "", t0); !errors.As(err, &se) || se.State != closed || se.ID != a.GetId() {
		t.Errorf("err = %#v, want a *StateError for a closed alert", err)
	}
	if err := alerts.Close(alertIn(t, open), "alice", "", t0); !errors.Is(err, alerts.ErrReasonRequired) {
		t.Errorf("err = %v, want ErrReasonRequired", err)
	}
}

// A flapping alert keeps its opening transition and the latest
// HistoryLimit ones.
func TestHistoryLimit(t *testing.T) {
	a := alertIn(t, open)
	now := t0
	for i := range 200 {
		now = now.Add(time.Minute)
		must(t, alerts.Resolve(a, "rule:page", "", now))
		now = now.Add(time.Minute)
		must2(t)(alerts.Fire(a, critical, "", event(fmt.Sprint("f", i), unyov1.Level_LEVEL_CRITICAL, "x"), "page", now))
	}
	h := a.GetHistory()
	if len(h) != alerts.HistoryLimit+1 {
		t.Fatalf("history has %d entries, want %d", len(h), alerts.HistoryLimit+1)
	}
	if h[0].GetFrom() != unset || h[0].GetTo() != open || h[0].GetReason() != "fired" {
		t.Errorf("the opening transition was trimmed; first is %v", h[0])
	}
	if last := h[len(h)-1]; !last.GetAt().AsTime().Equal(now) || last.GetReason() != "fired again" {
		t.Errorf("last = %v, want the latest firing at %v", last, now)
	}
	for i := 2; i < len(h); i++ {
		if !h[i].GetAt().AsTime().After(h[i-1].GetAt().AsTime()) {
			t.Fatalf("history out of order at %d: %v after %v", i, h[i].GetAt().AsTime(), h[i-1].GetAt().AsTime())
		}
	}
	if a.GetCount() != 201 {
		t.Errorf("count = %d, want 201", a.GetCount())
	}
}

func TestSort(t *testing.T) {
	mk := func(id string, level unyov1.AlertLevel, state unyov1.AlertState, age time.Duration) *unyov1.Alert {
		return &unyov1.Alert{Id: id, Level: level, State: state, FirstSeen: timestamppb.New(t0.Add(-age))}
	}
	as := []*unyov1.Alert{
		mk("w-open", warning, open, time.Hour),
		mk("c-resolved", critical, resolved, 3*time.Hour),
		mk("c-open-new", critical, open, time.Minute),
		mk("f-acked", fatal, acked, time.Minute),
		mk("c-acked", critical, acked, time.Hour),
		mk("c-open-old", critical, open, 2*time.Hour),
		mk("c-open-old-b", critical, open, 2*time.Hour),
		mk("f-open", fatal, open, time.Second),
		mk("w-closed", warning, closed, 9*time.Hour),
	}
	alerts.Sort(as)
	var got []string
	for _, a := range as {
		got = append(got, a.GetId())
	}
	want := []string{"f-open", "f-acked", "c-open-old", "c-open-old-b", "c-open-new", "c-acked", "c-resolved", "w-open", "w-closed"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
	for i := range as {
		for j := range as {
			if alerts.Less(as[i], as[j]) != (i < j) {
				t.Errorf("Less(%s, %s) = %v", as[i].GetId(), as[j].GetId(), !(i < j))
			}
		}
	}
}

func TestActive(t *testing.T) {
	for _, s := range []unyov1.AlertState{open, acked, resolved, closed} {
		if got, want := alerts.Active(alertIn(t, s)), s != closed; got != want {
			t.Errorf("Active(%s) = %v, want %v", s.Name(), got, want)
		}
	}
}

func TestLevelFromEvent(t *testing.T) {
	tests := map[unyov1.Level]unyov1.AlertLevel{
		unyov1.Level_LEVEL_CRITICAL:    critical,
		unyov1.Level_LEVEL_WARNING:     warning,
		unyov1.Level_LEVEL_SUCCESS:     unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED,
		unyov1.Level_LEVEL_UNSPECIFIED: unyov1.AlertLevel_ALERT_LEVEL_UNSPECIFIED,
	}
	for in, want := range tests {
		if got := alerts.LevelFromEvent(in); got != want {
			t.Errorf("LevelFromEvent(%v) = %v, want %v", in, got, want)
		}
	}
}
