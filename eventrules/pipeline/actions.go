package pipeline

import (
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// Actions runs the action rules matching an event, in priority order and
// while they continue: alert operations and outbox jobs in the decision.
type Actions struct{}

// Process implements Stage.
func (Actions) Process(st *State, d *Decision, ev *Event) bool {
	ev.Explanation.Outcome = "processed"
	matched := st.Rules.Actions(ev.Event, ev.At)
	if len(matched) == 0 {
		ev.step("action", "", "no action rule matched")
		return true
	}
	for _, r := range matched {
		d.RuleMatches[r.Name]++
		steps := runActions(d, st.Cluster, r, ev.Event, []*unyov1.Event{ev.Event}, ev.GetId(), ev.Now)
		ev.Explanation.Steps = append(ev.Explanation.Steps, steps...)
	}
	return true
}

// runActions decides rule r's actions for subject (an event, or a group's
// representative) and returns their explanation steps; an alert
// operation's step gets its outcome when the store applies it. idem makes
// the outbox jobs' keys.
func runActions(d *Decision, cluster string, r eventrules.Rule, subject *unyov1.Event, members []*unyov1.Event, idem string, now time.Time) []*unyov1.ExplanationStep {
	at := EventTime(subject)
	var steps []*unyov1.ExplanationStep
	var ops []int // this rule's alert operations
	firstJob := len(d.Actions)
	status := apihook.StatusFiring
	if subject.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
		status = apihook.StatusResolved
	}
	for i, a := range r.Actions {
		switch {
		case a.CreateAlert != nil:
			s := Step("action", r.Name, "", at)
			steps = append(steps, s)
			key, err := a.CreateAlert.Key(subject)
			if err != nil {
				s.Outcome = "create_alert failed: " + err.Error()
				continue
			}
			summary, err := a.CreateAlert.Summary(subject)
			if err != nil {
				summary = subject.GetOutput()
			}
			ops = append(ops, len(d.Alerts))
			d.Alerts = append(d.Alerts, AlertOp{Step: s, Op: alerts.Op{
				Kind: alerts.OpFire, Key: key, Rule: r.Name, At: now,
				Level: a.CreateAlert.Level(subject), Summary: summary, Event: subject,
			}})
		case a.DeleteAlert != nil:
			s := Step("action", r.Name, "", at)
			steps = append(steps, s)
			key, err := a.DeleteAlert.Key(subject)
			if err != nil {
				s.Outcome = "delete_alert failed: " + err.Error()
				continue
			}
			ops = append(ops, len(d.Alerts))
			d.Alerts = append(d.Alerts, AlertOp{Step: s, Op: alerts.Op{
				Kind: alerts.OpResolve, Key: key, Rule: r.Name, At: now,
				Reason: "condition cleared: " + subject.GetOutput(), Close: a.DeleteAlert.Close,
			}})
		case a.APIHook != nil:
			steps = append(steps, Step("action", r.Name, "api_hook: queued for "+apihook.Redact(a.APIHook.URL), at))
			h := a.APIHook
			d.Actions = append(d.Actions, ActionJob{
				Key: jobKey(r.Name, idem, i), Rule: r.Name, EventID: subject.GetId(),
				Hook:   &unyov1.ApiHookAction{Url: h.URL, Format: h.Format, Timeout: h.Timeout.String(), Retries: int32(h.Retries), Headers: h.Headers},
				Events: members, Status: status, Cluster: cluster,
			})
		case a.Plugin != nil:
			steps = append(steps, Step("action", r.Name, "plugin: queued for action/"+a.Plugin.Name, at))
			d.Actions = append(d.Actions, ActionJob{
				Key: jobKey(r.Name, idem, i), Rule: r.Name, EventID: subject.GetId(), Plugin: a.Plugin.Config,
				Events: members, Status: status, Cluster: cluster,
			})
		}
	}
	// The body carries the alert the rule's alert actions leave, whichever
	// of its actions comes first.
	for j := firstJob; j < len(d.Actions); j++ {
		d.Actions[j].AlertOps = ops
	}
	return steps
}

// jobKey is an outbox job's idempotency key: rule, event or group, and the
// action's place in the rule.
func jobKey(rule, idem string, i int) string { return fmt.Sprintf("%s/%s/%d", rule, idem, i) }
