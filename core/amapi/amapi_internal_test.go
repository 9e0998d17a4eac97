package amapi

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestParseFilter(t *testing.T) {
	labels := map[string]string{"alertname": "disk", "node": "web1", "severity": "critical"}
	tests := []struct {
		in      string
		match   bool
		wantErr bool
	}{
		{`alertname="disk"`, true, false},
		{`alertname=disk`, true, false},
		{`{node=~"web.*"}`, true, false},
		{`node!~"web.*"`, false, false},
		{`severity!="warning"`, true, false},
		{`node=~"db"`, false, false},
		{`missing=""`, true, false}, // an absent label is the empty value
		{`novalue`, false, true},
		{`node=~"("`, false, true},
		{`node="unterminated`, false, true},
	}
	for _, tt := range tests {
		m, err := parseFilter(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v", tt.in, err)
			continue
		}
		if err == nil && m.matches(labels) != tt.match {
			t.Errorf("%s: matches %v, want %v", tt.in, !tt.match, tt.match)
		}
	}
}

func TestSilenceRule(t *testing.T) {
	now := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	yes, no := true, false
	base := silence{StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "ops", Comment: "disk swap"}
	with := func(ms ...Matcher) silence { s := base; s.Matchers = ms; return s }
	tests := []struct {
		name    string
		in      silence
		wantErr string
		check   func(*unyov1.EventRule) bool
	}{
		{"equality is quoted", with(Matcher{Name: "alertname", Value: "disk.root"}, Matcher{Name: "node", Value: "web1", IsEqual: &yes}), "",
			func(r *unyov1.EventRule) bool {
				return r.GetSpec().GetMatch().GetCheck() == `disk\.root` && r.GetSpec().GetMatch().GetNode() == "web1"
			}},
		{"regex as is", with(Matcher{Name: "node", Value: "web.*", IsRegex: true}), "",
			func(r *unyov1.EventRule) bool { return r.GetSpec().GetMatch().GetNode() == "web.*" }},
		{"severity, cluster, labels", with(Matcher{Name: "severity", Value: "critical"}, Matcher{Name: "cluster", Value: "c1"}, Matcher{Name: "team", Value: "db"}), "",
			func(r *unyov1.EventRule) bool {
				m := r.GetSpec().GetMatch()
				return slices.Equal(m.GetLevels(), []string{"critical"}) && r.GetCluster() == "c1" && m.GetLabels()["team"] == "db"
			}},
		{"owner, reason, until", with(Matcher{Name: "alertname", Value: "disk"}), "",
			func(r *unyov1.EventRule) bool {
				s := r.GetSpec()
				return s.GetType() == "silence" && s.GetOwner() == "ops" && s.GetReason() == "disk swap" && s.GetUntil() == "2026-03-01T03:00:00Z"
			}},
		{"negative", with(Matcher{Name: "node", Value: "web1", IsEqual: &no}), "negative", nil},
		{"regex on a label", with(Matcher{Name: "team", Value: "d.*", IsRegex: true}), "alertname and node only", nil},
		{"no matchers", with(), "at least one matcher", nil},
		{"future start", func() silence {
			s := with(Matcher{Name: "node", Value: "a"})
			s.StartsAt = now.Add(time.Hour)
			s.EndsAt = now.Add(2 * time.Hour)
			return s
		}(), "future", nil},
		{"no comment", func() silence { s := with(Matcher{Name: "node", Value: "a"}); s.Comment = ""; return s }(), "comment", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ruleOf(tt.in, "am-0123456789abcdef", now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(r) {
				t.Fatalf("rule %v", r)
			}
			// Back as a silence: the same matchers (in the handler's order).
			h := &Handler{opts: Options{Now: func() time.Time { return now }}}
			back := h.silenceOf(r)
			for _, m := range tt.in.Matchers {
				if !slices.ContainsFunc(back.Matchers, func(b Matcher) bool { return b.Name == m.Name && b.Value == m.Value && b.IsRegex == m.IsRegex }) {
					t.Errorf("matcher %s lost: %v", m.Name, back.Matchers)
				}
			}
			if back.ID != "am-0123456789abcdef" || back.CreatedBy != "ops" || back.Status.State != "active" || !back.EndsAt.Equal(tt.in.EndsAt) {
				t.Errorf("silence %+v", back)
			}
		})
	}
}
