package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// The default rules of configs/resources/rules.yaml, as far as alerts go.
const (
	criticalAlerts    = `{"type": "action", "priority": 10, "match": {"levels": ["critical"]}, "actions": [{"create_alert": {"level": "critical"}}]}`
	resolveOnRecovery = `{"type": "action", "priority": 10, "match": {"levels": ["success"]}, "actions": [{"delete_alert": {}}]}`
)

// jobs lists a decision's outbox jobs as "rule status".
func jobs(d *pipeline.Decision) string {
	var out []string
	for _, j := range d.Actions {
		out = append(out, j.Rule+" "+j.Status)
	}
	return strings.Join(out, ", ")
}

// TestNotifyOnChange: an api_hook is sent when a check starts firing, on a
// level change and after its repeat interval, never per repeated result,
// and exactly once resolved, by the rule that notified the firing although
// it matches only non-OK levels. The alert's count and last seen move with
// every result all the same.
func TestNotifyOnChange(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"page": `{"type": "action", "priority": 50, "continue": true, "match": {"check": "disk", "levels": ["critical", "warning"]},
			"actions": [{"api_hook": {"url": "https://pager.example/hook", "format": "alertmanager", "repeat_interval": "1h"}}]}`,
		"critical-alerts":     criticalAlerts,
		"warning-alerts":      `{"type": "action", "priority": 10, "match": {"levels": ["warning"]}, "actions": [{"create_alert": {"level": "critical"}}]}`,
		"resolve-on-recovery": resolveOnRecovery,
	}))
	active := map[string]*unyov1.Alert{}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	steps := []struct {
		min   int
		level unyov1.Level
		jobs  string
	}{
		{0, crit, "page firing"},
		{1, crit, ""},
		{2, crit, ""},
		{3, warn, "page firing"}, // level change
		{30, warn, ""},
		{63, warn, "page firing"}, // repeat interval
		{64, warn, ""},
		{65, ok, "page resolved"},
		{66, ok, ""},
		{67, ok, ""},
	}
	for i, s := range steps {
		e := ev(fmt.Sprint("e", i), "web1", "disk", s.level, at(s.min))
		d := run(st, at(s.min), []*unyov1.Event{e})[0]
		applyAlerts(t, active, d)
		if got := jobs(d); got != s.jobs {
			t.Errorf("minute %d (%s): jobs %q, want %q\n%s", s.min, s.level.Name(), got, s.jobs, strings.Join(outcomes(d), "\n"))
		}
		if s.jobs == "page resolved" {
			j := d.Actions[0]
			if !j.Since.Equal(t0) || j.Level != warn || j.Key != "page/e7/0" {
				t.Errorf("resolved job: since %s, level %s, key %s; want the firing's start and last level", j.Since, j.Level.Name(), j.Key)
			}
			if len(j.AlertOps) != 0 {
				t.Errorf("the resolved notification of a rule without alert actions carries alert ops %v", j.AlertOps)
			}
		}
	}
	a := active["web1/disk"]
	if a.GetCount() != 7 || !a.GetLastSeen().AsTime().Equal(at(64)) || a.GetState() != unyov1.AlertState_ALERT_STATE_RESOLVED {
		t.Errorf("alert: count %d (want 7), last seen %s, %s", a.GetCount(), a.GetLastSeen().AsTime(), a.GetState().Name())
	}
	if len(st.Notified) != 0 {
		t.Errorf("notification records left after the resolution: %v", st.Notified)
	}
}

// TestNotifyRecoveryRule: a hook in a rule matching success results (the
// usual "second rule") sends resolved once per recovery, not on every OK
// result, and nothing for a check that never fired.
func TestNotifyRecoveryRule(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"critical-alerts": criticalAlerts,
		"recovered":       `{"type": "action", "match": {"levels": ["success"]}, "actions": [{"delete_alert": {}}, {"api_hook": {"url": "https://chat.example/hook"}}]}`,
	}))
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for i, s := range []struct {
		level unyov1.Level
		jobs  string
	}{{ok, ""}, {crit, ""}, {ok, "recovered resolved"}, {ok, ""}, {crit, ""}, {ok, "recovered resolved"}} {
		d := run(st, at(i), []*unyov1.Event{ev(fmt.Sprint("e", i), "web1", "disk", s.level, at(i))})[0]
		if got := jobs(d); got != s.jobs {
			t.Errorf("result %d (%s): jobs %q, want %q", i, s.level.Name(), got, s.jobs)
		}
	}
}

// TestNotifyResolvedAfterSilence: a recovery silenced by a
// maintenance sends nothing; the next recovery result sends the resolved
// notification still owed.
func TestNotifyResolvedAfterSilence(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"page":  `{"type": "action", "match": {"levels": ["critical"]}, "actions": [{"api_hook": {"url": "https://pager.example/hook"}}]}`,
		"quiet": `{"type": "silence", "match": {"message": "quiet.*"}}`,
	}))
	e0 := ev("e0", "web1", "disk", crit, t0)
	e1 := ev("e1", "web1", "disk", ok, t0.Add(time.Minute))
	e1.Output = "quiet please"
	e2 := ev("e2", "web1", "disk", ok, t0.Add(2*time.Minute))
	ds := run(st, t0, []*unyov1.Event{e0}, []*unyov1.Event{e1}, []*unyov1.Event{e2}, []*unyov1.Event{ev("e3", "web1", "disk", ok, t0.Add(3*time.Minute))})
	var got []string
	for _, d := range ds {
		got = append(got, jobs(d))
	}
	if strings.Join(got, "; ") != "page firing; ; page resolved; " {
		t.Errorf("jobs per result: %q", got)
	}
}

// TestAggregateKeepsAlerts: the README's disks-together example with the
// default rules. Grouping shapes the notification (one api_hook for the
// group when its window ends); the grouped events still open and refresh
// their alerts through the action rules.
func TestAggregateKeepsAlerts(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"disks-together": `{"type": "aggregate", "match": {"check": "disk.*", "levels": ["critical", "warning"]}, "group_by": ["check"], "wait": "2m",
			"actions": [{"api_hook": {"url": "https://chat.example/hook"}}]}`,
		"critical-alerts":     criticalAlerts,
		"resolve-on-recovery": resolveOnRecovery,
	}))
	active := map[string]*unyov1.Alert{}
	p := pipeline.New()
	d := p.Decide(st, []*unyov1.Event{ev("a", "web1", "disk", crit, t0), ev("b", "web2", "disk", crit, t0)}, t0)
	want(t, outcomes(d),
		`a grouped | aggregate(disks-together): grouped as "check=disk"`,
		`b grouped | aggregate(disks-together): grouped as "check=disk"`)
	applyAlerts(t, active, d)
	for _, x := range outcomes(d) {
		if !strings.Contains(x, "action(critical-alerts): create_alert: opened alert") {
			t.Errorf("a grouped event opened no alert: %s", x)
		}
	}
	if len(d.Actions) != 0 {
		t.Errorf("the group notified before its window ended: %s", jobs(d))
	}
	st.Apply(d)
	d = p.Decide(st, []*unyov1.Event{ev("c", "web1", "disk", crit, t0.Add(time.Minute))}, t0.Add(time.Minute))
	applyAlerts(t, active, d)
	st.Apply(d)
	if a := active["web1/disk"]; a.GetCount() != 2 {
		t.Errorf("a grouped repeat did not refresh the alert: count %d", a.GetCount())
	}
	f := p.Flush(st, t0.Add(2*time.Minute))
	if got := jobs(f); got != "disks-together firing" || len(f.Actions[0].Events) != 3 {
		t.Errorf("flush: jobs %q, want one notification for the group", got)
	}
}

// TestReissueRefreshesAlerts: a repeat within the reissue window notifies
// nobody but keeps the alert's count and last seen moving; it opens no
// alert once an operator closed it.
func TestReissueRefreshesAlerts(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"page": `{"type": "action", "match": {"levels": ["critical"]}, "actions": [{"create_alert": {}}, {"api_hook": {"url": "https://pager.example/hook", "repeat_interval": "1m"}}]}`,
	}))
	active := map[string]*unyov1.Alert{}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for i := range 5 {
		e := withOcc(ev(fmt.Sprint("e", i), "web1", "disk", crit, at(i*10)), 0, time.Hour)
		d := run(st, at(i*10), []*unyov1.Event{e})[0]
		applyAlerts(t, active, d)
		wantJobs := ""
		if i == 0 {
			wantJobs = "page firing"
		}
		if got := jobs(d); got != wantJobs {
			t.Errorf("result %d: jobs %q, want %q: %v", i, got, wantJobs, outcomes(d))
		}
		if i > 0 {
			want(t, outcomes(d), fmt.Sprint("e", i)+" suppressed | reissue(): ")
		}
	}
	a := active["web1/disk"]
	if a.GetCount() != 5 || !a.GetLastSeen().AsTime().Equal(at(40)) {
		t.Errorf("alert count %d, last seen %s: want 5 and the last result's time", a.GetCount(), a.GetLastSeen().AsTime())
	}
	a.State = unyov1.AlertState_ALERT_STATE_CLOSED
	d := run(st, at(50), []*unyov1.Event{withOcc(ev("e5", "web1", "disk", crit, at(50)), 0, time.Hour)})[0]
	applyAlerts(t, active, d)
	if active["web1/disk"] != a {
		t.Error("a suppressed repeat opened a new alert after the operator closed one")
	}
	want(t, outcomes(d), `no open alert with key "web1/disk" to refresh`)
}

// TestNotifyResolvedCarriesOwnAlert: the resolved notification of a rule
// that opened an alert carries that alert as the recovery rule resolved it.
func TestNotifyResolvedCarriesOwnAlert(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"page":                `{"type": "action", "priority": 50, "match": {"levels": ["critical"]}, "actions": [{"create_alert": {"level": "fatal"}}, {"api_hook": {"url": "https://pager.example/hook"}}]}`,
		"other":               `{"type": "action", "priority": 40, "continue": true, "match": {"levels": ["success"]}, "actions": [{"delete_alert": {"key": "elsewhere"}}]}`,
		"resolve-on-recovery": resolveOnRecovery,
	}))
	ds := run(st, t0, []*unyov1.Event{ev("e0", "web1", "disk", crit, t0)}, []*unyov1.Event{ev("e1", "web1", "disk", ok, t0.Add(time.Minute))})
	d := ds[1]
	if got := jobs(d); got != "page resolved" {
		t.Fatalf("jobs %q", got)
	}
	if ops := d.Actions[0].AlertOps; len(ops) != 1 || d.Alerts[ops[0]].Key != "web1/disk" || d.Alerts[ops[0]].Rule != "resolve-on-recovery" {
		t.Errorf("alert ops %v, want resolve-on-recovery's resolution of web1/disk", ops)
	}
}

// TestNotifyEveryResult: repeat_interval 0 sends on every result its rule
// matches, as before notifications followed changes.
func TestNotifyEveryResult(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"sink": `{"type": "action", "match": {"check": "disk"}, "actions": [{"api_hook": {"url": "https://sink.example/hook", "repeat_interval": "0s"}}]}`,
	}))
	d := run(st, t0, []*unyov1.Event{ev("a", "web1", "disk", crit, t0), ev("b", "web1", "disk", crit, t0), ev("c", "web1", "disk", ok, t0), ev("d", "web1", "disk", ok, t0)})[0]
	if got := jobs(d); got != "sink firing, sink firing, sink resolved, sink resolved" {
		t.Errorf("jobs %q", got)
	}
}
