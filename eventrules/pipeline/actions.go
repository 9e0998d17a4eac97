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
//
// Alert actions run for every event that gets here, so an alert's count
// and last-seen follow the results. Notifying actions (api_hook, plugin)
// follow changes instead, as Alertmanager's notifications do: they are sent
// when the node/check starts firing, when its level changes, again after
// the action's repeat interval while it keeps firing, and once when it
// recovers, whichever rule matched the recovery (see notify).
type Actions struct{}

// Process implements Stage.
func (Actions) Process(st *State, d *Decision, ev *Event) bool {
	if ev.Explanation.Outcome == "" {
		ev.Explanation.Outcome = "processed"
	}
	firstOp := len(d.Alerts)
	matched := st.Rules.Actions(ev.Event, ev.At)
	if len(matched) == 0 {
		ev.step("action", "", "no action rule matched")
	}
	for _, r := range matched {
		d.RuleMatches[r.Name]++
		var steps []*unyov1.ExplanationStep
		if ev.Suppressed {
			steps = refreshAlerts(d, r, ev)
		} else {
			steps = runActions(d, st, r, ev.Event, []*unyov1.Event{ev.Event}, ev.GetId(), ev.Now, ev)
		}
		ev.Explanation.Steps = append(ev.Explanation.Steps, steps...)
	}
	if !ev.Suppressed && ev.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
		resolveNotified(d, st, ev, firstOp)
	}
	return true
}

// refreshAlerts is what a repeat within the reissue window still does: its
// rules' create_alert actions refresh the active alert (count, last seen),
// but open none and notify nobody.
func refreshAlerts(d *Decision, r eventrules.Rule, ev *Event) []*unyov1.ExplanationStep {
	var steps []*unyov1.ExplanationStep
	for _, a := range r.Actions {
		if a.CreateAlert == nil {
			continue
		}
		key, err := a.CreateAlert.Key(ev.Event)
		if err != nil {
			continue
		}
		summary, err := a.CreateAlert.Summary(ev.Event)
		if err != nil {
			summary = ev.GetOutput()
		}
		s := Step("action", r.Name, "", ev.At)
		steps = append(steps, s)
		d.Alerts = append(d.Alerts, AlertOp{Step: s, Op: alerts.Op{
			Kind: alerts.OpFire, Key: key, Rule: r.Name, At: ev.Now, RefreshOnly: true,
			Level: a.CreateAlert.Level(ev.Event), Summary: summary, Event: ev.Event,
		}})
	}
	return steps
}

// runActions decides rule r's actions for subject (an event, or a group's
// representative) and returns their explanation steps; an alert
// operation's step gets its outcome when the store applies it. idem makes
// the outbox jobs' keys. ev is the event when subject is one (its
// notifications follow its node/check's changes), nil for a group's flush
// (which notifies once per group).
func runActions(d *Decision, st *State, r eventrules.Rule, subject *unyov1.Event, members []*unyov1.Event, idem string, now time.Time, ev *Event) []*unyov1.ExplanationStep {
	at := EventTime(subject)
	var steps []*unyov1.ExplanationStep
	var ops []int // this rule's alert operations
	firstJob := len(d.Actions)
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
		case a.APIHook != nil || a.Plugin != nil:
			job := ActionJob{Key: jobKey(r.Name, idem, i), Rule: r.Name, EventID: subject.GetId(), Events: members, Status: status(subject), Cluster: st.Cluster}
			if ev != nil && a.RepeatInterval() != eventrules.EveryResult {
				send, why := notify(d, st, HookID{Rule: r.Name, Action: i}, a.RepeatInterval(), ev, &job)
				if !send {
					steps = append(steps, Step("action", r.Name, kind(a)+": not sent to "+target(a)+": "+why, at))
					continue
				}
			}
			steps = append(steps, Step("action", r.Name, kind(a)+": queued for "+target(a)+" ("+job.Status+")", at))
			d.Actions = append(d.Actions, withAction(job, a))
		}
	}
	// The body carries the alert the rule's alert actions leave, whichever
	// of its actions comes first.
	for j := firstJob; j < len(d.Actions); j++ {
		d.Actions[j].AlertOps = ops
	}
	return steps
}

// notify decides whether hook sends a notification about ev, records what
// it sends, and fills job's Since and Level; why says why not.
//
// An action with repeat_interval 0 (EveryResult) is not asked: it runs
// for every event. A firing event is sent when the hook has not notified its node/check
// firing, when the level changed, or when repeat has passed since the last
// notification (in processing time, so results replayed after an outage do
// not page again). A success event is sent once: when the hook had
// notified the node/check firing, or when the event is a recovery (the
// previous processed event of the node/check was not a success).
func notify(d *Decision, st *State, hook HookID, repeat time.Duration, ev *Event, job *ActionJob) (send bool, why string) {
	nc := NodeCheck{Node: ev.GetNode(), Check: ev.GetCheck()}
	last, have := st.notified(d, nc, hook)
	if ev.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
		if !have && !ev.Recovered {
			return false, "no change: the check was not firing"
		}
		if have {
			job.Since, job.Level = last.Since, last.Level
			d.setNotified(nc, hook, nil)
		}
		return true, ""
	}
	next := Notified{Level: ev.GetLevel(), Since: ev.At, SentAt: ev.Now}
	if have {
		next.Since = last.Since
		if last.Level == ev.GetLevel() && ev.Now.Sub(last.SentAt) < repeat {
			return false, fmt.Sprintf("no change: %s was notified at %s; repeated every %s while it lasts",
				last.Level.Name(), last.SentAt.UTC().Format(time.RFC3339), repeat)
		}
		// The level notified before, so that a push can resolve the
		// previous severity's alert.
		job.Level = last.Level
	}
	job.Since = next.Since
	d.setNotified(nc, hook, &next)
	return true, ""
}

// resolveNotified sends the resolved notification of every hook that
// notified ev's node/check firing and whose rule did not match the
// recovery itself (a rule matching only critical results still tells its
// receiver that the problem is over, once). The body carries the alert of
// the hook's own rule (its create_alert key) that the event's rules
// resolved, if any (operations from firstOp), so that it shows what the
// firing notifications showed.
func resolveNotified(d *Decision, st *State, ev *Event, firstOp int) {
	nc := NodeCheck{Node: ev.GetNode(), Check: ev.GetCheck()}
	for _, h := range st.firingHooks(d, nc) {
		last, _ := st.notified(d, nc, h)
		d.setNotified(nc, h, nil)
		r, ok := st.Rules.Named(h.Rule)
		if !ok || h.Action >= len(r.Actions) || r.Actions[h.Action].RepeatInterval() <= 0 {
			continue // the rule or its action is gone: nobody to tell
		}
		a := r.Actions[h.Action]
		job := ActionJob{
			Key: jobKey(r.Name, ev.GetId(), h.Action), Rule: r.Name, EventID: ev.GetId(), Events: []*unyov1.Event{ev.Event},
			Status: apihook.StatusResolved, Cluster: st.Cluster, Since: last.Since, Level: last.Level, AlertOps: ownAlertOps(d, r, ev, firstOp),
		}
		d.Actions = append(d.Actions, withAction(job, a))
		ev.step("action", r.Name, fmt.Sprintf("%s: queued for %s (resolved; %s was notified at %s)", kind(a), target(a), last.Level.Name(), last.SentAt.UTC().Format(time.RFC3339)))
	}
}

// ownAlertOps are the alert operations from firstOp on the keys rule r's
// create_alert actions give ev.
func ownAlertOps(d *Decision, r eventrules.Rule, ev *Event, firstOp int) []int {
	keys := map[string]bool{}
	for _, a := range r.Actions {
		if a.CreateAlert != nil {
			if k, err := a.CreateAlert.Key(ev.Event); err == nil {
				keys[k] = true
			}
		}
	}
	var ops []int
	for i := firstOp; i < len(d.Alerts); i++ {
		if keys[d.Alerts[i].Key] {
			ops = append(ops, i)
		}
	}
	return ops
}

// status is a payload's status for subject.
func status(subject *unyov1.Event) string {
	if subject.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
		return apihook.StatusResolved
	}
	return apihook.StatusFiring
}

// withAction sets job's hook or plugin from a.
func withAction(job ActionJob, a eventrules.Action) ActionJob {
	if h := a.APIHook; h != nil {
		job.Hook = &unyov1.ApiHookAction{Url: h.URL, Format: h.Format, Timeout: h.Timeout.String(), Retries: int32(h.Retries), Headers: h.Headers}
		if h.Format == eventrules.FormatAlertmanagerPush && h.RepeatInterval > 0 {
			// The body's endsAt is a few of these after the check ran.
			job.Hook.RepeatInterval = h.RepeatInterval.String()
		}
	} else {
		job.Plugin = a.Plugin.Config
	}
	return job
}

// kind and target name a notifying action in explanations.
func kind(a eventrules.Action) string {
	if a.APIHook != nil {
		return "api_hook"
	}
	return "plugin"
}

func target(a eventrules.Action) string {
	if a.APIHook != nil {
		return apihook.Redact(a.APIHook.URL)
	}
	return "action/" + a.Plugin.Name
}

// jobKey is an outbox job's idempotency key: rule, event or group, and the
// action's place in the rule.
func jobKey(rule, idem string, i int) string { return fmt.Sprintf("%s/%s/%d", rule, idem, i) }
