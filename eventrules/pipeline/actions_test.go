package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestActionsPriorityAndContinue: action rules run by priority, and the
// walk stops after the first match without continue.
func TestActionsPriorityAndContinue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules map[string]string
		want  string
	}{
		{"the highest priority wins", map[string]string{
			"low":  `{"type": "action", "priority": 1, "match": {"check": "disk"}, "actions": [{"create_alert": {}}]}`,
			"high": `{"type": "action", "priority": 9, "match": {"check": "disk"}, "actions": [{"create_alert": {"key": "high"}}]}`,
		}, "action(high)"},
		{"continue lets the next run", map[string]string{
			"low":  `{"type": "action", "priority": 1, "match": {"check": "disk"}, "actions": [{"create_alert": {}}]}`,
			"high": `{"type": "action", "priority": 9, "match": {"check": "disk"}, "actions": [{"create_alert": {"key": "high"}}], "continue": true}`,
		}, "action(high):  | action(low):"},
		{"a rule that does not match does not stop the walk", map[string]string{
			"low":   `{"type": "action", "priority": 1, "match": {"check": "disk"}, "actions": [{"create_alert": {}}]}`,
			"other": `{"type": "action", "priority": 9, "match": {"check": "load"}, "actions": [{"create_alert": {}}]}`,
		}, "action(low)"},
		{"equal priority: by name", map[string]string{
			"b": `{"type": "action", "match": {"check": "disk"}, "actions": [{"create_alert": {}}]}`,
			"a": `{"type": "action", "match": {"check": "disk"}, "actions": [{"create_alert": {"key": "a"}}]}`,
		}, "action(a)"},
		{"no rule", map[string]string{}, "action(): no action rule matched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := run(state(rules(t, tt.rules)), t0, []*unyov1.Event{ev("e", "web1", "disk", crit, t0)})[0]
			got := outcomes(d)
			want(t, got, "e processed | "+tt.want)
			if n := strings.Count(got[0], "action("); n != strings.Count(tt.want, "action(") {
				t.Errorf("%d action steps: %s", n, got[0])
			}
		})
	}
}

// TestAlertTransitions: open, refresh, resolve, reopen, and resolve with
// close, through the decisions' alert operations applied as the store does.
func TestAlertTransitions(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"page":    `{"type": "action", "match": {"check": "disk", "levels": ["critical", "warning"]}, "actions": [{"create_alert": {}}]}`,
		"resolve": `{"type": "action", "match": {"check": "disk", "levels": ["success"]}, "actions": [{"delete_alert": {}}]}`,
		"close":   `{"type": "action", "match": {"check": "load", "levels": ["success"]}, "actions": [{"delete_alert": {"close": true}}]}`,
		"load":    `{"type": "action", "match": {"check": "load", "levels": ["critical"]}, "actions": [{"create_alert": {}}]}`,
	}))
	active := map[string]*unyov1.Alert{}
	steps := []struct {
		e    *unyov1.Event
		want string
	}{
		{ev("1", "web1", "disk", crit, t0), `create_alert: opened alert`},
		{ev("2", "web1", "disk", warn, t0.Add(time.Minute)), `create_alert: refreshed alert`},
		{ev("3", "web1", "disk", ok, t0.Add(2*time.Minute)), `delete_alert: resolved alert`},
		{ev("4", "web1", "disk", ok, t0.Add(3*time.Minute)), `delete_alert: resolved alert`}, // resolving again is a no-op
		{ev("5", "web1", "disk", crit, t0.Add(4*time.Minute)), `create_alert: reopened alert`},
		{ev("6", "web2", "disk", ok, t0.Add(5*time.Minute)), `delete_alert: no active alert with key "web2/disk"`},
		{ev("7", "web1", "load", crit, t0.Add(6*time.Minute)), `create_alert: opened alert`},
		{ev("8", "web1", "load", ok, t0.Add(7*time.Minute)), `delete_alert: resolved and closed alert`},
		{ev("9", "web1", "load", crit, t0.Add(8*time.Minute)), `create_alert: opened alert`}, // a closed alert never reopens
	}
	ids := map[string]string{}
	for _, s := range steps {
		d := run(st, t0.Add(10*time.Minute), []*unyov1.Event{s.e})[0]
		applyAlerts(t, active, d)
		got := outcomes(d)
		want(t, got, s.e.Id+" processed | action(")
		if !strings.Contains(got[0], s.want) {
			t.Errorf("event %s: %s, want %s", s.e.Id, got[0], s.want)
		}
		key := s.e.Node + "/" + s.e.Check
		if a := active[key]; a != nil && strings.HasPrefix(s.want, "create_alert: opened") {
			if prev := ids[key]; prev == a.GetId() {
				t.Errorf("event %s opened alert %s again", s.e.Id, prev)
			}
			ids[key] = a.GetId()
		}
	}
	disk := active["web1/disk"]
	if disk.GetState() != unyov1.AlertState_ALERT_STATE_OPEN || disk.GetCount() != 3 || disk.GetLevel() != unyov1.AlertLevel_ALERT_LEVEL_CRITICAL {
		t.Errorf("web1/disk: %v count %d level %v", disk.GetState(), disk.GetCount(), disk.GetLevel())
	}
}

// TestActionJobs: hooks and plugins become outbox jobs keyed by rule,
// event and action, pointing at the rule's alert operation.
func TestActionJobs(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{
		"notify": `{"type": "action", "match": {"check": "disk"}, "actions": [
			{"api_hook": {"url": "https://user:secret@hooks.example.com/x?token=t", "format": "alertmanager"}},
			{"create_alert": {}},
			{"plugin": {"name": "exec"}}]}`,
		"plain": `{"type": "action", "priority": -1, "match": {"check": "load"}, "actions": [{"api_hook": {"url": "https://hooks.example.com/y"}}]}`,
	}))
	d := run(st, t0, []*unyov1.Event{ev("e1", "web1", "disk", warn, t0), ev("e2", "web1", "load", crit, t0)})[0]
	want(t, outcomes(d),
		"e1 processed | action(notify): api_hook: queued for https://user:xxxxx@hooks.example.com/x?... (firing) | action(notify):  | action(notify): plugin: queued for action/exec (firing)",
		"e2 processed | action(plain): api_hook: queued for https://hooks.example.com/y (firing)")
	if len(d.Actions) != 3 {
		t.Fatalf("%d jobs", len(d.Actions))
	}
	hook, plugin, plain := d.Actions[0], d.Actions[1], d.Actions[2]
	if hook.Key != "notify/e1/0" || hook.Hook.GetFormat() != "alertmanager" || hook.Status != "firing" || hook.Cluster != "tokyo" || hook.EventID != "e1" {
		t.Errorf("hook job %+v", hook)
	}
	// The body carries the alert of the rule's create_alert, even though
	// the hook comes first in the rule.
	if len(hook.AlertOps) != 1 || d.Alerts[hook.AlertOps[0]].Key != "web1/disk" {
		t.Errorf("hook's alert ops %v", hook.AlertOps)
	}
	if plugin.Key != "notify/e1/2" || plugin.Plugin.GetName() != "exec" || plugin.Hook != nil || len(plugin.AlertOps) != 1 {
		t.Errorf("plugin job %+v", plugin)
	}
	if plain.Key != "plain/e2/0" || plain.Status != "firing" || len(plain.AlertOps) != 0 {
		t.Errorf("plain job %+v", plain)
	}
}
