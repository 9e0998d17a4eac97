package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/apihook"
	"github.com/unyo-ops/unyo/maintenance"
)

// pipelineBatch bounds the events one commit processes.
const pipelineBatch = 1000

// pipeline runs stored events through occurrences, the reissue window,
// silences and maintenance, aggregation and action rules, on the replica
// holding the controller lease. Its state lives in memory while it runs and
// is written with the cursor in one transaction per batch, so a replica
// taking over resumes exactly where the last commit left off: no event is
// processed twice and none is skipped.
type pipeline struct {
	c     *Cluster
	state *store.PipelineState
	// groups are the open aggregate windows by rule and key.
	groups map[string]*unyov1.AggregateGroup

	rulesRev int64
	rules    *eventrules.Set
	byName   map[string]eventrules.Rule
	maint    maintenance.Set
}

func groupID(rule, key string) string { return rule + "\x00" + key }

// runPipeline processes events until ctx ends or the lease is lost.
func (c *Cluster) runPipeline(ctx context.Context) {
	for ctx.Err() == nil {
		p := &pipeline{c: c}
		err := p.run(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrConflict) {
			c.log.Warn("another replica processed events; stopping the pipeline here", "err", err)
			return
		}
		// Any other failure (the database went away): start over from the
		// committed state, so nothing half-applied in memory survives.
		c.log.Warn("event pipeline failed; restarting from the last commit", "err", err)
		if !ctxwait.Sleep(ctx, time.Second) {
			return
		}
	}
}

func (p *pipeline) run(ctx context.Context) error {
	st, err := p.c.store.LoadPipeline(ctx)
	if err != nil {
		return fmt.Errorf("load pipeline state: %w", err)
	}
	p.state = st
	p.groups = map[string]*unyov1.AggregateGroup{}
	for _, g := range st.Groups {
		p.groups[groupID(g.GetRule(), g.GetKey())] = g
	}
	p.c.log.Info("event pipeline running", "cursor", st.Cursor, "open_groups", len(p.groups))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := p.loadRules(ctx); err != nil {
			return err
		}
		if err := p.flushGroups(ctx, time.Now()); err != nil {
			return err
		}
		events, err := p.c.store.NextEvents(ctx, p.state.Cursor, pipelineBatch)
		if err != nil {
			return fmt.Errorf("read events after %d: %w", p.state.Cursor, err)
		}
		if len(events) > 0 {
			if err := p.process(ctx, events); err != nil {
				return err
			}
			if len(events) == pipelineBatch {
				continue // more are waiting
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.ingested:
		case <-tick.C:
		}
	}
}

// loadRules rereads rules and maintenance when their revision moved. It
// looks before every batch, so an event stored after a rule was applied is
// judged by it.
func (p *pipeline) loadRules(ctx context.Context) error {
	rev, err := p.c.store.RulesRevision(ctx)
	if err != nil {
		return fmt.Errorf("read rules revision: %w", err)
	}
	if p.rules != nil && rev == p.rulesRev {
		return nil
	}
	rs, err := p.c.store.ListEventRules(ctx)
	if err != nil {
		return fmt.Errorf("list event rules: %w", err)
	}
	var compiled []eventrules.Rule
	byName := map[string]eventrules.Rule{}
	for _, r := range rs {
		cr, err := eventrules.Compile(r)
		if err != nil {
			p.c.log.Warn("stored event rule is no longer valid; ignored", "rule", r.GetName(), "err", err)
			continue
		}
		compiled = append(compiled, cr)
		byName[cr.Name] = cr
	}
	ms, err := p.c.store.ListMaintenance(ctx)
	if err != nil {
		return fmt.Errorf("list maintenance: %w", err)
	}
	var windows []maintenance.Window
	for _, m := range ms {
		w, err := maintenance.Compile(m, time.Now())
		if err != nil {
			p.c.log.Warn("stored maintenance is no longer valid; ignored", "maintenance", m.GetName(), "err", err)
			continue
		}
		windows = append(windows, w)
	}
	p.rules, p.byName, p.maint, p.rulesRev = eventrules.NewSet(compiled), byName, maintenance.NewSet(windows...), rev
	p.c.log.Info("event rules loaded", "rules", len(compiled), "maintenance", len(windows), "revision", rev)
	return nil
}

// commit is one batch's changes being collected.
type commit struct {
	store.PipelineCommit
	now time.Time
}

func newCommit(cursor int64, now time.Time) *commit {
	return &commit{now: now, PipelineCommit: store.PipelineCommit{
		ExpectCursor: cursor, Cursor: cursor,
		Counters:    map[store.NodeCheck]store.Counter{},
		Issued:      map[store.NodeCheck]store.Issued{},
		RuleMatches: map[string]int64{}, MaintenanceSilenced: map[string]int64{},
	}}
}

func (p *pipeline) process(ctx context.Context, events []store.SeqEvent) error {
	cm := newCommit(p.state.Cursor, time.Now())
	for _, se := range events {
		ex := p.decide(cm, se.Event)
		ex.ProcessedAt = timestamppb.New(cm.now)
		cm.Explained = append(cm.Explained, store.Explained{ID: se.Event.GetId(), Explanation: ex, SilencedBy: se.Event.GetSilencedBy()})
		cm.Cursor = se.Seq
	}
	if err := p.c.store.CommitPipeline(ctx, &cm.PipelineCommit); err != nil {
		return fmt.Errorf("commit %d processed events: %w", len(events), err)
	}
	p.c.recordHistory(ctx, events, cm.Explained)
	p.state.Cursor = cm.Cursor
	for k, v := range cm.Counters {
		p.state.Counters[k] = v
	}
	for k, v := range cm.Issued {
		p.state.Issued[k] = v
	}
	return nil
}

// eventTime is when an event happened; occurrences, reissue windows, rule
// expiry and maintenance are judged in event time, so that results replayed
// after an outage are treated as they would have been on time.
func eventTime(e *unyov1.Event) time.Time {
	if e.GetStartedAt() != nil {
		return e.GetStartedAt().AsTime()
	}
	return e.GetReceivedAt().AsTime()
}

func step(stage, rule, outcome string, at time.Time) *unyov1.ExplanationStep {
	return &unyov1.ExplanationStep{Stage: stage, Rule: rule, Outcome: outcome, At: timestamppb.New(at)}
}

func levelName(l unyov1.Level) string {
	return strings.ToLower(strings.TrimPrefix(l.String(), "LEVEL_"))
}

// decide runs one event through the stages and records its explanation.
func (p *pipeline) decide(cm *commit, e *unyov1.Event) *unyov1.Explanation {
	at := eventTime(e)
	ex := &unyov1.Explanation{}
	add := func(s *unyov1.ExplanationStep) { ex.Steps = append(ex.Steps, s) }

	nc := store.NodeCheck{Node: e.GetNode(), Check: e.GetCheck()}
	prev, ok := cm.Counters[nc]
	if !ok {
		prev = p.state.Counters[nc]
	}
	next, raise := eventrules.Occur(eventrules.Counter{Level: prev.Level, Count: prev.Count}, e)
	cm.Counters[nc] = store.Counter{Level: next.Level, Count: next.Count}
	if !raise {
		ex.Outcome = "pending"
		add(step("occurrences", "", fmt.Sprintf("%d of %d consecutive %s results; no event raised yet", next.Count, max(1, e.GetOccurrences()), levelName(e.GetLevel())), at))
		return ex
	}

	last, have := cm.Issued[nc]
	if !have {
		last, have = p.state.Issued[nc]
	}
	if !eventrules.Reissue(eventrules.Issued{Level: last.Level, At: last.At}, have, e, at) {
		ex.Outcome = "suppressed"
		add(step("reissue", "", fmt.Sprintf("the same %s event was processed at %s, within its reissue window of %s", levelName(e.GetLevel()), last.At.UTC().Format(time.RFC3339), e.GetReissue().AsDuration()), at))
		return ex
	}
	cm.Issued[nc] = store.Issued{Level: e.GetLevel(), At: at}

	if r, ok := p.rules.Silence(e, at); ok {
		cm.RuleMatches[r.Name]++
		e.SilencedBy = "rule:" + r.Name
		ex.Outcome = "silenced"
		add(step("silence", r.Name, "silenced: no action runs ("+r.Reason+", owner "+r.Owner+")", at))
		return ex
	}
	if name, ok := p.maint.Silencing(e, at); ok {
		cm.MaintenanceSilenced[name]++
		e.SilencedBy = "maintenance:" + name
		ex.Outcome = "silenced"
		add(step("maintenance", name, "silenced by maintenance "+name+": no action runs", at))
		return ex
	}

	if r, ok := p.rules.Aggregate(e, at); ok {
		cm.RuleMatches[r.Name]++
		key := eventrules.GroupKey(r, e)
		id := groupID(r.Name, key)
		g := p.groups[id]
		if g == nil {
			g = &unyov1.AggregateGroup{Rule: r.Name, Key: key, OpenedAt: timestamppb.New(cm.now), FlushAt: timestamppb.New(cm.now.Add(r.Wait))}
			p.groups[id] = g
		}
		member := proto.Clone(e).(*unyov1.Event)
		member.Explanation = nil
		g.Members = append(g.Members, member)
		cm.PutGroups = append(cm.PutGroups, g)
		ex.Outcome = "grouped"
		add(step("aggregate", r.Name, fmt.Sprintf("grouped as %q with %d other event(s); the rule's actions run once for the group at %s", key, len(g.Members)-1, g.GetFlushAt().AsTime().UTC().Format(time.RFC3339)), at))
		return ex
	}

	matched := p.rules.Actions(e, at)
	if len(matched) == 0 {
		ex.Outcome = "processed"
		add(step("action", "", "no action rule matched", at))
		return ex
	}
	ex.Outcome = "processed"
	for _, r := range matched {
		cm.RuleMatches[r.Name]++
		for _, s := range p.runActions(cm, r, e, []*unyov1.Event{e}, e.GetId()) {
			add(s)
		}
	}
	return ex
}

// runActions queues rule r's actions for subject (an event, or a group's
// representative) and returns the explanation steps, whose outcomes the
// commit completes as the alert operations apply.
func (p *pipeline) runActions(cm *commit, r eventrules.Rule, subject *unyov1.Event, members []*unyov1.Event, idem string) []*unyov1.ExplanationStep {
	at := eventTime(subject)
	var steps []*unyov1.ExplanationStep
	// The alert this rule created or resolved, for its hooks' payloads.
	var touched *unyov1.Alert
	for i, a := range r.Actions {
		switch {
		case a.CreateAlert != nil:
			s := step("action", r.Name, "", at)
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
			level := a.CreateAlert.Level(subject)
			rule := r.Name
			cm.AlertOps = append(cm.AlertOps, store.AlertOp{Key: key, Apply: func(cur *unyov1.Alert) (*unyov1.Alert, error) {
				if cur == nil {
					touched = alerts.New(key, level, summary, subject, rule, cm.now)
					s.Outcome = fmt.Sprintf("create_alert: opened alert %s (%s, key %q)", touched.GetId(), alerts.LevelName(level), key)
					return touched, nil
				}
				reopened, err := alerts.Fire(cur, level, summary, subject, rule, cm.now)
				if err != nil {
					return nil, err
				}
				touched = cur
				verb := "refreshed"
				if reopened {
					verb = "reopened"
				}
				s.Outcome = fmt.Sprintf("create_alert: %s alert %s (count %d, key %q)", verb, cur.GetId(), cur.GetCount(), key)
				return cur, nil
			}})
		case a.DeleteAlert != nil:
			s := step("action", r.Name, "", at)
			steps = append(steps, s)
			key, err := a.DeleteAlert.Key(subject)
			if err != nil {
				s.Outcome = "delete_alert failed: " + err.Error()
				continue
			}
			closeToo, by := a.DeleteAlert.Close, "rule:"+r.Name
			reason := "condition cleared: " + subject.GetOutput()
			cm.AlertOps = append(cm.AlertOps, store.AlertOp{Key: key, Apply: func(cur *unyov1.Alert) (*unyov1.Alert, error) {
				if cur == nil {
					s.Outcome = fmt.Sprintf("delete_alert: no active alert with key %q", key)
					return nil, nil
				}
				if err := alerts.Resolve(cur, by, reason, cm.now); err != nil {
					s.Outcome = "delete_alert: " + err.Error()
					return nil, nil
				}
				s.Outcome = fmt.Sprintf("delete_alert: resolved alert %s", cur.GetId())
				if closeToo {
					if err := alerts.Close(cur, by, reason, cm.now); err == nil {
						s.Outcome = fmt.Sprintf("delete_alert: resolved and closed alert %s", cur.GetId())
					}
				}
				touched = cur
				return cur, nil
			}})
		case a.APIHook != nil:
			s := step("action", r.Name, "api_hook: queued for "+apihook.Redact(a.APIHook.URL), at)
			steps = append(steps, s)
			cfg := hookConfig(*a.APIHook)
			jobKey := fmt.Sprintf("%s/%s/%d", r.Name, idem, i)
			status := "firing"
			if subject.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
				status = "resolved"
			}
			cm.Hooks = append(cm.Hooks, store.HookJob{
				Key: jobKey, Rule: r.Name, EventID: subject.GetId(), Hook: hookProto(cfg),
				Body: func() ([]byte, error) {
					return apihook.Body(cfg, apihook.Payload{Key: jobKey, Rule: r.Name, Cluster: p.c.opts.Name, Events: members, Alert: touched, Status: status})
				},
			})
		case a.Plugin != nil:
			s := step("action", r.Name, "plugin: queued for action/"+a.Plugin.Name, at)
			steps = append(steps, s)
			jobKey := fmt.Sprintf("%s/%s/%d", r.Name, idem, i)
			status := "firing"
			if subject.GetLevel() == unyov1.Level_LEVEL_SUCCESS {
				status = "resolved"
			}
			cm.Hooks = append(cm.Hooks, store.HookJob{
				Key: jobKey, Rule: r.Name, EventID: subject.GetId(), Plugin: a.Plugin.Config,
				// The payload is the unyo api_hook body: the event(s) and
				// the alert the rule's earlier actions produced.
				Body: func() ([]byte, error) {
					return apihook.Body(apihook.Config{Format: eventrules.FormatUnyo}, apihook.Payload{Key: jobKey, Rule: r.Name, Cluster: p.c.opts.Name, Events: members, Alert: touched, Status: status})
				},
			})
		}
	}
	return steps
}

// flushGroups runs the actions of aggregate groups whose window has ended,
// once per group, naming every member.
func (p *pipeline) flushGroups(ctx context.Context, now time.Time) error {
	var due []*unyov1.AggregateGroup
	for _, g := range p.groups {
		if !g.GetFlushAt().AsTime().After(now) {
			due = append(due, g)
		}
	}
	if len(due) == 0 {
		return nil
	}
	sort.Slice(due, func(i, j int) bool { return due[i].GetFlushAt().AsTime().Before(due[j].GetFlushAt().AsTime()) })
	cm := newCommit(p.state.Cursor, now)
	for _, g := range due {
		r, ok := p.byName[g.GetRule()]
		names := make([]string, len(g.GetMembers()))
		for i, m := range g.GetMembers() {
			names[i] = m.GetNode() + "/" + m.GetCheck()
		}
		var steps []*unyov1.ExplanationStep
		if !ok {
			steps = []*unyov1.ExplanationStep{step("aggregate", g.GetRule(), "the rule was deleted before its window ended; no action ran", now)}
		} else {
			subject := representative(g)
			steps = append([]*unyov1.ExplanationStep{step("aggregate", r.Name, fmt.Sprintf("window ended: actions ran once for %d events: %s", len(names), strings.Join(names, ", ")), now)},
				p.runActions(cm, r, subject, g.GetMembers(), "group:"+g.GetKey()+":"+g.GetOpenedAt().AsTime().Format(time.RFC3339Nano))...)
		}
		for _, m := range g.GetMembers() {
			cm.Explained = append(cm.Explained, store.Explained{ID: m.GetId(), Explanation: &unyov1.Explanation{
				Outcome: "grouped", Steps: steps, ProcessedAt: timestamppb.New(now),
			}, Append: true})
		}
		cm.DeleteGroups = append(cm.DeleteGroups, g)
	}
	if err := p.c.store.CommitPipeline(ctx, &cm.PipelineCommit); err != nil {
		return fmt.Errorf("commit %d aggregate groups: %w", len(due), err)
	}
	for _, g := range due {
		delete(p.groups, groupID(g.GetRule(), g.GetKey()))
	}
	return nil
}

// representative stands for a whole group in templates and alerts: node
// and check when every member shares them, the highest level, and a summary
// naming the members.
func representative(g *unyov1.AggregateGroup) *unyov1.Event {
	ms := g.GetMembers()
	r := &unyov1.Event{Id: "group:" + g.GetKey(), Cluster: ms[0].GetCluster(), Node: ms[0].GetNode(), Check: ms[0].GetCheck(), StartedAt: ms[0].GetStartedAt(), Labels: ms[0].GetLabels()}
	var outs []string
	for _, m := range ms {
		if m.GetNode() != r.Node {
			r.Node = ""
		}
		if m.GetCheck() != r.Check {
			r.Check = ""
		}
		if m.GetLevel() > r.Level {
			r.Level = m.GetLevel()
			r.Status = m.GetStatus()
		}
		outs = append(outs, m.GetNode()+"/"+m.GetCheck()+": "+m.GetOutput())
	}
	r.Output = fmt.Sprintf("%d events: %s", len(ms), strings.Join(outs, "; "))
	if len(r.Output) > 1024 {
		r.Output = r.Output[:1021] + "..."
	}
	return r
}

// hookConfig is the delivery configuration of a compiled ApiHook action.
func hookConfig(h eventrules.APIHook) apihook.Config {
	return apihook.Config{URL: h.URL, Format: h.Format, Timeout: h.Timeout, Retries: h.Retries, Headers: h.Headers}
}

// hookProto keeps a hook's configuration in the outbox.
func hookProto(c apihook.Config) *unyov1.ApiHookAction {
	return &unyov1.ApiHookAction{Url: c.URL, Format: c.Format, Timeout: c.Timeout.String(), Retries: int32(c.Retries), Headers: c.Headers}
}
