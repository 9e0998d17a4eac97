package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/amtest"
)

// TestAlertmanagerPush: an api_hook of format alertmanager_push posts
// PostableAlerts to a real Alertmanager, which accepts them (the old
// "alertmanager" webhook payload got 400), re-sends the firing alert every
// repeat_interval (Alertmanager's endsAt moves on), and resolves it when the
// check recovers (Alertmanager no longer lists it as active).
func TestAlertmanagerPush(t *testing.T) {
	am := amtest.Start(t)
	f := newFleet(t, "")
	f.applyWithDefaultRules(fmt.Sprintf(`---
kind: EventRule
name: push-am
spec:
  type: action
  priority: 50
  match: {check: flip}
  actions:
    - api_hook: {url: %q, format: alertmanager_push, repeat_interval: 2s}
  continue: true
  owner: oncall
  reason: test
`, am.URL+"/api/v2/alerts"))
	level := filepath.Join(f.dir, "flip-level")
	set := func(code int) {
		t.Helper()
		if err := os.WriteFile(level, []byte(fmt.Sprint(code)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set(2)
	f.agent("web1", "{role: web}", fmt.Sprintf(`  checks:
    - name: flip
      spec: {command: [sh, -c, 'c=$(cat %s); echo "FLIP $c"; exit $c'], interval: 1s}
`, level))

	ctx := context.Background()
	firing := func() (amtest.Alert, error) {
		as, err := am.Alerts(ctx)
		if err != nil {
			return amtest.Alert{}, err
		}
		for _, a := range as {
			if a.Labels["alertname"] == "flip" {
				return a, nil
			}
		}
		return amtest.Alert{}, fmt.Errorf("no flip alert in Alertmanager: %v", as)
	}
	var first amtest.Alert
	testutil.Eventually(t, 30*time.Second, "Alertmanager to hold the pushed alert", func() error {
		a, err := firing()
		if err != nil {
			return err
		}
		if a.Labels["node"] != "web1" || a.Labels["cluster"] != "c1" || a.Labels["severity"] != "critical" || a.Annotations["summary"] != "FLIP 2" {
			return fmt.Errorf("alert %+v", a)
		}
		first = a
		return nil
	})
	testutil.Eventually(t, 30*time.Second, "the firing alert to be re-sent", func() error {
		a, err := firing()
		if err != nil {
			return err
		}
		if !a.EndsAt.After(first.EndsAt) {
			return fmt.Errorf("endsAt still %s", a.EndsAt)
		}
		if !a.StartsAt.Equal(first.StartsAt) {
			return fmt.Errorf("startsAt moved from %s to %s", first.StartsAt, a.StartsAt)
		}
		return nil
	})
	set(0)
	testutil.Eventually(t, 30*time.Second, "Alertmanager to resolve the alert", func() error {
		if a, err := firing(); err == nil {
			return fmt.Errorf("still active: %+v", a)
		}
		return nil
	})
}
