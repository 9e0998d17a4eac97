package pipeline_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestReissue(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{"page": `{"type": "action", "match": {"levels": ["critical", "warning"]}, "actions": [{"create_alert": {}}]}`})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	hour := time.Hour
	tests := []struct {
		name   string
		events []*unyov1.Event
		want   []string
	}{
		{"a repeat within the window is suppressed",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", crit, at(0)), 0, hour), withOcc(ev("b", "web1", "disk", crit, at(10)), 0, hour)},
			[]string{"a processed", "b suppressed | reissue(): the same critical event was processed at 2026-03-01T12:00:00Z, within its reissue window of 1h0m0s"}},
		{"a repeat after the window is processed",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", crit, at(0)), 0, hour), withOcc(ev("b", "web1", "disk", crit, at(60)), 0, hour)},
			[]string{"a processed", "b processed"}},
		{"a level change is always news",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", warn, at(0)), 0, hour), withOcc(ev("b", "web1", "disk", crit, at(1)), 0, hour), withOcc(ev("c", "web1", "disk", warn, at(2)), 0, hour)},
			[]string{"a processed", "b processed", "c processed"}},
		{"no window: every repeat is processed",
			[]*unyov1.Event{ev("a", "web1", "disk", crit, at(0)), ev("b", "web1", "disk", crit, at(0))},
			[]string{"a processed", "b processed"}},
		{"the window runs from the last processed, not the last suppressed",
			[]*unyov1.Event{withOcc(ev("a", "web1", "disk", crit, at(0)), 0, hour), withOcc(ev("b", "web1", "disk", crit, at(50)), 0, hour), withOcc(ev("c", "web1", "disk", crit, at(61)), 0, hour)},
			[]string{"a processed", "b suppressed", "c processed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantEitherWay(t, rs, tt.events, tt.want...)
		})
	}
}
