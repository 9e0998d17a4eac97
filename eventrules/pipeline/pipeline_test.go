package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// TestStageOrder: occurrences, reissue, silence, maintenance, aggregate,
// actions; the first stage that stops an event decides its outcome.
func TestStageOrder(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{
		"quiet": `{"type": "silence", "match": {"node": "lab1"}}`,
		"disk":  groupRule,
		"page":  `{"type": "action", "match": {"levels": ["critical"]}, "actions": [{"create_alert": {}}]}`,
	})
	w := window(t, "swap", `{"nodes": ["db1"], "owner": "ops", "reason": "swap"}`)
	st := state(rs, w)
	d := run(st, t0, []*unyov1.Event{
		withOcc(ev("pending", "lab1", "disk", crit, t0), 2, 0),            // occurrences before silence
		ev("silenced", "lab1", "disk", crit, t0),                          // silence before aggregate
		ev("maintenance", "db1", "disk", crit, t0),                        // maintenance before aggregate
		ev("grouped", "web1", "disk", crit, t0),                           // aggregate before actions
		ev("processed", "web1", "load", crit, t0),                         // actions
		withOcc(ev("suppressed", "web1", "load", crit, t0), 0, time.Hour), // reissue before actions
	})[0]
	want(t, outcomes(d), "pending pending", "silenced silenced", "maintenance silenced", "grouped grouped", "processed processed", "suppressed suppressed")
}

// TestMultiStageStops: the first stage that stops an event ends its walk.
func TestMultiStageStops(t *testing.T) {
	t.Parallel()
	var ran []string
	ms := pipeline.MultiStage{stage{"a", true, &ran}, stage{"b", false, &ran}, stage{"c", true, &ran}}
	if ms.Process(state(nil), pipeline.NewDecision(), &pipeline.Event{Event: &unyov1.Event{}}) {
		t.Error("the walk went on after b stopped it")
	}
	if strings.Join(ran, ",") != "a,b" {
		t.Errorf("ran %v", ran)
	}
}

type stage struct {
	name string
	goOn bool
	ran  *[]string
}

func (s stage) Process(*pipeline.State, *pipeline.Decision, *pipeline.Event) bool {
	*s.ran = append(*s.ran, s.name)
	return s.goOn
}

// BenchmarkDecide is the stages' cost per event, without a store: 100
// rules, 40 checks on 8 nodes, mostly successes.
func BenchmarkDecide(b *testing.B) {
	specs := map[string]string{
		"resolve": `{"type": "action", "priority": 100, "match": {"levels": ["success"]}, "actions": [{"delete_alert": {}}], "continue": true}`,
	}
	for i := range 96 {
		specs[fmt.Sprintf("act-%02d", i)] = fmt.Sprintf(`{"type": "action", "priority": %d, "match": {"check": "check-%d", "levels": ["critical", "warning"]}, "actions": [{"create_alert": {}}]}`, i%7, i%40)
	}
	for i := range 3 {
		specs[fmt.Sprintf("quiet-%d", i)] = fmt.Sprintf(`{"type": "silence", "match": {"node": "maint-%d.*"}}`, i)
	}
	st := state(rules(b, specs))
	levels := []unyov1.Level{ok, ok, ok, ok, ok, ok, ok, warn, warn, crit}
	batch := make([]*unyov1.Event, 1000)
	for i := range batch {
		batch[i] = ev(fmt.Sprint(i), fmt.Sprintf("node-%d", i%8), fmt.Sprintf("check-%d", i%40), levels[i%len(levels)], t0)
	}
	p := pipeline.New()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(batch) {
		st.Apply(p.Decide(st, batch, t0))
	}
}
