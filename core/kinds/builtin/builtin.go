// Package builtin registers every kind of object unyo has; it is the one
// place that ties the kind registry (package kinds) to the domain packages
// that validate each kind.
package builtin

import (
	"fmt"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/printer/cell"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/maintenance"
)

// Kinds returns the registry of every kind unyo has. A new kind is one
// more entry here plus its domain package (see README, "How to add a
// kind"); TestKindsCoverObject fails until Object's oneof and this list
// agree.
func Kinds() *kinds.Registry {
	ks := append([]kinds.Kind{check(), eventRule(), maintenanceKind()}, inventoryKinds()...)
	ks = append(ks, catalog()...)
	r, err := kinds.New(append(ks, services()...)...)
	if err != nil {
		panic(err) // a programming error that every test run finds
	}
	return r
}

func check() kinds.Kind {
	return kinds.Define(kinds.Spec[*unyov1.Check]{
		Noun: "checks", Help: "Checks applied centrally", Aliases: []string{"check"},
		Owner: kinds.ClusterTier, Everywhere: true,
		Validate: func(c *unyov1.Check, _ time.Time) error { _, err := checks.Compile(c); return err },
		Labels: func(c *unyov1.Check) []kinds.LabelSet {
			return []kinds.LabelSet{{Field: "spec.node_selector", Labels: c.GetSpec().GetNodeSelector()}}
		},
		Prepare: func(c *unyov1.Check) { c.Source = "central" },
		Columns: []kinds.TypedColumn[*unyov1.Check]{
			{Header: "NAME", Cell: func(c *unyov1.Check, _ time.Time) string { return c.GetName() }},
			{Header: "CLUSTER", Cell: func(c *unyov1.Check, _ time.Time) string { return c.GetCluster() }},
			{Header: "SCHEDULE", Cell: func(c *unyov1.Check, _ time.Time) string {
				if s := c.GetSpec().GetInterval(); s != "" {
					return s
				}
				return c.GetSpec().GetCron()
			}},
			{Header: "COMMAND", Width: 40, Cell: func(c *unyov1.Check, _ time.Time) string { return checkWhat(c.GetSpec()) }},
			{Header: "SELECTOR", Cell: func(c *unyov1.Check, _ time.Time) string { return cell.Labels(c.GetSpec().GetNodeSelector(), "<all>") }},
			{Header: "REVISION", Cell: func(c *unyov1.Check, _ time.Time) string { return fmt.Sprint(c.GetRevision()) }},
			{Header: "ORIGIN", Cell: func(c *unyov1.Check, _ time.Time) string { return c.GetOrigin() }},
		},
	})
}

// checkWhat is what a check runs: its command line, or what it watches.
func checkWhat(s *unyov1.CheckSpec) string {
	switch {
	case s.GetMetric() != nil:
		return "metric: " + s.GetMetric().GetExpr()
	case s.GetLog() != nil:
		return strings.TrimSpace("log: " + s.GetLog().GetPattern() + " " + strings.Join(s.GetLog().GetLevels(), ","))
	case s.GetPlugin() != nil:
		return "plugin: " + s.GetPlugin().GetName()
	}
	return cell.Command(s.GetCommand())
}

func eventRule() kinds.Kind {
	return kinds.Define(kinds.Spec[*unyov1.EventRule]{
		Noun: "rules", Help: "Event rules: filter, silence, aggregate, action", Aliases: []string{"rule"},
		Owner: kinds.ClusterTier, Everywhere: true,
		Validate: func(r *unyov1.EventRule, _ time.Time) error { _, err := eventrules.Compile(r); return err },
		Labels: func(r *unyov1.EventRule) []kinds.LabelSet {
			return []kinds.LabelSet{{Field: "spec.match.labels", Labels: r.GetSpec().GetMatch().GetLabels()}}
		},
		Count: "matched",
		Columns: []kinds.TypedColumn[*unyov1.EventRule]{
			{Header: "NAME", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetName() }},
			{Header: "CLUSTER", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetCluster() }},
			{Header: "TYPE", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetSpec().GetType() }},
			{Header: "PRIORITY", Cell: func(r *unyov1.EventRule, _ time.Time) string { return fmt.Sprint(r.GetSpec().GetPriority()) }},
			{Header: "MATCH", Width: 40, Cell: func(r *unyov1.EventRule, _ time.Time) string { return matchText(r.GetSpec().GetMatch()) }},
			{Header: "ACTIONS", Cell: func(r *unyov1.EventRule, _ time.Time) string { return ruleActions(r.GetSpec()) }},
			{Header: "MATCHED", Cell: func(r *unyov1.EventRule, _ time.Time) string { return fmt.Sprint(r.GetMatched()) }},
			{Header: "UNTIL", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetSpec().GetUntil() }},
			{Header: "OWNER", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetSpec().GetOwner() }},
			{Header: "ORIGIN", Cell: func(r *unyov1.EventRule, _ time.Time) string { return r.GetOrigin() }},
		},
	})
}

func ruleActions(s *unyov1.EventRuleSpec) string {
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
	return strings.Join(acts, ",")
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
		parts = append(parts, cell.Labels(m.GetLabels(), ""))
	}
	return strings.Join(parts, " ")
}

func maintenanceKind() kinds.Kind {
	return kinds.Define(kinds.Spec[*unyov1.Maintenance]{
		Noun: "maintenance", Help: "Maintenance: who does what where and when; silences what it covers", Aliases: []string{"maint"},
		Owner: kinds.ClusterTier,
		Validate: func(m *unyov1.Maintenance, now time.Time) error {
			_, err := maintenance.Compile(m, now)
			return err
		},
		Count: "silenced",
		Columns: []kinds.TypedColumn[*unyov1.Maintenance]{
			{Header: "NAME", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return m.GetName() }},
			{Header: "CLUSTER", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return m.GetCluster() }},
			{Header: "STATUS", Cell: maintenanceStatus},
			{Header: "NODES", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return strings.Join(m.GetSpec().GetNodes(), ",") }},
			{Header: "CHECKS", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return strings.Join(m.GetSpec().GetChecks(), ",") }},
			{Header: "START", Cell: func(m *unyov1.Maintenance, _ time.Time) string {
				if s := m.GetSpec().GetStart(); s != "" || m.GetCreatedAt() == nil {
					return s
				}
				return m.GetCreatedAt().AsTime().UTC().Format(time.RFC3339)
			}},
			{Header: "END", Cell: func(m *unyov1.Maintenance, _ time.Time) string {
				if m.GetEndedAt() == nil {
					return m.GetSpec().GetEnd()
				}
				by := m.GetEndedBy()
				if by == "" {
					by = "-"
				}
				return m.GetEndedAt().AsTime().UTC().Format(time.RFC3339) + " by " + by
			}},
			{Header: "OWNER", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return m.GetSpec().GetOwner() }},
			{Header: "SILENCED", Cell: func(m *unyov1.Maintenance, _ time.Time) string { return fmt.Sprint(m.GetSilenced()) }},
			{Header: "REASON", Width: 40, Cell: func(m *unyov1.Maintenance, _ time.Time) string { return m.GetSpec().GetReason() }},
		},
	})
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
