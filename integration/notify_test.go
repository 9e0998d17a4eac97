package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestNotifyOnChange: with a real webhook receiver, an api_hook notifies
// once when a check starts firing, not on its repeated results, once on a
// level change and exactly once resolved, while the alert's count keeps
// moving; and the README's disks-together aggregate with the default rules
// still opens alerts, its group notifying once per window.
func TestNotifyOnChange(t *testing.T) {
	f := newFleet(t, "")
	pager, chat := newHookReceiver(t), newHookReceiver(t)
	f.applyWithDefaultRules(fmt.Sprintf(`---
kind: EventRule
name: page-flip
spec:
  type: action
  priority: 50
  match: {check: flip, levels: [critical, warning]}
  actions:
    - api_hook: {url: %q, format: alertmanager, repeat_interval: 1h}
  continue: true
  owner: oncall
  reason: test
---
kind: EventRule
name: disks-together
spec:
  type: aggregate
  match: {check: "disk.*", levels: [critical, warning]}
  group_by: [check]
  wait: 3s
  actions: [{api_hook: {url: %q}}]
  owner: storage
  reason: a full array fires on every node at once
`, pager.srv.URL, chat.srv.URL))
	level, set := exitCodeFile(t, f.dir)
	set(2)
	f.agent("web1", "{role: web}", fmt.Sprintf(`  checks:
    - name: flip
      labels: {team: storage}
      spec: {command: [sh, -c, 'c=$(cat %s); echo "FLIP $c"; exit $c'], interval: 1s}
    - name: disk
      spec: {command: [check_dummy, "2", "disk full"], interval: 1s}
`, level))

	// notifications returns what the pager got, as "status severity".
	notifications := func() []string {
		var out []string
		for _, m := range pager.all() {
			as, _ := m["alerts"].([]any)
			if len(as) != 1 {
				t.Fatalf("alertmanager payload with %d alerts: %v", len(as), m)
			}
			a := as[0].(map[string]any)
			labels, _ := a["labels"].(map[string]any)
			out = append(out, fmt.Sprintf("%v %v", a["status"], labels["severity"]))
		}
		return out
	}
	// waitFor waits for the pager to have got want, then for results to
	// keep coming for a few seconds without another notification.
	waitFor := func(what string, want ...string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what, func() error {
			if got := notifications(); strings.Join(got, ", ") != strings.Join(want, ", ") {
				return fmt.Errorf("pager got %q, want %q", got, want)
			}
			return nil
		})
		time.Sleep(4 * time.Second) // four more results
		if got := notifications(); strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("after %s, repeated results notified again: %q", what, got)
		}
	}
	waitFor("one notification when flip goes critical", "firing critical")
	// The check's own labels reach the webhook's labels, beside the node's.
	if labels := pager.all()[0]["alerts"].([]any)[0].(map[string]any)["labels"].(map[string]any); labels["team"] != "storage" || labels["role"] != "web" {
		t.Errorf("webhook labels %v, want the check's team and the node's role", labels)
	}
	count := func() float64 {
		as := f.alertsWhere("web1", "flip")
		if len(as) != 1 {
			t.Fatalf("web1/flip alerts: %v", as)
		}
		n, _ := as[0]["count"].(float64)
		if n == 0 {
			// JSON encodes int64 as a string.
			fmt.Sscan(str(as[0], "count"), &n)
		}
		return n
	}
	if n := count(); n < 4 {
		t.Errorf("the alert's count is %v after about five critical results; it must follow the results, not the notifications", n)
	}

	set(1)
	waitFor("one notification on the level change", "firing critical", "firing warning")
	set(0)
	waitFor("exactly one resolved notification", "firing critical", "firing warning", "resolved warning")

	all := pager.all()
	resolved := all[len(all)-1]["alerts"].([]any)[0].(map[string]any)
	starts, _ := time.Parse(time.RFC3339Nano, resolved["startsAt"].(string))
	ends, _ := time.Parse(time.RFC3339Nano, resolved["endsAt"].(string))
	if !ends.After(starts) || resolved["startsAt"] != all[0]["alerts"].([]any)[0].(map[string]any)["startsAt"] {
		t.Errorf("resolved startsAt %v, endsAt %v: want the firing's start, before the end", resolved["startsAt"], resolved["endsAt"])
	}

	// disks-together grouped web1/disk, and the default rules still
	// opened its alert and keep refreshing it.
	as := f.alertsWhere("web1", "disk")
	if len(as) != 1 || str(as[0], "state") != "open" {
		t.Fatalf("web1/disk alerts with an aggregate rule over it: %v", as)
	}
	testutil.Eventually(t, 30*time.Second, "the group's notification", func() error {
		if chat.count() == 0 {
			return fmt.Errorf("no group notification yet")
		}
		return nil
	})
	ev, err := f.latest()
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.cli("events", "get", str(ev["web1/disk"], "id"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"disks-together", "critical-alerts"} {
		if !strings.Contains(out, want) {
			t.Errorf("the grouped event's explanation does not mention %q:\n%s", want, out)
		}
	}
}
