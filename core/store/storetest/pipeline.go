package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// pipelineTests check how a store applies a pipeline Decision: with the
// cursor in one transaction, every alert operation through alerts.Apply
// with its outcome in the explanation step, and action bodies built from
// the alerts the commit produced.
func pipelineTests() []contractTest {
	step := func() *unyov1.ExplanationStep { return &unyov1.ExplanationStep{Stage: "action", Rule: "page"} }
	fire := func(e *unyov1.Event, s *unyov1.ExplanationStep) pipeline.AlertOp {
		return pipeline.AlertOp{Step: s, Op: alerts.Op{Kind: alerts.OpFire, Key: "web1/disk", Rule: "page", At: at(100).AsTime(), Event: e}}
	}
	return []contractTest{
		{"DecisionApply", func(t *testing.T, s store.Store) {
			e1, e2 := event("d-1", "web1", "disk", critical, 1), event("d-2", "web1", "disk", critical, 2)
			appendEvents(t, s, 2, e1, e2)
			next, err := s.NextEvents(ctx(t), 0, 10)
			must(t, err)
			s1, s2, s3 := step(), step(), step()
			nc := pipeline.NodeCheck{Node: "web1", Check: "disk"}
			group := &unyov1.AggregateGroup{Rule: "agg", Key: "check=disk", OpenedAt: at(1), FlushAt: at(301), Members: []*unyov1.Event{e1}}
			d := pipeline.NewDecision()
			d.Counters[nc] = eventrules.Counter{Level: critical, Count: 2}
			d.Issued[nc] = eventrules.Issued{Level: critical, At: at(2).AsTime()}
			d.PutGroups = []*unyov1.AggregateGroup{group}
			d.Alerts = []pipeline.AlertOp{
				fire(e1, s1),
				{Step: s2, Op: alerts.Op{Kind: alerts.OpResolve, Key: "web1/disk", Rule: "page", At: at(101).AsTime(), Close: true}},
				fire(e2, s3),
			}
			d.Actions = []pipeline.ActionJob{
				{Key: "page/d-1/1", Rule: "page", EventID: "d-1", Hook: &unyov1.ApiHookAction{Url: "http://x"}, Events: []*unyov1.Event{e1}, Status: "firing", AlertOps: []int{0}},
				{Key: "page/d-2/1", Rule: "page", EventID: "d-2", Hook: &unyov1.ApiHookAction{Url: "http://x"}, Events: []*unyov1.Event{e2}, Status: "firing", AlertOps: []int{2}},
			}
			d.Explained = []pipeline.Explained{
				{ID: "d-1", Explanation: &unyov1.Explanation{Outcome: "processed", Steps: []*unyov1.ExplanationStep{s1, s2}}},
				{ID: "d-2", Explanation: &unyov1.Explanation{Outcome: "processed", Steps: []*unyov1.ExplanationStep{s3}}},
			}
			d.RuleMatches["page"] = 2
			// A stale cursor applies nothing.
			if err := s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: 7, Cursor: next[1].Seq, Decision: *d}); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("commit from a stale cursor: %v, want ErrConflict", err)
			}
			if as, err := s.ListAlerts(ctx(t), store.AlertFilter{States: []unyov1.AlertState{1, 2, 3, 4}}); err != nil || len(as) != 0 {
				t.Fatalf("after a refused commit: %d alerts, %v", len(as), err)
			}
			for _, st := range []*unyov1.ExplanationStep{s1, s2, s3} {
				st.Outcome = ""
			}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: 0, Cursor: next[1].Seq, Decision: *d}))

			// Opened, closed, and a new alert opened for the freed key.
			if !strings.HasPrefix(s1.Outcome, "create_alert: opened alert ") || !strings.HasPrefix(s2.Outcome, "delete_alert: resolved and closed alert ") || !strings.HasPrefix(s3.Outcome, "create_alert: opened alert ") {
				t.Fatalf("outcomes: %q, %q, %q", s1.Outcome, s2.Outcome, s3.Outcome)
			}
			active, err := s.ListAlerts(ctx(t), store.AlertFilter{})
			must(t, err)
			closed, err := s.ListAlerts(ctx(t), store.AlertFilter{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_CLOSED}})
			must(t, err)
			if len(active) != 1 || len(closed) != 1 || active[0].GetLastEventId() != "d-2" || closed[0].GetLastEventId() != "d-1" {
				t.Fatalf("active %v, closed %v", active, closed)
			}
			if !strings.Contains(s1.Outcome, closed[0].GetId()) || !strings.Contains(s3.Outcome, active[0].GetId()) {
				t.Errorf("outcomes %q and %q do not name alerts %s and %s", s1.Outcome, s3.Outcome, closed[0].GetId(), active[0].GetId())
			}
			// Each body carries the alert as its operation left it: the
			// first one still open.
			jobs, err := s.DueActions(ctx(t), 10)
			must(t, err)
			if len(jobs) != 2 {
				t.Fatalf("%d jobs queued, want 2", len(jobs))
			}
			for _, j := range jobs {
				wantID, body := active[0].GetId(), string(j.Body)
				if j.EventID == "d-1" {
					wantID = closed[0].GetId()
				}
				if !strings.Contains(body, wantID) || !strings.Contains(body, `"key":"`+j.Key+`"`) || strings.Contains(body, "CLOSED") {
					t.Errorf("job %s: body %s, want alert %s as opened", j.Key, body, wantID)
				}
			}
			// Explanations carry the outcomes.
			got, err := s.GetEvent(ctx(t), "d-1")
			must(t, err)
			if steps := got.GetExplanation().GetSteps(); len(steps) != 2 || steps[1].GetOutcome() != s2.Outcome {
				t.Errorf("stored explanation of d-1: %v", got.GetExplanation())
			}
			// The state a replica taking over loads.
			st, err := s.LoadPipeline(ctx(t))
			must(t, err)
			if st.Cursor != next[1].Seq || st.Counters[nc] != d.Counters[nc] || !st.Issued[nc].At.Equal(d.Issued[nc].At) || len(st.Groups) != 1 || len(st.Groups[0].GetMembers()) != 1 {
				t.Errorf("loaded state %+v", st)
			}
			// Replaying a delivered job's key queues nothing new.
			must(t, s.FinishAction(ctx(t), "page/d-1/1", nil))
			again := pipeline.NewDecision()
			again.Actions = d.Actions[1:]
			again.DeleteGroups = []*unyov1.AggregateGroup{group}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: next[1].Seq, Cursor: next[1].Seq, Decision: *again}))
			if jobs, err := s.DueActions(ctx(t), 10); err != nil || len(jobs) != 1 {
				t.Errorf("after replaying a queued key: %d jobs, %v", len(jobs), err)
			}
			if st, err := s.LoadPipeline(ctx(t)); err != nil || len(st.Groups) != 0 {
				t.Errorf("groups after deleting: %v, %v", st.Groups, err)
			}
		}},
		{"ExplanationReplaced", func(t *testing.T, s store.Store) {
			// A commit explaining events already explained (one applied
			// again) replaces their explanations, beside one new.
			for _, id := range []string{"x-1", "x-2", "x-3"} {
				appendEvents(t, s, 1, event(id, "web1", id, critical, 1))
			}
			next, err := s.NextEvents(ctx(t), 0, 10)
			must(t, err)
			explain := func(outcome string, ids ...string) *pipeline.Decision {
				d := pipeline.NewDecision()
				for _, id := range ids {
					d.Explained = append(d.Explained, pipeline.Explained{ID: id, Explanation: &unyov1.Explanation{Outcome: outcome + " " + id}})
				}
				return d
			}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Cursor: next[0].Seq, Decision: *explain("first", "x-1", "x-2")}))
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: next[0].Seq, Cursor: next[2].Seq, Decision: *explain("second", "x-2", "x-3")}))
			for id, want := range map[string]string{"x-1": "first x-1", "x-2": "second x-2", "x-3": "second x-3"} {
				got, err := s.GetEvent(ctx(t), id)
				must(t, err)
				if got.GetExplanation().GetOutcome() != want {
					t.Errorf("explanation of %s: %q, want %q", id, got.GetExplanation().GetOutcome(), want)
				}
			}
		}},
		{"AlertKeysAndMatchCounts", func(t *testing.T, s store.Store) {
			// One commit fires alerts on keys with characters that quoting
			// could mangle (the active alerts are read by a list of keys
			// passed as one value); the next finds each active alert by
			// its key and resolves it. Matches are counted for the rules
			// that exist, in the same commits.
			_, err := s.PutObjects(ctx(t), []*unyov1.Object{{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{Name: "page"}}}})
			must(t, err)
			e := event("k-1", "web1", "disk", critical, 1)
			appendEvents(t, s, 1, e)
			next, err := s.NextEvents(ctx(t), 0, 10)
			must(t, err)
			keys := make([]string, 700)
			for i := range keys {
				keys[i] = fmt.Sprintf(`web%d/disk "quoted" \ ünïcødé 🔥 [%d]`, i, i)
			}
			commit := func(expect, cursor int64, kind alerts.OpKind) {
				t.Helper()
				d := pipeline.NewDecision()
				for _, k := range keys {
					d.Alerts = append(d.Alerts, pipeline.AlertOp{Op: alerts.Op{Kind: kind, Key: k, Rule: "page", At: at(100).AsTime(), Event: e, Close: true}})
				}
				d.RuleMatches["page"], d.RuleMatches["gone"] = 2, 5
				must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: expect, Cursor: cursor, Decision: *d}))
			}
			commit(0, next[0].Seq, alerts.OpFire)
			active, err := s.ListAlerts(ctx(t), store.AlertFilter{Limit: 1000})
			must(t, err)
			got := map[string]bool{}
			for _, a := range active {
				got[a.GetKey()] = true
			}
			for _, k := range keys {
				if !got[k] {
					t.Fatalf("no active alert for key %q (%d active)", k, len(active))
				}
			}
			commit(next[0].Seq, next[0].Seq, alerts.OpResolve)
			if active, err := s.ListAlerts(ctx(t), store.AlertFilter{Limit: 1000}); err != nil || len(active) != 0 {
				t.Fatalf("after resolving every key: %d alerts active, %v", len(active), err)
			}
			closed, err := s.ListAlerts(ctx(t), store.AlertFilter{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_CLOSED}, Limit: 1000})
			must(t, err)
			if len(closed) != len(keys) {
				t.Errorf("%d alerts closed, want %d (one per key)", len(closed), len(keys))
			}
			counts, err := s.ObjectCounts(ctx(t), "EventRule")
			must(t, err)
			if counts["page"] != 4 || len(counts) != 1 {
				t.Errorf("ObjectCounts(EventRule) = %v, want page=4 and nothing for a rule that does not exist", counts)
			}
		}},
		{"NotificationRecords", func(t *testing.T, s store.Store) {
			// What notifying actions sent survives a commit and a reload, and
			// a nil record removes it.
			web1, web2 := pipeline.NodeCheck{Node: "web1", Check: "disk"}, pipeline.NodeCheck{Node: "web2", Check: "disk"}
			page, chat := pipeline.HookID{Rule: "page", Action: 1}, pipeline.HookID{Rule: "chat", Action: 0}
			n1 := pipeline.Notified{Level: critical, Since: at(1).AsTime(), SentAt: at(5).AsTime()}
			d := pipeline.NewDecision()
			d.Notified[web1] = map[pipeline.HookID]*pipeline.Notified{page: &n1, chat: &n1}
			d.Notified[web2] = map[pipeline.HookID]*pipeline.Notified{page: &n1}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Decision: *d}))
			n2 := pipeline.Notified{Level: warning, Since: at(1).AsTime(), SentAt: at(9).AsTime()}
			d = pipeline.NewDecision()
			d.Notified[web1] = map[pipeline.HookID]*pipeline.Notified{page: &n2, chat: nil}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Decision: *d}))
			st, err := s.LoadPipeline(ctx(t))
			must(t, err)
			got := st.Notified
			if len(got) != 2 || len(got[web1]) != 1 || len(got[web2]) != 1 {
				t.Fatalf("loaded records %v, want page for web1 and web2", got)
			}
			if r := got[web1][page]; r.Level != warning || !r.Since.Equal(n2.Since) || !r.SentAt.Equal(n2.SentAt) {
				t.Errorf("web1 record %+v, want %+v", r, n2)
			}
			if r := got[web2][page]; r.Level != critical || !r.SentAt.Equal(n1.SentAt) {
				t.Errorf("web2 record %+v, want %+v", r, n1)
			}
		}},
		{"ForgetEvents", func(t *testing.T, s store.Store) {
			// web1/disk and web2/disk critical with open alerts (one
			// acknowledged), web1/load too; disk deleted: its alerts resolve
			// with the reason, its latest events and pipeline state go, its
			// history stays, and load is untouched.
			evs := []*unyov1.Event{
				event("f-1", "web1", "disk", critical, 1), event("f-2", "web2", "disk", critical, 2), event("f-3", "web1", "load", critical, 3),
			}
			appendEvents(t, s, 3, evs...)
			d := pipeline.NewDecision()
			for _, e := range evs {
				nc := pipeline.NodeCheck{Node: e.GetNode(), Check: e.GetCheck()}
				d.Counters[nc] = eventrules.Counter{Level: critical, Count: 1}
				d.Issued[nc] = eventrules.Issued{Level: critical, At: at(5).AsTime()}
				op := fire(e, step())
				op.Key = nc.Node + "/" + nc.Check
				d.Alerts = append(d.Alerts, op)
			}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Decision: *d}))
			web2, err := s.ListAlerts(ctx(t), store.AlertFilter{Node: "web2"})
			must(t, err)
			_, err = s.UpdateAlert(ctx(t), web2[0].GetId(), func(a *unyov1.Alert) error { return alerts.Ack(a, "alice", "", at(6).AsTime()) })
			must(t, err)

			before, err := s.ForgetRevision(ctx(t))
			must(t, err)
			got, err := s.ForgetEvents(ctx(t), store.ForgetFilter{Check: "disk"}, "cluster", `check "disk" deleted`, at(10).AsTime())
			must(t, err)
			if after, err := s.ForgetRevision(ctx(t)); err != nil || after <= before {
				t.Fatalf("forget revision %d before ForgetEvents, %d (%v) after: it must move", before, after, err)
			}
			if len(got) != 2 {
				t.Fatalf("resolved %v, want the two disk alerts", got)
			}
			for _, a := range got {
				h := a.GetHistory()[len(a.GetHistory())-1]
				if a.GetState() != unyov1.AlertState_ALERT_STATE_RESOLVED || a.GetCheck() != "disk" || h.GetBy() != "cluster" || h.GetReason() != `check "disk" deleted` {
					t.Errorf("alert %v, want disk resolved by cluster with the reason", a)
				}
			}
			wantIDs(t, s, store.EventFilter{}, "f-3")
			wantIDs(t, s, store.EventFilter{Check: "disk", History: true}, "f-2 f-1")
			st, err := s.LoadPipeline(ctx(t))
			must(t, err)
			if len(st.Counters) != 1 || len(st.Issued) != 1 {
				t.Errorf("pipeline state after forgetting disk: %+v, want load's only", st)
			}
			if as, err := s.ListAlerts(ctx(t), store.AlertFilter{States: []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN}}); err != nil || len(as) != 1 || as[0].GetCheck() != "load" {
				t.Errorf("open alerts: %v, %v; want load's", as, err)
			}
			// Again: nothing left to resolve. A node: its load goes too.
			if got, err := s.ForgetEvents(ctx(t), store.ForgetFilter{Check: "disk"}, "cluster", "again", at(11).AsTime()); err != nil || len(got) != 0 {
				t.Errorf("forgetting disk again: %v, %v", got, err)
			}
			if got, err := s.ForgetEvents(ctx(t), store.ForgetFilter{Node: "web1"}, "cluster", `node "web1" deleted`, at(12).AsTime()); err != nil || len(got) != 1 || got[0].GetCheck() != "load" {
				t.Errorf("forgetting web1: %v, %v", got, err)
			}
			wantIDs(t, s, store.EventFilter{}, "")
			if _, err := s.ForgetEvents(ctx(t), store.ForgetFilter{}, "cluster", "all", at(13).AsTime()); err == nil {
				t.Error("forgetting with neither node nor check was accepted")
			}
		}},
		{"ManyAlertKeys", func(t *testing.T, s store.Store) {
			// More keys than one query reads at once, each fired twice in
			// one commit: one alert per key, counted twice.
			d := pipeline.NewDecision()
			const keys = 1200
			for round := range 2 {
				for i := range keys {
					e := event("k", "web1", "disk", critical, round)
					e.Id = e.GetId() + string(rune('a'+round)) + strings.Repeat("x", i%3) + time.Duration(i).String()
					op := fire(e, step())
					op.Key = time.Duration(i).String()
					d.Alerts = append(d.Alerts, op)
				}
			}
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{Decision: *d}))
			as, err := s.ListAlerts(ctx(t), store.AlertFilter{Limit: 5000})
			must(t, err)
			if len(as) != keys {
				t.Fatalf("%d alerts, want %d", len(as), keys)
			}
			for _, a := range as {
				if a.GetCount() != 2 {
					t.Fatalf("alert %s: count %d, want 2", a.GetKey(), a.GetCount())
				}
			}
		}},
	}
}
