package printer

import (
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Alerts prints alerts in the order given (callers sort them by level and
// age): ID, LEVEL, STATE, CLUSTER, NODE, CHECK, COUNT, AGE, LAST SEEN, SUMMARY.
func Alerts(w io.Writer, format string, as []*unyov1.Alert) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "alerts", as, func() table {
		t := table{header: []string{"ID", "LEVEL", "STATE", "CLUSTER", "NODE", "CHECK", "COUNT", "AGE", "LAST SEEN", "SUMMARY"}}
		for _, a := range as {
			t.add(a.GetId(), a.GetLevel().Name(), alertState(a.GetState()), orDash(a.GetCluster()), orDash(a.GetNode()),
				orDash(a.GetCheck()), fmt.Sprint(a.GetCount()), age(p.now(), a.GetFirstSeen()), age(p.now(), a.GetLastSeen()),
				truncate(orDash(firstLine(a.GetSummary())), 60))
		}
		return t
	})
}

// AlertDetails prints alerts one by one with their whole history; JSON and
// YAML as Alerts.
func AlertDetails(w io.Writer, format string, as []*unyov1.Alert) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	if p.format != Table {
		return Alerts(w, format, as)
	}
	for i, a := range as {
		if i > 0 {
			fmt.Fprintln(w)
		}
		kv := [][2]string{
			{"ID", a.GetId()}, {"Key", a.GetKey()}, {"Level", a.GetLevel().Name()}, {"State", alertState(a.GetState())},
			{"Cluster", orDash(a.GetCluster())}, {"Node", orDash(a.GetNode())}, {"Check", orDash(a.GetCheck())},
			{"Summary", orDash(a.GetSummary())}, {"Rule", orDash(a.GetRule())}, {"Count", fmt.Sprint(a.GetCount())},
			{"First seen", stamp(p, a.GetFirstSeen().AsTime())}, {"Last seen", stamp(p, a.GetLastSeen().AsTime())},
			{"Last event", orDash(a.GetLastEventId())},
		}
		if err := writeKV(w, kv); err != nil {
			return err
		}
		t := table{header: []string{"  WHEN", "FROM", "TO", "BY", "REASON"}}
		for _, h := range a.GetHistory() {
			t.add("  "+stamp(p, h.GetAt().AsTime()), alertState(h.GetFrom()), alertState(h.GetTo()), orDash(h.GetBy()), orDash(h.GetReason()))
		}
		fmt.Fprintln(w, "History:")
		if err := p.writeTable(t); err != nil {
			return err
		}
	}
	return nil
}

// EventDetails prints events one by one with what the event pipeline did
// with each: every rule and maintenance that matched and what happened.
func EventDetails(w io.Writer, format string, events []*unyov1.Event) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	if p.format != Table {
		return Events(w, format, events)
	}
	for i, e := range events {
		if i > 0 {
			fmt.Fprintln(w)
		}
		kv := [][2]string{
			{"ID", e.GetId()}, {"Cluster", orDash(e.GetCluster())}, {"Node", e.GetNode()}, {"Check", e.GetCheck()},
			{"Level", level(e.GetLevel())}, {"Status", status(e.GetStatus())}, {"Output", orDash(e.GetOutput())},
			{"Started", stamp(p, e.GetStartedAt().AsTime())}, {"Received", stamp(p, e.GetReceivedAt().AsTime())},
		}
		if e.GetLongOutput() != "" {
			kv = append(kv, [2]string{"Long output", strings.ReplaceAll(e.GetLongOutput(), "\n", "\n             ")})
		}
		if e.GetSilencedBy() != "" {
			kv = append(kv, [2]string{"Silenced by", e.GetSilencedBy()})
		}
		ex := e.GetExplanation()
		outcome := "not processed yet"
		if ex != nil {
			outcome = ex.GetOutcome()
		}
		kv = append(kv, [2]string{"Outcome", outcome})
		if err := writeKV(w, kv); err != nil {
			return err
		}
		if len(ex.GetSteps()) == 0 {
			continue
		}
		fmt.Fprintln(w, "Explanation:")
		t := table{header: []string{"  STAGE", "RULE", "WHAT HAPPENED"}}
		for _, s := range ex.GetSteps() {
			t.add("  "+s.GetStage(), orDash(s.GetRule()), s.GetOutcome())
		}
		if err := p.writeTable(t); err != nil {
			return err
		}
	}
	return nil
}

func writeKV(w io.Writer, kv [][2]string) error {
	width := 0
	for _, p := range kv {
		width = max(width, len(p[0]))
	}
	for _, p := range kv {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width+1, p[0]+":", p[1]); err != nil {
			return err
		}
	}
	return nil
}

// stamp is an absolute time with its age, for detail views.
func stamp(p *printer, t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(p.now(), timestamppb.New(t)) + " ago)"
}

func alertState(s unyov1.AlertState) string {
	if s == unyov1.AlertState_ALERT_STATE_UNSPECIFIED {
		return "-"
	}
	return s.Name()
}

func ruleTable(objs []*unyov1.Object) table {
	t := table{header: []string{"NAME", "CLUSTER", "TYPE", "PRIORITY", "MATCH", "ACTIONS", "MATCHED", "UNTIL", "OWNER"}}
	for _, o := range objs {
		r := o.GetEventRule()
		s := r.GetSpec()
		var acts []string
		for _, a := range s.GetActions() {
			switch {
			case a.GetCreateAlert() != nil:
				acts = append(acts, "create_alert")
			case a.GetDeleteAlert() != nil:
				acts = append(acts, "delete_alert")
			case a.GetApiHook() != nil:
				acts = append(acts, "api_hook")
			case a.GetPlugin() != nil:
				acts = append(acts, "plugin:"+a.GetPlugin().GetName())
			}
		}
		if s.GetContinue() {
			acts = append(acts, "continue")
		}
		t.add(r.GetName(), orDash(r.GetCluster()), s.GetType(), fmt.Sprint(s.GetPriority()), truncate(matchText(s.GetMatch()), 40),
			orDash(strings.Join(acts, ",")), fmt.Sprint(r.GetMatched()), orDash(s.GetUntil()), orDash(s.GetOwner()))
	}
	return t
}

func matchText(m *unyov1.EventMatch) string {
	var parts []string
	if m.GetNode() != "" {
		parts = append(parts, "node="+m.GetNode())
	}
	if m.GetCheck() != "" {
		parts = append(parts, "check="+m.GetCheck())
	}
	if m.GetMessage() != "" {
		parts = append(parts, "message="+m.GetMessage())
	}
	if len(m.GetLevels()) > 0 {
		parts = append(parts, "level="+strings.Join(m.GetLevels(), "|"))
	}
	if len(m.GetLabels()) > 0 {
		parts = append(parts, labels(m.GetLabels(), ""))
	}
	return orDash(strings.Join(parts, " "))
}

func maintenanceTable(objs []*unyov1.Object, now time.Time) table {
	t := table{header: []string{"NAME", "CLUSTER", "STATUS", "NODES", "CHECKS", "START", "END", "OWNER", "SILENCED", "REASON"}}
	for _, o := range objs {
		m := o.GetMaintenance()
		s := m.GetSpec()
		end := orDash(s.GetEnd())
		if m.GetEndedAt() != nil {
			end = m.GetEndedAt().AsTime().UTC().Format(time.RFC3339) + " by " + orDash(m.GetEndedBy())
		}
		start := s.GetStart()
		if start == "" && m.GetCreatedAt() != nil {
			start = m.GetCreatedAt().AsTime().UTC().Format(time.RFC3339)
		}
		t.add(m.GetName(), orDash(m.GetCluster()), maintenanceStatus(m, now), orDash(strings.Join(s.GetNodes(), ",")),
			orDash(strings.Join(s.GetChecks(), ",")), orDash(start), end, orDash(s.GetOwner()), fmt.Sprint(m.GetSilenced()),
			truncate(orDash(s.GetReason()), 40))
	}
	return t
}

// maintenanceStatus is planned, active or ended at now.
func maintenanceStatus(m *unyov1.Maintenance, now time.Time) string {
	if m.GetEndedAt() != nil && !m.GetEndedAt().AsTime().After(now) {
		return "ended"
	}
	if s := m.GetSpec().GetStart(); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(now) {
			return "planned"
		}
	}
	if e := m.GetSpec().GetEnd(); e != "" {
		if t, err := time.Parse(time.RFC3339, e); err == nil && !t.After(now) {
			return "ended"
		}
	}
	return "active"
}
