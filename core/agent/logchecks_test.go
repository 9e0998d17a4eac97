package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logtail"
)

func TestLogChecks(t *testing.T) {
	d, err := checks.Compile(&unyov1.Check{Name: "db-errors", Spec: &unyov1.CheckSpec{Interval: "1m",
		Log: &unyov1.LogCheck{Pattern: "db down", Level: "warning"}}})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: Options{NodeName: "n1"}}
	a.logChecks.set([]checks.Definition{d})
	line := func(msg string) logtail.Record { return logtail.Record{File: "/var/log/app.log", Message: msg} }
	t0 := time.Unix(1e9, 0)
	type step struct {
		at     time.Duration
		lines  []string
		output string // "" for no event
	}
	for i, s := range []step{
		{0, []string{"ok", "db down: first"}, `1 log line matched in /var/log/app.log: "db down: first"`},
		// A flood within the interval: one event at its end, quoting the first.
		{10 * time.Second, []string{"db down: a", "db down: b", "fine", "db down: c"}, ""},
		{59 * time.Second, nil, ""},
		{60 * time.Second, nil, `3 log lines matched in /var/log/app.log since the last event; first: "db down: a"`},
		// The lines stopped: no event at all, in particular no recovery.
		{2 * time.Minute, []string{"all good"}, ""},
		{10 * time.Minute, nil, ""},
		{11 * time.Minute, []string{"db down: " + strings.Repeat("x", 400)}, `1 log line matched in /var/log/app.log: "db down: ` + strings.Repeat("x", maxQuoted-len("db down: ")) + `…"`},
	} {
		var batch []logtail.Record
		for _, l := range s.lines {
			batch = append(batch, line(l))
		}
		a.logChecks.observe(batch)
		now := t0.Add(s.at)
		hits := a.logChecks.due(now)
		var got string
		if len(hits) > 1 {
			t.Fatalf("step %d: %d events, want at most one", i, len(hits))
		}
		for _, h := range hits {
			e := a.logEvent(h, now)
			got = e.GetOutput()
			if e.GetLevel() != unyov1.Level_LEVEL_WARNING || e.GetStatus() != unyov1.CheckStatus_CHECK_STATUS_WARNING || e.GetNode() != "n1" || e.GetCheck() != "db-errors" {
				t.Errorf("step %d: event %v, want a warning of n1/db-errors", i, e)
			}
		}
		if got != s.output {
			t.Errorf("step %d:\n got %q\nwant %q", i, got, s.output)
		}
	}
	// Re-applying keeps the window: no second event within the interval.
	a.logChecks.observe([]logtail.Record{line("db down")})
	a.logChecks.set([]checks.Definition{d})
	if hits := a.logChecks.due(t0.Add(11*time.Minute + time.Second)); len(hits) != 0 {
		t.Errorf("re-applying the check lifted its rate limit: %v", hits)
	}
}

// The loop raising log checks' events sleeps until a window gets its first
// match, rather than ticking every second on every node.
func TestLogChecksWakeOnFirstMatch(t *testing.T) {
	d, err := checks.Compile(&unyov1.Check{Name: "db-errors", Spec: &unyov1.CheckSpec{Interval: "1m",
		Log: &unyov1.LogCheck{Pattern: "db down", Level: "warning"}}})
	if err != nil {
		t.Fatal(err)
	}
	l := logChecks{matched: make(chan struct{}, 1)}
	l.set([]checks.Definition{d})
	woken := func() bool {
		select {
		case <-l.matched:
			return true
		default:
			return false
		}
	}
	l.observe([]logtail.Record{{Message: "all fine"}})
	if woken() || l.pending() {
		t.Fatal("a line matching no check woke the loop")
	}
	l.observe([]logtail.Record{{Message: "db down"}})
	if !woken() || !l.pending() {
		t.Fatal("the first match did not wake the loop")
	}
	l.observe([]logtail.Record{{Message: "db down again"}})
	if woken() {
		t.Error("a second match of the window woke the loop again")
	}
	if hits := l.due(time.Now()); len(hits) != 1 || hits[0].count != 2 {
		t.Fatalf("due = %v, want one event of 2 matches", hits)
	}
	if l.pending() {
		t.Error("matches still pending after their event")
	}
}
