package eventrules_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

func createAlertRule(t *testing.T, a *unyov1.CreateAlertAction) *eventrules.CreateAlert {
	t.Helper()
	s := spec("action", &unyov1.EventMatch{Node: ".*"})
	s.Actions = []*unyov1.Action{createAlert(a)}
	return mustCompile(t, "r", s).Actions[0].CreateAlert
}

func TestTemplates(t *testing.T) {
	e := &unyov1.Event{
		Cluster: "tokyo", Node: "web1", Check: "disk", Level: critical,
		Status: unyov1.CheckStatus_CHECK_STATUS_UNKNOWN, Output: "DISK CRITICAL - / 97%",
		LongOutput: "ignored", Labels: map[string]string{"team": "ops", "rack": "a1", "app-name": "shop"},
	}
	tests := []struct {
		name, tmpl, want string
	}{
		{"fields", "{{.Cluster}}/{{.Node}}/{{.Check}}", "tokyo/web1/disk"},
		{"level and status are lowercase words", "{{.Level}} {{.Status}}", "critical unknown"},
		{"label", "{{.Labels.team}}", "ops"},
		{"missing label is empty", "[{{.Labels.owner}}]", "[]"},
		{"label with a dash", `{{index .Labels "app-name"}}`, "shop"},
		{"range over labels is sorted", "{{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}}", "app-name=shop;rack=a1;team=ops;"},
		{"range over $.Labels", "{{range $.Labels}}{{.}},{{end}}", "shop,a1,ops,"},
		{"with and else", "{{with .Labels.owner}}{{.}}{{else}}{{$.Node}} has no owner{{end}}", "web1 has no owner"},
		{"if on level", `{{if eq .Level "critical"}}PAGE{{else}}mail{{end}}`, "PAGE"},
		{"printf", `{{printf "%s:%s" .Node .Check}}`, "web1:disk"},
		{"two ranges in sequence", "{{range .Labels}}x{{end}}{{range .Labels}}y{{end}}", "xxxyyy"},
		{"plain text", "disk full", "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := createAlertRule(t, &unyov1.CreateAlertAction{Key: tt.tmpl, Summary: tt.tmpl})
			for what, render := range map[string]func(*unyov1.Event) (string, error){"Key": a.Key, "Summary": a.Summary} {
				got, err := render(e)
				if err != nil || got != tt.want {
					t.Errorf("%s = %q, %v; want %q", what, got, err, tt.want)
				}
			}
		})
	}
}

func TestTemplateEventWithoutFields(t *testing.T) {
	a := createAlertRule(t, &unyov1.CreateAlertAction{Summary: "{{.Level}} {{.Labels.team}}"})
	for _, e := range []*unyov1.Event{nil, {}} {
		if k, err := a.Key(e); k != "/" || err != nil {
			t.Errorf("Key(%v) = %q, %v", e, k, err)
		}
		if s, err := a.Summary(e); s != "unspecified " || err != nil {
			t.Errorf("Summary(%v) = %q, %v", e, s, err)
		}
	}
}

// Errors that depend on the event surface from Key and Summary, never as a
// panic.
func TestTemplateRuntimeErrors(t *testing.T) {
	for _, tmpl := range []string{
		`{{index .Labels 1}}`,
		`{{slice .Output 100}}`,
		`{{range .Labels}}{{.Team}}{{end}}`,
		`{{with .Node}}{{.Name}}{{end}}`,
		`{{len 3}}`,
	} {
		t.Run(tmpl, func(t *testing.T) {
			a := createAlertRule(t, &unyov1.CreateAlertAction{Summary: tmpl})
			e := &unyov1.Event{Node: "web1", Output: "short", Labels: map[string]string{"a": "b"}}
			if s, err := a.Summary(e); err == nil {
				t.Errorf("Summary = %q, want an error", s)
			} else if !strings.Contains(err.Error(), "spec.actions[0].create_alert.summary") {
				t.Errorf("error does not name the template: %v", err)
			}
		})
	}
}

func TestTemplateOutputCap(t *testing.T) {
	tests := []struct {
		name, tmpl, output string
		wantLen            int
	}{
		{"long output", "{{.Output}}", strings.Repeat("x", 5000), eventrules.MaxRendered},
		{"exactly the cap", "{{.Output}}", strings.Repeat("x", eventrules.MaxRendered), eventrules.MaxRendered},
		{"cut at a rune boundary", "{{.Output}}", "a" + strings.Repeat("é", 1000), eventrules.MaxRendered - 1},
		{"cut after a 3-byte rune", "{{.Output}}", "ab" + strings.Repeat("日", 400), eventrules.MaxRendered - 2},
		{"invalid UTF-8 is not eaten", "{{.Output}}", strings.Repeat("\xff", 2000), eventrules.MaxRendered},
		{"huge printf width", `{{printf "%0999999d" 1}}`, "", eventrules.MaxRendered},
		{"text repeated by range", "{{range .Labels}}" + strings.Repeat("y", 600) + "{{end}}", "", eventrules.MaxRendered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := createAlertRule(t, &unyov1.CreateAlertAction{Summary: tt.tmpl})
			e := &unyov1.Event{Output: tt.output, Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}
			s, err := a.Summary(e)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) != tt.wantLen || utf8.ValidString(s) != utf8.ValidString(tt.output) {
				t.Errorf("len = %d (valid UTF-8: %v), want %d", len(s), utf8.ValidString(s), tt.wantLen)
			}
		})
	}
}

func TestCreateAlertLevel(t *testing.T) {
	tests := []struct {
		configured string
		event      unyov1.Level
		want       unyov1.AlertLevel
	}{
		{"", critical, unyov1.AlertLevel_ALERT_LEVEL_CRITICAL},
		{"", warning, unyov1.AlertLevel_ALERT_LEVEL_WARNING},
		{"", success, unyov1.AlertLevel_ALERT_LEVEL_WARNING},
		{"", unyov1.Level_LEVEL_UNSPECIFIED, unyov1.AlertLevel_ALERT_LEVEL_WARNING},
		{"fatal", warning, unyov1.AlertLevel_ALERT_LEVEL_FATAL},
		{"critical", warning, unyov1.AlertLevel_ALERT_LEVEL_CRITICAL},
		{"warning", critical, unyov1.AlertLevel_ALERT_LEVEL_WARNING},
	}
	for _, tt := range tests {
		a := createAlertRule(t, &unyov1.CreateAlertAction{Level: tt.configured})
		if got := a.Level(event("w", "d", tt.event)); got != tt.want {
			t.Errorf("level %q, event %v: got %v, want %v", tt.configured, tt.event, got, tt.want)
		}
	}
}

func TestDeleteAlertKey(t *testing.T) {
	s := spec("action", &unyov1.EventMatch{Levels: []string{"success"}})
	s.Actions = []*unyov1.Action{deleteAlert(&unyov1.DeleteAlertAction{Key: "{{.Labels.service}}"})}
	d := mustCompile(t, "r", s).Actions[0].DeleteAlert
	if k, err := d.Key(&unyov1.Event{Labels: map[string]string{"service": "shop"}}); k != "shop" || err != nil {
		t.Errorf("Key = %q, %v", k, err)
	}
	if d.Close {
		t.Error("Close defaulted to true")
	}
}

func TestZeroActionsDoNotPanic(t *testing.T) {
	e := event("w", "d", critical)
	if _, err := (eventrules.CreateAlert{}).Key(e); err == nil {
		t.Error("zero CreateAlert rendered a key")
	}
	if _, err := (eventrules.DeleteAlert{}).Key(e); err == nil {
		t.Error("zero DeleteAlert rendered a key")
	}
}

// TestDefaultTemplatesAsExecuted: the default key and summary, rendered
// without executing them, equal the same templates executed (spelled with
// spaces, so they are not recognised as the defaults), cut included.
func TestDefaultTemplatesAsExecuted(t *testing.T) {
	long := strings.Repeat("é", eventrules.MaxRendered) // cut mid-character
	for _, e := range []*unyov1.Event{
		{Node: "web1", Check: "disk", Output: "DISK CRITICAL - / 97%"},
		{Node: long, Check: "disk", Output: long},
		{},
	} {
		def := createAlertRule(t, nil)
		executed := createAlertRule(t, &unyov1.CreateAlertAction{Key: "{{ .Node }}/{{ .Check }}", Summary: "{{ .Output }}"})
		for what, pair := range map[string][2]func(*unyov1.Event) (string, error){
			"key": {def.Key, executed.Key}, "summary": {def.Summary, executed.Summary},
		} {
			got, err1 := pair[0](e)
			want, err2 := pair[1](e)
			if got != want || err1 != nil || err2 != nil {
				t.Errorf("%s of %.20q: default %.30q (%v), executed %.30q (%v)", what, e.GetNode(), got, err1, want, err2)
			}
		}
		del := mustCompile(t, "d", &unyov1.EventRuleSpec{Type: "action", Match: &unyov1.EventMatch{Node: ".*"}, Owner: "o", Reason: "r", Actions: []*unyov1.Action{deleteAlert(nil)}}).Actions[0].DeleteAlert
		if got, _ := del.Key(e); got != func() string { k, _ := executed.Key(e); return k }() {
			t.Errorf("delete_alert key %.30q", got)
		}
	}
}
