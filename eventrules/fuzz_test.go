package eventrules_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// fullMatch is the reference for an anchored pattern, computed without
// touching the pattern's text: the leftmost-longest match is all of s.
func fullMatch(t *testing.T, pattern, s string) bool {
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("Compile accepted %q, which regexp rejects: %v", pattern, err)
	}
	re.Longest()
	loc := re.FindStringIndex(s)
	return loc != nil && loc[0] == 0 && loc[1] == len(s)
}

// FuzzCompileMatches: Compile never panics on any match, and a compiled
// rule's Matches never panics and agrees with a plain reading of the match.
func FuzzCompileMatches(f *testing.F) {
	f.Add("web.*", "disk", "", "critical", "rack", "a1", "web1", "disk", "DISK OK", int32(3))
	f.Add("(", "[", "*", "fatal", "", "", "", "", "", int32(0))
	f.Add(`\Qa.b`, "", "", "", "", "", "a.b)$", "", "", int32(1))
	f.Add("(?i)WEB|db", "x{2,}", ".*refused on port 80.*", "Warning", "k", "", "DB", "xxx", "connection refused on port 8080", int32(2))
	f.Add("", "", "", "", "", "", "", "", "", int32(-1))
	f.Fuzz(func(t *testing.T, node, check, message, level, labelName, labelValue, evNode, evCheck, evOutput string, evLevel int32) {
		m := &unyov1.EventMatch{Node: node, Check: check, Message: message}
		if level != "" {
			m.Levels = []string{level}
		}
		if labelName != "" || labelValue != "" {
			m.Labels = map[string]string{labelName: labelValue}
		}
		r, err := eventrules.Compile(&unyov1.EventRule{Name: "fuzz", Spec: spec("filter", m)})
		if err != nil {
			if !strings.HasPrefix(err.Error(), `event rule "fuzz": spec.`) {
				t.Fatalf("error not tied to a spec field: %v", err)
			}
			return
		}
		e := &unyov1.Event{
			Node: evNode, Check: evCheck, Output: evOutput, Level: unyov1.Level(evLevel),
			Labels: map[string]string{labelName: evOutput},
		}
		want := true
		for _, c := range []struct{ pattern, s string }{{node, evNode}, {check, evCheck}, {message, evOutput}} {
			if c.pattern != "" && !fullMatch(t, c.pattern, c.s) {
				want = false
			}
		}
		if level != "" && !strings.EqualFold(level, levelWord(e.Level)) {
			want = false
		}
		if len(m.Labels) > 0 && evOutput != labelValue {
			want = false
		}
		if got := r.Matches(e, time.Now()); got != want {
			t.Errorf("Matches = %v, reference says %v for match %+v and event %+v", got, want, m, e)
		}
		eventrules.NewSet([]eventrules.Rule{r}).Filter(e, time.Now())
	})
}

func levelWord(l unyov1.Level) string {
	switch l {
	case unyov1.Level_LEVEL_SUCCESS:
		return "success"
	case unyov1.Level_LEVEL_WARNING:
		return "warning"
	case unyov1.Level_LEVEL_CRITICAL:
		return "critical"
	}
	return "-"
}

// FuzzTemplates: any key or summary template either fails Compile or
// renders, on any event, without panicking, within the cap, and quickly.
func FuzzTemplates(f *testing.F) {
	f.Add("{{.Node}}/{{.Check}}", "{{.Output}}", "web1", "out", "team", "ops")
	f.Add("{{range .Labels}}{{.}}{{end}}", `{{printf "%0999999d" 1}}`, "", "", "", "")
	f.Add(`{{define "a"}}{{template "a"}}{{end}}`, "{{range 100000000}}{{end}}", "", "", "", "")
	f.Add("{{with .Labels.x}}{{.}}{{else}}{{$.Level}}{{end}}", "{{index .Labels 1}}", "n", "", "x", "y")
	f.Fuzz(func(t *testing.T, key, summary, node, output, labelName, labelValue string) {
		s := spec("action", &unyov1.EventMatch{Node: ".*"})
		s.Actions = []*unyov1.Action{createAlert(&unyov1.CreateAlertAction{Key: key, Summary: summary})}
		r, err := eventrules.Compile(&unyov1.EventRule{Name: "fuzz", Spec: s})
		if err != nil {
			return
		}
		a := r.Actions[0].CreateAlert
		e := &unyov1.Event{Node: node, Output: output, Labels: map[string]string{labelName: labelValue, "b": "c"}}
		start := time.Now()
		for _, render := range []func(*unyov1.Event) (string, error){a.Key, a.Summary} {
			out, err := render(e)
			if err != nil {
				continue
			}
			if len(out) > eventrules.MaxRendered {
				t.Errorf("rendered %d bytes", len(out))
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("rendering took %v", d)
		}
	})
}
