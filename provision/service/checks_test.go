package service

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestJudgeChecks(t *testing.T) {
	active := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	ev := func(status unyov1.CheckStatus, at time.Time, out string) *unyov1.Event {
		return &unyov1.Event{Status: status, StartedAt: timestamppb.New(at), Output: out}
	}
	ok, crit := unyov1.CheckStatus_CHECK_STATUS_OK, unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	for _, tc := range []struct {
		name      string
		checks    []string
		latest    map[string]*unyov1.Event
		wantState string
		wantMsg   string // a part of the message
	}{
		{"no checks: Active suffices", nil, nil, "", ""},
		{"no result yet", []string{"http"}, nil, ChecksPending, "waiting for a result of http on node n1"},
		{"only a result from before the instance", []string{"http"}, map[string]*unyov1.Event{"http": ev(ok, active.Add(-time.Second), "OK")}, ChecksPending, "http"},
		{"all OK since", []string{"http", "tcp"}, map[string]*unyov1.Event{"http": ev(ok, active, "OK"), "tcp": ev(ok, active.Add(time.Minute), "OK")}, ChecksPassing, ""},
		{"one pending", []string{"http", "tcp"}, map[string]*unyov1.Event{"http": ev(ok, active, "OK")}, ChecksPending, "tcp"},
		{"one failing wins over pending", []string{"tcp", "http"}, map[string]*unyov1.Event{"http": ev(crit, active.Add(time.Second), "HTTP CRITICAL - 503")}, ChecksFailing, "check http on node n1 is CRITICAL: HTTP CRITICAL - 503"},
		{"a failure from before the instance does not count", []string{"http"}, map[string]*unyov1.Event{"http": ev(crit, active.Add(-time.Minute), "down")}, ChecksPending, "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, msg := JudgeChecks(tc.checks, "n1", active, tc.latest)
			if state != tc.wantState || !strings.Contains(msg, tc.wantMsg) || (tc.wantMsg == "" && msg != "") {
				t.Errorf("JudgeChecks = %q, %q; want %q with %q", state, msg, tc.wantState, tc.wantMsg)
			}
		})
	}
}

// TestRolloutWaitsForChecks: a replica with update checks is Ready only
// once they pass; one failing at the new revision pauses the rollout (no
// moves) and says why.
func TestRolloutWaitsForChecks(t *testing.T) {
	withChecks := &unyov1.ComputeSpec{Update: &unyov1.UpdateStrategy{Checks: []string{"http"}}}
	replica := func(name string, rev int64, checks string) *unyov1.Compute {
		return &unyov1.Compute{Name: name, SpecRevision: rev, Spec: withChecks, Status: &unyov1.ComputeStatus{Phase: PhaseActive, SpecRevision: rev,
			Checks: &unyov1.ComputeChecks{State: checks, Message: "check http on node n1 is CRITICAL: 503"}}}
	}
	if Ready(replica("web-0", 2, ChecksPending)) || !Ready(replica("web-0", 2, ChecksPassing)) {
		t.Error("a replica with update checks is Ready exactly when they pass")
	}
	if !Ready(&unyov1.Compute{SpecRevision: 2, Status: &unyov1.ComputeStatus{Phase: PhaseActive, SpecRevision: 2}}) {
		t.Error("a replica without update checks is Ready when Active")
	}
	for _, tc := range []struct {
		name      string
		first     string // web-0's checks, moved to revision 2
		wantMoves int
		paused    bool
	}{
		{"pending: waits within the budget", ChecksPending, 0, false},
		{"passing: the next moves", ChecksPassing, 1, false},
		{"failing: paused", ChecksFailing, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := []*unyov1.Compute{replica("web-0", 2, tc.first), replica("web-1", 1, ChecksPassing), replica("web-2", 1, ChecksPassing)}
			rs := RolloutReplicas(live)
			moves := Pace(rs, 2, 1, 0)
			if len(moves) != tc.wantMoves {
				t.Errorf("moves %v, want %d", moves, tc.wantMoves)
			}
			p := Rollout(rs, 2)
			if (p.Paused != "") != tc.paused {
				t.Errorf("paused %q, want paused=%v", p.Paused, tc.paused)
			}
			if tc.paused && !strings.Contains(p.String(), "paused: web-0: check http on node n1 is CRITICAL") {
				t.Errorf("progress %q does not say why it paused", p.String())
			}
		})
	}
	// Surge budget alone: a failing replica still pauses.
	live := []*unyov1.Compute{replica("web-0", 2, ChecksFailing), replica("web-1", 1, ChecksPassing)}
	if m := Pace(RolloutReplicas(live), 2, 0, 5); len(m) != 0 {
		t.Errorf("moves %v while a replica at the target fails its checks", m)
	}
}
