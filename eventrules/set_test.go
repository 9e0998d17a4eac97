package eventrules_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

func names(rules []eventrules.Rule) string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return strings.Join(out, " ")
}

func prio(s *unyov1.EventRuleSpec, p int32) *unyov1.EventRuleSpec {
	s.Priority = p
	return s
}

func cont(s *unyov1.EventRuleSpec) *unyov1.EventRuleSpec {
	s.Continue = true
	return s
}

func TestNewSetOrder(t *testing.T) {
	m := &unyov1.EventMatch{Node: ".*"}
	in := []eventrules.Rule{
		mustCompile(t, "c", prio(spec("filter", m), 0)),
		mustCompile(t, "b", prio(spec("action", m), 10)),
		mustCompile(t, "a", prio(spec("silence", m), 0)),
		mustCompile(t, "z", prio(spec("aggregate", m), 10)),
		mustCompile(t, "low", prio(spec("action", m), -3)),
	}
	orig := names(in)
	s := eventrules.NewSet(in)
	if got, want := names(s.Rules()), "b z a c low"; got != want {
		t.Errorf("Rules() = %s, want %s", got, want)
	}
	if s.Len() != 5 {
		t.Errorf("Len() = %d", s.Len())
	}
	if names(in) != orig {
		t.Error("NewSet reordered its argument")
	}
	rules := s.Rules()
	rules[0].Name = "changed"
	if s.Rules()[0].Name != "b" {
		t.Error("Rules() returned the set's own slice")
	}
}

func TestSetFirstOfType(t *testing.T) {
	web := &unyov1.EventMatch{Node: "web.*"}
	web1 := &unyov1.EventMatch{Node: "web1"}
	db := &unyov1.EventMatch{Node: "db.*"}
	expired := spec("silence", web)
	expired.Until = "2026-05-01T00:00:00Z"
	expired.Priority = 100
	s := eventrules.NewSet([]eventrules.Rule{
		mustCompile(t, "f-db", prio(spec("filter", db), 50)),
		mustCompile(t, "f-web1", prio(spec("filter", web1), 10)),
		mustCompile(t, "f-web", prio(spec("filter", web), 10)),
		mustCompile(t, "s-expired", expired),
		mustCompile(t, "s-web", prio(spec("silence", web), 1)),
		mustCompile(t, "g-db", prio(spec("aggregate", db), 9)),
		mustCompile(t, "g-web", prio(spec("aggregate", web), 0)),
		mustCompile(t, "act-web", prio(spec("action", web), 1000)),
	})
	tests := []struct {
		name   string
		decide func(*unyov1.Event, time.Time) (eventrules.Rule, bool)
		event  *unyov1.Event
		want   string // "" for no rule
	}{
		{"filter skips a non-matching higher rule", s.Filter, event("web1", "disk", critical), "f-web"},
		{"filter tie broken by name", s.Filter, event("web1", "disk", critical), "f-web"},
		{"filter on other node", s.Filter, event("web2", "disk", critical), "f-web"},
		{"filter highest priority", s.Filter, event("db1", "disk", critical), "f-db"},
		{"no filter", s.Filter, event("lb1", "disk", critical), ""},
		{"silence skips an expired rule", s.Silence, event("web1", "disk", critical), "s-web"},
		{"no silence", s.Silence, event("db1", "disk", critical), ""},
		{"aggregate", s.Aggregate, event("web1", "disk", critical), "g-web"},
		{"aggregate other", s.Aggregate, event("db1", "disk", critical), "g-db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := tt.decide(tt.event, now)
			if got := r.Name; got != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestSetActions(t *testing.T) {
	m := func(node string) *unyov1.EventMatch { return &unyov1.EventMatch{Node: node} }
	tests := []struct {
		name  string
		rules []*unyov1.EventRuleSpec
		node  string
		want  string
	}{
		{
			name:  "highest priority first, stop without continue",
			rules: []*unyov1.EventRuleSpec{prio(spec("action", m(".*")), 1), prio(spec("action", m(".*")), 5), prio(spec("action", m(".*")), 3)},
			want:  "r1",
		},
		{
			name:  "ties by name",
			rules: []*unyov1.EventRuleSpec{spec("action", m(".*")), spec("action", m(".*"))},
			want:  "r0",
		},
		{
			name: "continue chain",
			rules: []*unyov1.EventRuleSpec{
				cont(prio(spec("action", m(".*")), 3)), cont(prio(spec("action", m(".*")), 2)),
				prio(spec("action", m(".*")), 1), prio(spec("action", m(".*")), 0),
			},
			want: "r0 r1 r2",
		},
		{
			name: "continue to the end",
			rules: []*unyov1.EventRuleSpec{
				cont(prio(spec("action", m(".*")), 2)), cont(prio(spec("action", m(".*")), 1)),
			},
			want: "r0 r1",
		},
		{
			// The seeds stopped at the first rule that did not match.
			name: "a non-matching rule does not stop the walk",
			rules: []*unyov1.EventRuleSpec{
				prio(spec("action", m("db.*")), 9), cont(prio(spec("action", m("web.*")), 8)),
				prio(spec("action", m("db.*")), 7), prio(spec("action", m("web1")), 6), prio(spec("action", m(".*")), 5),
			},
			node: "web1",
			want: "r1 r3",
		},
		{
			name:  "the first match is taken even at low priority",
			rules: []*unyov1.EventRuleSpec{prio(spec("action", m("db.*")), 9), prio(spec("action", m("lb.*")), 8), prio(spec("action", m(".*")), -100)},
			want:  "r2",
		},
		{
			name:  "other types are not actions",
			rules: []*unyov1.EventRuleSpec{prio(spec("filter", m(".*")), 9), prio(spec("aggregate", m(".*")), 9), spec("action", m(".*"))},
			want:  "r2",
		},
		{
			name:  "no match",
			rules: []*unyov1.EventRuleSpec{spec("action", m("db.*"))},
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []eventrules.Rule
			for i, s := range tt.rules {
				rules = append(rules, mustCompile(t, fmt.Sprintf("r%d", i), s))
			}
			node := tt.node
			if node == "" {
				node = "web1"
			}
			got := eventrules.NewSet(rules).Actions(event(node, "disk", critical), now)
			if names(got) != tt.want {
				t.Errorf("Actions = [%s], want [%s]", names(got), tt.want)
			}
		})
	}
}

func TestNilAndEmptySet(t *testing.T) {
	for name, s := range map[string]*eventrules.Set{"nil": nil, "empty": eventrules.NewSet(nil)} {
		e := event("w", "d", critical)
		if _, ok := s.Filter(e, now); ok {
			t.Errorf("%s: Filter matched", name)
		}
		if _, ok := s.Silence(e, now); ok {
			t.Errorf("%s: Silence matched", name)
		}
		if _, ok := s.Aggregate(e, now); ok {
			t.Errorf("%s: Aggregate matched", name)
		}
		if got := s.Actions(e, now); len(got) != 0 {
			t.Errorf("%s: Actions = %v", name, got)
		}
		if s.Len() != 0 || len(s.Rules()) != 0 {
			t.Errorf("%s: not empty", name)
		}
	}
}

// benchRules builds n rules that look like a real cluster's: mostly plain
// node and check names, some prefix and alternation patterns, levels on
// most rules, labels and message patterns on a few.
func benchRules(tb testing.TB, n int, types []string) []eventrules.Rule {
	rng := rand.New(rand.NewPCG(1, 2))
	checks := []string{"disk", "cpu", "load", "mem", "http", "ntp", "swap", "raid"}
	var rules []eventrules.Rule
	for i := range n {
		m := &unyov1.EventMatch{}
		switch i % 5 {
		case 0:
			m.Node = fmt.Sprintf("web%d", rng.IntN(200))
		case 1:
			m.Node = fmt.Sprintf("(db|cache)%d", rng.IntN(50))
		case 2:
			m.Node = "web.*"
			m.Check = checks[rng.IntN(len(checks))]
		case 3:
			m.Check = checks[rng.IntN(len(checks))] + "|" + checks[rng.IntN(len(checks))]
			m.Labels = map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(10))}
		case 4:
			m.Message = fmt.Sprintf(".*(timeout|refused) on port %d.*", 8000+rng.IntN(100))
		}
		if i%4 != 0 {
			m.Levels = []string{"warning", "critical"}
		}
		typ := types[i%len(types)]
		s := spec(typ, m)
		s.Priority = int32(rng.IntN(10))
		s.Continue = typ == "action" && i%3 == 0
		rules = append(rules, mustCompile(tb, fmt.Sprintf("rule-%03d", i), s))
	}
	return rules
}

// benchEvents are mostly successes, as in a healthy cluster.
func benchEvents(n int) []*unyov1.Event {
	rng := rand.New(rand.NewPCG(3, 4))
	checks := []string{"disk", "cpu", "load", "mem", "http", "ntp", "swap", "raid"}
	outputs := []string{
		"DISK OK - free space: / 41% (12 GB)",
		"HTTP CRITICAL - connection refused on port 8080 after 10.001 s",
		"LOAD WARNING - load average: 7.10, 6.80, 6.50",
		"OK - everything is fine",
	}
	levels := []unyov1.Level{success, success, success, success, success, success, warning, critical}
	var events []*unyov1.Event
	for range n {
		node := fmt.Sprintf("web%d", rng.IntN(200))
		if rng.IntN(3) == 0 {
			node = fmt.Sprintf("db%d", rng.IntN(50))
		}
		events = append(events, &unyov1.Event{
			Cluster: "tokyo",
			Node:    node,
			Check:   checks[rng.IntN(len(checks))],
			Level:   levels[rng.IntN(len(levels))],
			Output:  outputs[rng.IntN(len(outputs))],
			Labels:  map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(10)), "role": "web", "zone": "tokyo-a"},
		})
	}
	return events
}

// One benchmark iteration is one event, so ns/op is ns/event.

// BenchmarkSetActions100Rules is the worst case for Actions: 100 action
// rules, every one tested for every event that matches none of them.
func BenchmarkSetActions100Rules(b *testing.B) {
	s := eventrules.NewSet(benchRules(b, 100, []string{"action"}))
	events := benchEvents(1024)
	matched := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		matched += len(s.Actions(events[i%len(events)], now))
	}
	_ = matched
}

// BenchmarkSetPipeline100Rules takes every decision the pipeline takes for
// one event with 100 rules of all types.
func BenchmarkSetPipeline100Rules(b *testing.B) {
	s := eventrules.NewSet(benchRules(b, 100, []string{"filter", "silence", "aggregate", "action", "action"}))
	events := benchEvents(1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := events[i%len(events)]
		if _, ok := s.Filter(e, now); ok {
			continue
		}
		if _, ok := s.Silence(e, now); ok {
			continue
		}
		if _, ok := s.Aggregate(e, now); ok {
			continue
		}
		s.Actions(e, now)
	}
}

func TestBenchRulesMatchSomething(t *testing.T) {
	// Keep the benchmark honest: its events must exercise matches, not only
	// rejections.
	s := eventrules.NewSet(benchRules(t, 100, []string{"action"}))
	hits := 0
	for _, e := range benchEvents(1024) {
		hits += len(s.Actions(e, now))
	}
	if hits == 0 || hits == 1024*100 {
		t.Errorf("benchmark events hit %d rules", hits)
	}
}

// The pipeline shares one Set between its workers; run under -race.
func TestSetConcurrentUse(t *testing.T) {
	s := eventrules.NewSet(benchRules(t, 100, []string{"filter", "silence", "aggregate", "action"}))
	events := benchEvents(200)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i, e := range events {
				if i%4 != w {
					continue
				}
				s.Filter(e, now)
				s.Silence(e, now)
				if r, ok := s.Aggregate(e, now); ok {
					eventrules.GroupKey(r, e)
				}
				for _, r := range s.Actions(e, now) {
					for _, a := range r.Actions {
						if a.CreateAlert != nil {
							if _, err := a.CreateAlert.Key(e); err != nil {
								t.Error(err)
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
}
