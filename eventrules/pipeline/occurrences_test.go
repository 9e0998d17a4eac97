package pipeline_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestOccurrences(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{"page": `{"type": "action", "match": {"levels": ["critical", "warning"]}, "actions": [{"create_alert": {}}]}`})
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	tests := []struct {
		name   string
		events []*unyov1.Event
		want   []string
	}{
		{"every result raises without occurrences",
			[]*unyov1.Event{ev("a", "web1", "disk", crit, at(0))},
			[]string{"a processed"}},
		{"three critical in a row raise on the third",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", crit, at(0)), 3, 0), withOcc(ev("b", "web1", "disk", crit, at(1)), 3, 0), withOcc(ev("c", "web1", "disk", crit, at(2)), 3, 0)},
			[]string{"a pending | occurrences(): 1 of 3 consecutive critical results", "b pending | occurrences(): 2 of 3", "c processed"}},
		{"a level change starts again",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", warn, at(0)), 2, 0), withOcc(ev("b", "web1", "disk", crit, at(1)), 2, 0), withOcc(ev("c", "web1", "disk", crit, at(2)), 2, 0)},
			[]string{"a pending | occurrences(): 1 of 2 consecutive warning", "b pending | occurrences(): 1 of 2 consecutive critical", "c processed"}},
		{"success always raises",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", ok, at(0)), 5, 0)},
			[]string{"a processed"}},
		{"node/checks count apart",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", crit, at(0)), 2, 0), withOcc(ev("b", "web2", "disk", crit, at(0)), 2, 0), withOcc(ev("c", "web1", "disk", crit, at(1)), 2, 0)},
			[]string{"a pending", "b pending", "c processed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantEitherWay(t, rs, tt.events, tt.want...)
		})
	}
}
