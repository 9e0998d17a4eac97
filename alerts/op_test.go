package alerts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestApply(t *testing.T) {
	t.Parallel()
	later := t0.Add(time.Hour)
	fire := alerts.Op{Kind: alerts.OpFire, Key: "web1/disk", Rule: "page", At: later, Event: event("e2", unyov1.Level_LEVEL_CRITICAL, "DISK CRITICAL again")}
	resolve := alerts.Op{Kind: alerts.OpResolve, Key: "web1/disk", Rule: "page", At: later, Reason: "condition cleared: DISK OK"}
	closeToo := resolve
	closeToo.Close = true
	tests := []struct {
		name      string
		cur       unyov1.AlertState // 0: no alert
		op        alerts.Op
		outcome   string
		nextState unyov1.AlertState // 0: nothing to store
		newID     bool
	}{
		{"fire without an alert opens one", 0, fire, `create_alert: opened alert `, open, true},
		{"fire on an open alert refreshes it", open, fire, `create_alert: refreshed alert `, open, false},
		{"fire on an acknowledged alert keeps it acknowledged", acked, fire, `create_alert: refreshed alert `, acked, false},
		{"fire on a resolved alert reopens it", resolved, fire, `create_alert: reopened alert `, open, false},
		{"fire on a closed alert opens a new one", closed, fire, `create_alert: opened alert `, open, true},
		{"resolve without an alert", 0, resolve, `delete_alert: no active alert with key "web1/disk"`, 0, false},
		{"resolve an open alert", open, resolve, `delete_alert: resolved alert `, resolved, false},
		{"resolve and close", acked, closeToo, `delete_alert: resolved and closed alert `, closed, false},
		{"resolve a closed alert: none is active", closed, resolve, `delete_alert: no active alert`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var cur *unyov1.Alert
			if tt.cur != 0 {
				cur = alertIn(t, tt.cur)
			}
			next, outcome, err := alerts.Apply(cur, tt.op)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(outcome, tt.outcome) {
				t.Errorf("outcome %q, want %q…", outcome, tt.outcome)
			}
			if tt.nextState == 0 {
				if next != nil {
					t.Errorf("stores %v, want nothing", next)
				}
				return
			}
			if next.GetState() != tt.nextState {
				t.Errorf("state %v, want %v", next.GetState(), tt.nextState)
			}
			if gotNew := cur == nil || next.GetId() != cur.GetId(); gotNew != tt.newID {
				t.Errorf("new alert: %v, want %v", gotNew, tt.newID)
			}
			if !strings.Contains(outcome, next.GetId()) {
				t.Errorf("outcome %q does not name alert %s", outcome, next.GetId())
			}
		})
	}
}

func TestApplyMalformed(t *testing.T) {
	t.Parallel()
	for _, op := range []alerts.Op{{Key: "k"}, {Kind: alerts.OpFire, Key: "k"}} {
		if _, _, err := alerts.Apply(nil, op); err == nil {
			t.Errorf("Apply(%+v) accepted a malformed operation", op)
		}
	}
}

// TestApplyBy: a resolution made by the cluster on an operator's behalf (a
// check deleted) is signed by By, not as a rule.
func TestApplyBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op alerts.Op
		by string
	}{
		{alerts.Op{Kind: alerts.OpResolve, Key: "web1/disk", Rule: "page", At: t0, Reason: "cleared"}, "rule:page"},
		{alerts.Op{Kind: alerts.OpResolve, Key: "web1/disk", By: "alice", At: t0, Reason: `check "disk" deleted`}, "alice"},
	} {
		next, _, err := alerts.Apply(alertIn(t, open), tc.op)
		if err != nil {
			t.Fatal(err)
		}
		h := next.GetHistory()[len(next.GetHistory())-1]
		if h.GetBy() != tc.by || h.GetReason() != tc.op.Reason {
			t.Errorf("%+v: last transition by %q for %q, want by %q", tc.op, h.GetBy(), h.GetReason(), tc.by)
		}
	}
}
