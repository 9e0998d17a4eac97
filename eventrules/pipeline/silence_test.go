package pipeline_test

import (
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestSilence(t *testing.T) {
	t.Parallel()
	rs := rules(t, map[string]string{
		"quiet":   `{"type": "silence", "match": {"node": "lab.*"}, "owner": "ops", "reason": "lab is noisy"}`,
		"expired": `{"type": "silence", "match": {"check": "disk"}, "until": "2026-02-01T00:00:00Z"}`,
		"page":    `{"type": "action", "match": {"levels": ["critical"]}, "actions": [{"create_alert": {}}]}`,
	})
	d := run(state(rs), t0, []*unyov1.Event{ev("a", "lab1", "disk", crit, t0), ev("b", "web1", "disk", crit, t0)})[0]
	want(t, outcomes(d),
		"a silenced | silence(quiet): silenced: no action runs (lab is noisy, owner ops)",
		"b processed | action(page)")
	if d.Explained[0].SilencedBy != "rule:quiet" || d.Explained[1].SilencedBy != "" {
		t.Errorf("silenced by: %q, %q", d.Explained[0].SilencedBy, d.Explained[1].SilencedBy)
	}
	if d.RuleMatches["quiet"] != 1 || d.RuleMatches["expired"] != 0 || len(d.Alerts) != 1 {
		t.Errorf("matches %v, %d alert ops", d.RuleMatches, len(d.Alerts))
	}
}
