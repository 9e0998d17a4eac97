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
