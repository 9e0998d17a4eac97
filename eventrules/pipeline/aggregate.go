package pipeline

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// Aggregate adds an event matched by an aggregate rule to the rule's open
// group for its GroupKey, opening one whose window ends the rule's wait
// from now. The group's actions run once when the window ends (Flush).
//
// Grouping shapes notifications; it never decides whether an alert
// exists, as in Alertmanager: a grouped event goes on to the action rules
// all the same, so the default rules keep opening and refreshing alerts
// for it.
type Aggregate struct{}

// Process implements Stage.
func (Aggregate) Process(st *State, d *Decision, ev *Event) bool {
	if ev.Suppressed {
		return true // a repeat within the reissue window is no news for a group
	}
	r, ok := st.Rules.Aggregate(ev.Event, ev.At)
	if !ok {
		return true
	}
	d.RuleMatches[r.Name]++
	id := GroupID{Rule: r.Name, Key: eventrules.GroupKey(r, ev.Event)}
	g := st.group(d, id)
	if g == nil {
		g = &unyov1.AggregateGroup{Rule: id.Rule, Key: id.Key, OpenedAt: timestamppb.New(ev.Now), FlushAt: timestamppb.New(ev.Now.Add(r.Wait))}
	}
	member := proto.Clone(ev.Event).(*unyov1.Event)
	member.Explanation = nil
	g.Members = append(g.Members, member)
	d.putGroup(g)
	ev.Explanation.Outcome = "grouped"
	ev.step("aggregate", r.Name, fmt.Sprintf("grouped as %q with %d other event(s); the rule's actions run once for the group at %s; action rules still run",
		id.Key, len(g.Members)-1, g.GetFlushAt().AsTime().UTC().Format(time.RFC3339)))
	return true
}

// Flush runs the actions of the groups whose window has ended by now, once
// per group naming every member, and removes them. Each member's
// explanation gets the flush's steps appended.
func (p *Pipeline) Flush(st *State, now time.Time) *Decision {
	var due []*unyov1.AggregateGroup
	for _, g := range st.Groups {
		if !g.GetFlushAt().AsTime().After(now) {
			due = append(due, g)
		}
	}
	if len(due) == 0 {
		return nil
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i].GetFlushAt().AsTime(), due[j].GetFlushAt().AsTime()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i].GetRule()+"\x00"+due[i].GetKey() < due[j].GetRule()+"\x00"+due[j].GetKey()
	})
	d := NewDecision()
	processed := timestamppb.New(now)
	for _, g := range due {
		names := make([]string, len(g.GetMembers()))
		for i, m := range g.GetMembers() {
			names[i] = m.GetNode() + "/" + m.GetCheck()
		}
		r, ok := st.Rules.Named(g.GetRule())
		var steps []*unyov1.ExplanationStep
		if !ok {
			steps = []*unyov1.ExplanationStep{Step("aggregate", g.GetRule(), "the rule was deleted before its window ended; no action ran", now)}
		} else {
			steps = append([]*unyov1.ExplanationStep{Step("aggregate", r.Name, fmt.Sprintf("window ended: actions ran once for %d events: %s", len(names), strings.Join(names, ", ")), now)},
				runActions(d, st, r, representative(g), g.GetMembers(), "group:"+g.GetKey()+":"+g.GetOpenedAt().AsTime().Format(time.RFC3339Nano), now, nil)...)
		}
		for _, m := range g.GetMembers() {
			d.Explained = append(d.Explained, Explained{ID: m.GetId(), Explanation: &unyov1.Explanation{
				Outcome: "grouped", Steps: steps, ProcessedAt: processed,
			}, Append: true})
		}
		d.DeleteGroups = append(d.DeleteGroups, g)
	}
	return d
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
