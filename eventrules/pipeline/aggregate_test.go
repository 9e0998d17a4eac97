package pipeline_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

const groupRule = `{"type": "aggregate", "match": {"check": "disk"}, "group_by": ["check"], "wait": "5m", "actions": [{"create_alert": {"key": "disk-wide"}}]}`

func TestAggregateWindow(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{"disk": groupRule})
	st := state(rs)
	p := pipeline.New()
	d := p.Decide(st, []*unyov1.Event{ev("a", "web1", "disk", crit, t0), ev("b", "web2", "disk", warn, t0)}, t0)
	want(t, outcomes(d),
		`a grouped | aggregate(disk): grouped as "check=disk" with 0 other event(s); the rule's actions run once for the group at 2026-03-01T12:05:00Z`,
		`b grouped | aggregate(disk): grouped as "check=disk" with 1 other event(s)`)
	if len(st.Groups) != 0 {
		t.Fatal("Decide changed the state before the commit")
	}
	if len(d.PutGroups) != 1 || len(d.PutGroups[0].GetMembers()) != 2 || len(d.Alerts) != 0 {
		t.Fatalf("put groups %v, %d alert ops", d.PutGroups, len(d.Alerts))
	}
	st.Apply(d)

	if f := p.Flush(st, t0.Add(5*time.Minute-time.Nanosecond)); f != nil {
		t.Fatalf("flushed before the window ended: %v", outcomes(f))
	}
	f := p.Flush(st, t0.Add(5*time.Minute))
	want(t, outcomes(f),
		"a grouped | aggregate(disk): window ended: actions ran once for 2 events: web1/disk, web2/disk | action(disk)",
		"b grouped | aggregate(disk): window ended")
	if !f.Explained[0].Append || len(f.DeleteGroups) != 1 || len(f.Alerts) != 1 {
		t.Fatalf("flush: append %v, %d deleted, %d alert ops", f.Explained[0].Append, len(f.DeleteGroups), len(f.Alerts))
	}
	// The group's representative: shared check, highest level, both outputs.
	op := f.Alerts[0]
	if op.Key != "disk-wide" || op.Event.GetCheck() != "disk" || op.Event.GetNode() != "" || op.Event.GetLevel() != crit {
		t.Errorf("alert op %+v", op.Op)
	}
	active := map[string]*unyov1.Alert{}
	applyAlerts(t, active, f)
	if a := active["disk-wide"]; a.GetLevel() != unyov1.AlertLevel_ALERT_LEVEL_CRITICAL || a.GetSummary() != "2 events: web1/disk: disk is LEVEL_CRITICAL; web2/disk: disk is LEVEL_WARNING" {
		t.Errorf("alert %v", a)
	}
	st.Apply(f)
	if len(st.Groups) != 0 || p.Flush(st, t0.Add(time.Hour)) != nil {
		t.Error("a flushed group stays open")
	}
}

// TestAggregateAfterRestart: a replica taking over loads the open groups a
// commit stored and the window ends when it would have.
func TestAggregateAfterRestart(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{"disk": groupRule})
	before := state(rs)
	d := run(before, t0, []*unyov1.Event{ev("a", "web1", "disk", crit, t0)})[0]

	after := state(rs) // a new replica: only what the commit stored
	after.SetGroups(d.PutGroups)
	p := pipeline.New()
	d2 := p.Decide(after, []*unyov1.Event{ev("b", "web2", "disk", crit, t0.Add(2*time.Minute))}, t0.Add(2*time.Minute))
	want(t, outcomes(d2), `b grouped | aggregate(disk): grouped as "check=disk" with 1 other event(s); the rule's actions run once for the group at 2026-03-01T12:05:00Z`)
	after.Apply(d2)
	f := p.Flush(after, t0.Add(5*time.Minute))
	want(t, outcomes(f), "a grouped | aggregate(disk): window ended: actions ran once for 2 events: web1/disk, web2/disk", "b grouped")
	if len(d.PutGroups[0].GetMembers()) != 1 {
		t.Error("a later decision changed an earlier decision's group")
	}
}

func TestAggregateRuleDeleted(t *testing.T) {
	t.Parallel()
	st := state(rules(t, map[string]string{"disk": groupRule}))
	run(st, t0, []*unyov1.Event{ev("a", "web1", "disk", crit, t0)})
	st.Rules = rules(t, map[string]string{})
	f := pipeline.New().Flush(st, t0.Add(time.Hour))
	want(t, outcomes(f), "a grouped | aggregate(disk): the rule was deleted before its window ended; no action ran")
	if len(f.Alerts)+len(f.Actions) != 0 || len(f.DeleteGroups) != 1 {
		t.Errorf("%d alert ops, %d actions, %d deleted", len(f.Alerts), len(f.Actions), len(f.DeleteGroups))
	}
}
