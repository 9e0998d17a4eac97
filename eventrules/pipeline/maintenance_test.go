package pipeline_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestMaintenanceScope(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{"page": `{"type": "action", "match": {"levels": ["critical"]}, "actions": [{"create_alert": {}}]}`})
	end := t0.Add(time.Hour).Format(time.RFC3339)
	w := window(t, "swap-disks", `{"nodes": ["db.*"], "checks": ["disk"], "owner": "ops", "reason": "swap", "end": "`+end+`"}`)
	tests := []struct {
		name     string
		e        *unyov1.Event
		silenced bool
	}{
		{"in scope", ev("a", "db1", "disk", crit, t0.Add(time.Minute)), true},
		{"other check", ev("b", "db1", "load", crit, t0.Add(time.Minute)), false},
		{"other node", ev("c", "web1", "disk", crit, t0.Add(time.Minute)), false},
		{"after the end, by event time", ev("d", "db1", "disk", crit, t0.Add(2*time.Hour)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := run(state(rs, w), t0, []*unyov1.Event{tt.e})[0]
			got := outcomes(d)
			if tt.silenced {
				want(t, got, tt.e.Id+" silenced | maintenance(swap-disks): silenced by maintenance swap-disks: no action runs")
				if d.Explained[0].SilencedBy != "maintenance:swap-disks" || d.MaintenanceSilenced["swap-disks"] != 1 || len(d.Alerts) != 0 {
					t.Errorf("silenced by %q, counts %v, %d alert ops", d.Explained[0].SilencedBy, d.MaintenanceSilenced, len(d.Alerts))
				}
				return
			}
			want(t, got, tt.e.Id+" processed | action(page)")
		})
	}
}
