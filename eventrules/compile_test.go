package eventrules_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

func TestCompileDefaults(t *testing.T) {
	s := spec("action", &unyov1.EventMatch{Node: "web1"})
	s.Priority = -5
	s.Continue = true
	s.Actions = []*unyov1.Action{
		createAlert(nil),
		deleteAlert(&unyov1.DeleteAlertAction{Close: true}),
		apiHook(&unyov1.ApiHookAction{Url: "https://hooks.example.com/unyo"}),
	}
	r, err := eventrules.Compile(&unyov1.EventRule{Name: "web", Revision: 9, Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "web" || r.Revision != 9 || r.Type != eventrules.TypeAction || r.Priority != -5 || !r.Continue {
		t.Errorf("fields not copied: %+v", r)
	}
	if r.Owner != "team-infra" || r.Reason != "INC-42" || !r.Until.IsZero() || r.Wait != 0 || r.GroupBy != nil {
		t.Errorf("unexpected fields: %+v", r)
	}
	if len(r.Actions) != 3 {
		t.Fatalf("got %d actions, want 3", len(r.Actions))
	}
	e := &unyov1.Event{Node: "web1", Check: "disk", Output: "DISK CRITICAL - / 97%", Level: critical}
	ca := r.Actions[0]
	if ca.Kind != eventrules.ActionCreateAlert || ca.CreateAlert == nil || ca.DeleteAlert != nil || ca.APIHook != nil {
		t.Fatalf("action 0 = %+v", ca)
	}
	if k, err := ca.CreateAlert.Key(e); k != "web1/disk" || err != nil {
		t.Errorf("default key = %q, %v", k, err)
	}
	if s, err := ca.CreateAlert.Summary(e); s != e.Output || err != nil {
		t.Errorf("default summary = %q, %v", s, err)
	}
	da := r.Actions[1]
	if da.Kind != eventrules.ActionDeleteAlert || !da.DeleteAlert.Close {
		t.Errorf("action 1 = %+v", da)
	}
	if k, err := da.DeleteAlert.Key(e); k != "web1/disk" || err != nil {
		t.Errorf("default delete key = %q, %v", k, err)
	}
	h := r.Actions[2].APIHook
	if r.Actions[2].Kind != eventrules.ActionAPIHook || h == nil {
		t.Fatalf("action 2 = %+v", r.Actions[2])
	}
	if h.URL != "https://hooks.example.com/unyo" || h.Format != eventrules.FormatUnyo || h.Timeout != 10*time.Second || h.Retries != 3 || h.RepeatInterval != 4*time.Hour {
		t.Errorf("hook defaults = %+v", h)
	}
	if got := eventrules.ActionAPIHook.String(); got != "api_hook" {
		t.Errorf("ActionAPIHook.String() = %q", got)
	}
}

func TestCompileValid(t *testing.T) {
	tests := []struct {
		name  string
		spec  *unyov1.EventRuleSpec
		check func(t *testing.T, r eventrules.Rule)
	}{
		{
			name: "until parses as RFC 3339",
			spec: func() *unyov1.EventRuleSpec {
				s := spec("silence", &unyov1.EventMatch{Node: "db.*"})
				s.Until = "2026-07-01T09:00:00+09:00"
				return s
			}(),
			check: func(t *testing.T, r eventrules.Rule) {
				want := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
				if !r.Until.Equal(want) {
					t.Errorf("Until = %v, want %v", r.Until, want)
				}
			},
		},
		{
			name: "aggregate: group_by sorted, wait parsed",
			spec: func() *unyov1.EventRuleSpec {
				s := spec("aggregate", &unyov1.EventMatch{Levels: []string{"critical"}})
				s.GroupBy = []string{"node", "label:team", "check"}
				s.Wait = "90s"
				return s
			}(),
			check: func(t *testing.T, r eventrules.Rule) {
				if strings.Join(r.GroupBy, " ") != "check label:team node" {
					t.Errorf("GroupBy = %q", r.GroupBy)
				}
				if r.Wait != 90*time.Second || r.Type != eventrules.TypeAggregate {
					t.Errorf("Wait, Type = %v, %v", r.Wait, r.Type)
				}
			},
		},
		{
			name: "levels and create_alert.level are case-insensitive",
			spec: func() *unyov1.EventRuleSpec {
				s := spec("action", &unyov1.EventMatch{Levels: []string{"CRITICAL", "Warning"}})
				s.Actions = []*unyov1.Action{createAlert(&unyov1.CreateAlertAction{Level: "Fatal"})}
				return s
			}(),
			check: func(t *testing.T, r eventrules.Rule) {
				if !r.Matches(event("a", "b", warning), time.Now()) {
					t.Error("Warning level did not match")
				}
				if got := r.Actions[0].CreateAlert.Level(event("a", "b", warning)); got != unyov1.AlertLevel_ALERT_LEVEL_FATAL {
					t.Errorf("Level = %v, want FATAL", got)
				}
			},
		},
		{
			name: "hook settings",
			spec: func() *unyov1.EventRuleSpec {
				s := spec("action", &unyov1.EventMatch{Check: "http"})
				s.Actions = []*unyov1.Action{apiHook(&unyov1.ApiHookAction{
					Url: "http://am.internal:9093/api/v2/alerts", Format: "alertmanager",
					Timeout: "5m", Retries: 20, Headers: map[string]string{"Authorization": "Bearer x"},
				})}
				return s
			}(),
			check: func(t *testing.T, r eventrules.Rule) {
				h := r.Actions[0].APIHook
				if h.Format != "alertmanager" || h.Timeout != 5*time.Minute || h.Retries != 20 || h.Headers["Authorization"] != "Bearer x" {
					t.Errorf("hook = %+v", h)
				}
			},
		},
		{
			name: "owner and reason are trimmed",
			spec: func() *unyov1.EventRuleSpec {
				s := spec("filter", &unyov1.EventMatch{Check: "noisy"})
				s.Owner, s.Reason = " alice ", "\tflaps\n"
				return s
			}(),
			check: func(t *testing.T, r eventrules.Rule) {
				if r.Owner != "alice" || r.Reason != "flaps" {
					t.Errorf("Owner, Reason = %q, %q", r.Owner, r.Reason)
				}
			},
		},
		{
			name: "type strings",
			spec: spec("filter", &unyov1.EventMatch{Check: "x"}),
			check: func(t *testing.T, r eventrules.Rule) {
				for typ, want := range map[eventrules.Type]string{
					eventrules.TypeFilter: "filter", eventrules.TypeSilence: "silence",
					eventrules.TypeAggregate: "aggregate", eventrules.TypeAction: "action", 0: "unknown",
				} {
					if typ.String() != want {
						t.Errorf("%d.String() = %q, want %q", int(typ), typ.String(), want)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustCompile(t, "rule", tt.spec))
		})
	}
}

func TestCompileInvalid(t *testing.T) {
	with := func(typ string, f func(s *unyov1.EventRuleSpec)) *unyov1.EventRuleSpec {
		s := spec(typ, &unyov1.EventMatch{Node: "web1"})
		f(s)
		return s
	}
	action := func(a *unyov1.Action) *unyov1.EventRuleSpec {
		return with("action", func(s *unyov1.EventRuleSpec) { s.Actions = []*unyov1.Action{a} })
	}
	hook := func(f func(h *unyov1.ApiHookAction)) *unyov1.EventRuleSpec {
		h := &unyov1.ApiHookAction{Url: "https://hooks.example.com/x"}
		f(h)
		return action(apiHook(h))
	}
	match := func(m *unyov1.EventMatch) *unyov1.EventRuleSpec {
		return with("filter", func(s *unyov1.EventRuleSpec) { s.Match = m })
	}
	tests := []struct {
		name     string
		ruleName string
		spec     *unyov1.EventRuleSpec
		field    string
		contains string
	}{
		{"empty name", "", spec("filter", &unyov1.EventMatch{Node: "x"}), "name", "required"},
		{"upper-case name", "Noisy", spec("filter", &unyov1.EventMatch{Node: "x"}), "name", `"Noisy" is not a valid name`},
		{"no spec", "r", nil, "spec", "required"},
		{"no type", "r", with("", func(s *unyov1.EventRuleSpec) {}), "spec.type", "required"},
		{"unknown type", "r", with("mute", func(s *unyov1.EventRuleSpec) {}), "spec.type", `must be "filter", "silence", "aggregate" or "action", got "mute"`},
		{"type is case-sensitive", "r", with("Filter", func(s *unyov1.EventRuleSpec) {}), "spec.type", `got "Filter"`},
		{"no match", "r", match(nil), "spec.match", "give at least one condition; an empty match would match nothing"},
		{"empty match", "r", match(&unyov1.EventMatch{}), "spec.match", "give at least one condition"},
		{"empty levels and labels", "r", match(&unyov1.EventMatch{Levels: []string{}, Labels: map[string]string{}}), "spec.match", "at least one condition"},
		{"bad node regex", "r", match(&unyov1.EventMatch{Node: "("}), "spec.match.node", `invalid regular expression "(": missing closing )`},
		{"bad check regex", "r", match(&unyov1.EventMatch{Check: "disk[", Node: "x"}), "spec.match.check", `invalid regular expression "disk[": missing closing ] at "["`},
		{"bad message regex", "r", match(&unyov1.EventMatch{Message: "*x"}), "spec.match.message", "missing argument to repetition operator"},
		{"perl lookahead", "r", match(&unyov1.EventMatch{Node: "(?!web)"}), "spec.match.node", "invalid or unsupported Perl syntax"},
		{"huge repeat", "r", match(&unyov1.EventMatch{Node: "a{1001}"}), "spec.match.node", "invalid repeat count"},
		{"unknown level", "r", match(&unyov1.EventMatch{Levels: []string{"critical", "error"}}), "spec.match.levels[1]", `must be "success", "warning" or "critical", got "error"`},
		{"fatal is an alert level", "r", match(&unyov1.EventMatch{Levels: []string{"fatal"}}), "spec.match.levels[0]", "alert level, not an event level"},
		{"empty level", "r", match(&unyov1.EventMatch{Levels: []string{""}}), "spec.match.levels[0]", `got ""`},
		{"empty label name", "r", match(&unyov1.EventMatch{Labels: map[string]string{"": "x", "rack": "a1"}}), "spec.match.labels", "label name is empty"},
		{"bad until", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Until = "tomorrow" }), "spec.until", `invalid time "tomorrow" (expected RFC 3339`},
		{"until without zone", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Until = "2026-07-01T09:00:00" }), "spec.until", "invalid time"},
		{"no owner", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Owner = "" }), "spec.owner", "required: say who"},
		{"blank owner", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Owner = "  " }), "spec.owner", "required"},
		{"no reason", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Reason = "" }), "spec.reason", "required: say why"},
		{"group_by on action", "r", with("action", func(s *unyov1.EventRuleSpec) { s.GroupBy = []string{"node"} }), "spec.group_by", "only aggregate rules group events; remove it from this action rule"},
		{"unknown group_by", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.GroupBy = []string{"node", "host"} }), "spec.group_by[1]", `got "host"`},
		{"label without name", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.GroupBy = []string{"label:"} }), "spec.group_by[0]", "needs a label name"},
		{"duplicate group_by", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.GroupBy = []string{"node", "node"} }), "spec.group_by[1]", "listed twice"},
		{"aggregate without wait", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Wait = "" }), "spec.wait", "required"},
		{"bad wait", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Wait = "5 minutes" }), "spec.wait", `invalid duration "5 minutes"`},
		{"zero wait", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Wait = "0s" }), "spec.wait", "must be positive"},
		{"long wait", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Wait = "25h" }), "spec.wait", "at most 24h0m0s"},
		{"wait on silence", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Wait = "5m" }), "spec.wait", "only aggregate rules wait"},
		{"action without actions", "r", with("action", func(s *unyov1.EventRuleSpec) { s.Actions = nil }), "spec.actions", "required: an action rule needs at least one action"},
		{"aggregate without actions", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Actions = nil }), "spec.actions", "an aggregate rule needs"},
		{"filter with actions", "r", with("filter", func(s *unyov1.EventRuleSpec) { s.Actions = []*unyov1.Action{createAlert(nil)} }), "spec.actions", "a filter rule runs no actions"},
		{"silence with actions", "r", with("silence", func(s *unyov1.EventRuleSpec) { s.Actions = []*unyov1.Action{createAlert(nil)} }), "spec.actions", "a silence rule runs no actions"},
		{"continue on aggregate", "r", with("aggregate", func(s *unyov1.EventRuleSpec) { s.Continue = true }), "spec.continue", "only action rules continue"},
		{"continue on filter", "r", with("filter", func(s *unyov1.EventRuleSpec) { s.Continue = true }), "spec.continue", "this filter rule"},
		{"empty action", "r", action(&unyov1.Action{}), "spec.actions[0]", "give exactly one of create_alert, delete_alert, api_hook or plugin"},
		{"plugin without name", "r", action(&unyov1.Action{Kind: &unyov1.Action_Plugin{Plugin: &unyov1.PluginAction{}}}), "spec.actions[0].plugin.name", "required"},
		{"plugin name with slash", "r", action(&unyov1.Action{Kind: &unyov1.Action_Plugin{Plugin: &unyov1.PluginAction{Name: "action/exec"}}}), "spec.actions[0].plugin.name", "without slashes"},
		{"nil action", "r", action(nil), "spec.actions[0]", "give exactly one of"},
		{"alert level", "r", action(createAlert(&unyov1.CreateAlertAction{Level: "success"})), "spec.actions[0].create_alert.level", `got "success"`},
		{"key template syntax", "r", action(createAlert(&unyov1.CreateAlertAction{Key: "{{.Node"})), "spec.actions[0].create_alert.key", `invalid template "{{.Node"`},
		{"key unknown field", "r", action(createAlert(&unyov1.CreateAlertAction{Key: "{{.Host}}"})), "spec.actions[0].create_alert.key", "the event has no field .Host"},
		{"field of string", "r", action(createAlert(&unyov1.CreateAlertAction{Key: "{{.Node.Name}}"})), "spec.actions[0].create_alert.key", ".Node is a string and has no field .Name"},
		{"field of label", "r", action(createAlert(&unyov1.CreateAlertAction{Key: "{{.Labels.team.x}}"})), "spec.actions[0].create_alert.key", ".Labels.team is a string"},
		{"root variable field", "r", action(createAlert(&unyov1.CreateAlertAction{Key: "{{with .Node}}{{$.Nodes}}{{end}}"})), "spec.actions[0].create_alert.key", "no field .Nodes"},
		{"unknown function", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: "{{upper .Output}}"})), "spec.actions[0].create_alert.summary", `function "upper" not defined`},
		{"define", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{define "a"}}x{{end}}{{.Node}}`})), "spec.actions[0].create_alert.summary", "define and block are not allowed"},
		{"template call", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{template "a"}}`})), "spec.actions[0].create_alert.summary", "not allowed"},
		{"block", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{block "a" .}}{{template "a" .}}{{end}}`})), "spec.actions[0].create_alert.summary", "not allowed"},
		{"range over int", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{range 1000000000}}{{end}}`})), "spec.actions[0].create_alert.summary", "range is allowed only over .Labels"},
		{"range over output", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{range .Output}}{{end}}`})), "spec.actions[0].create_alert.summary", "only over .Labels"},
		{"nested range", "r", action(createAlert(&unyov1.CreateAlertAction{Summary: `{{range .Labels}}{{range $.Labels}}{{end}}{{end}}`})), "spec.actions[0].create_alert.summary", "range inside range"},
		{"delete key template", "r", action(deleteAlert(&unyov1.DeleteAlertAction{Key: "{{"})), "spec.actions[0].delete_alert.key", "invalid template"},
		{"hook without url", "r", hook(func(h *unyov1.ApiHookAction) { h.Url = "" }), "spec.actions[0].api_hook.url", "required"},
		{"hook relative url", "r", hook(func(h *unyov1.ApiHookAction) { h.Url = "/hooks/x" }), "spec.actions[0].api_hook.url", "not an absolute http or https URL"},
		{"hook ftp url", "r", hook(func(h *unyov1.ApiHookAction) { h.Url = "ftp://example.com/x" }), "spec.actions[0].api_hook.url", "not an absolute http or https URL"},
		{"hook url without host", "r", hook(func(h *unyov1.ApiHookAction) { h.Url = "https:///x" }), "spec.actions[0].api_hook.url", "not an absolute"},
		{"hook unparsable url", "r", hook(func(h *unyov1.ApiHookAction) { h.Url = "http://[::1" }), "spec.actions[0].api_hook.url", `invalid URL "http://[::1"`},
		{"hook format", "r", hook(func(h *unyov1.ApiHookAction) { h.Format = "slack" }), "spec.actions[0].api_hook.format", `must be "unyo", "alertmanager" or "alertmanager_push", got "slack"`},
		{"hook bad timeout", "r", hook(func(h *unyov1.ApiHookAction) { h.Timeout = "10" }), "spec.actions[0].api_hook.timeout", "invalid duration"},
		{"hook zero timeout", "r", hook(func(h *unyov1.ApiHookAction) { h.Timeout = "0s" }), "spec.actions[0].api_hook.timeout", "must be positive"},
		{"hook long timeout", "r", hook(func(h *unyov1.ApiHookAction) { h.Timeout = "6m" }), "spec.actions[0].api_hook.timeout", "at most 5m0s"},
		{"hook negative repeat", "r", hook(func(h *unyov1.ApiHookAction) { h.RepeatInterval = "-1s" }), "spec.actions[0].api_hook.repeat_interval", "must be positive, or 0 to send on every result (unset means 4h0m0s)"},
		{"hook long repeat", "r", hook(func(h *unyov1.ApiHookAction) { h.RepeatInterval = "2500h" }), "spec.actions[0].api_hook.repeat_interval", "at most 2160h0m0s"},
		{"plugin bad repeat", "r", action(&unyov1.Action{Kind: &unyov1.Action_Plugin{Plugin: &unyov1.PluginAction{Name: "exec", RepeatInterval: "often"}}}), "spec.actions[0].plugin.repeat_interval", "invalid duration"},
		{"hook negative retries", "r", hook(func(h *unyov1.ApiHookAction) { h.Retries = -1 }), "spec.actions[0].api_hook.retries", "between 1 and 20"},
		{"hook many retries", "r", hook(func(h *unyov1.ApiHookAction) { h.Retries = 21 }), "spec.actions[0].api_hook.retries", "got 21"},
		{"hook empty header", "r", hook(func(h *unyov1.ApiHookAction) { h.Headers = map[string]string{"": "x"} }), "spec.actions[0].api_hook.headers", "header name is empty"},
		{"hook bad header name", "r", hook(func(h *unyov1.ApiHookAction) { h.Headers = map[string]string{"X Token": "x"} }), `spec.actions[0].api_hook.headers["X Token"]`, "not a valid header name"},
		{"hook header injection", "r", hook(func(h *unyov1.ApiHookAction) { h.Headers = map[string]string{"X-Token": "a\r\nHost: evil"} }), `spec.actions[0].api_hook.headers["X-Token"]`, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := eventrules.Compile(&unyov1.EventRule{Name: tt.ruleName, Spec: tt.spec})
			if err == nil {
				t.Fatalf("Compile succeeded: %+v", r)
			}
			var ve *eventrules.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not a *ValidationError: %v", err, err)
			}
			if len(ve.Fields) != 1 {
				t.Fatalf("want exactly one field error, got:\n%v", err)
			}
			f := ve.Fields[0]
			if f.Field != tt.field || !strings.Contains(f.Description, tt.contains) {
				t.Errorf("got %s: %s\nwant %s: ...%s...", f.Field, f.Description, tt.field, tt.contains)
			}
			if ve.Rule != tt.ruleName {
				t.Errorf("Rule = %q, want %q", ve.Rule, tt.ruleName)
			}
		})
	}
}

func TestCompileCollectsEveryError(t *testing.T) {
	_, err := eventrules.Compile(&unyov1.EventRule{Name: "Bad Name", Spec: &unyov1.EventRuleSpec{
		Type:    "action",
		Match:   &unyov1.EventMatch{Node: "(", Check: "[", Levels: []string{"fatal"}},
		Until:   "never",
		GroupBy: []string{"node"},
		Wait:    "5m",
		Actions: []*unyov1.Action{
			createAlert(&unyov1.CreateAlertAction{Level: "high", Key: "{{.X}}"}),
			apiHook(&unyov1.ApiHookAction{Url: "example.com", Retries: 99}),
		},
	}})
	var ve *eventrules.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T is not a *ValidationError: %v", err, err)
	}
	var got []string
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	want := []string{
		"name", "spec.match.node", "spec.match.check", "spec.match.levels[0]", "spec.until",
		"spec.owner", "spec.reason", "spec.group_by", "spec.wait",
		"spec.actions[0].create_alert.level", "spec.actions[0].create_alert.key",
		"spec.actions[1].api_hook.url", "spec.actions[1].api_hook.retries",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fields:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n") + 1; n != len(want) {
		t.Errorf("Error() has %d lines, want %d:\n%s", n, len(want), msg)
	}
	if !strings.HasPrefix(msg, `event rule "Bad Name": name: `) {
		t.Errorf("Error() does not start with the rule name:\n%s", msg)
	}
	if !strings.Contains(msg, `event rule "Bad Name": spec.match.node: invalid regular expression "(": missing closing )`) {
		t.Errorf("Error() lacks the node regexp error:\n%s", msg)
	}
}

func TestCompileUnnamed(t *testing.T) {
	_, err := eventrules.Compile(&unyov1.EventRule{Spec: spec("filter", &unyov1.EventMatch{Node: "x"})})
	if err == nil || err.Error() != "unnamed event rule: name: required" {
		t.Errorf("err = %v", err)
	}
	if _, err := eventrules.Compile(nil); err == nil {
		t.Error("Compile(nil) succeeded")
	}
}

// A compiled rule must not change when the message it came from does: the
// pipeline may reuse or mutate messages after compiling.
func TestCompileCopiesInput(t *testing.T) {
	h := &unyov1.ApiHookAction{Url: "https://x.example/", Headers: map[string]string{"A": "1"}}
	s := spec("action", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1"}})
	s.Actions = []*unyov1.Action{apiHook(h)}
	r := mustCompile(t, "r", s)
	h.Headers["A"] = "2"
	s.Match.Labels["rack"] = "b2"
	if r.Actions[0].APIHook.Headers["A"] != "1" {
		t.Error("headers share the input map")
	}
	e := &unyov1.Event{Labels: map[string]string{"rack": "a1"}}
	if !r.Matches(e, time.Now()) {
		t.Error("match labels share the input map")
	}
}
