package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestActionPlugin: an EventRule action naming the exec action plugin runs
// through the cluster's hook outbox with the idempotency key and the event
// JSON; its outcome is in the event's explanation, and a final failure is
// an event.
func TestActionPlugin(t *testing.T) {
	bin := buildPlugin(t, "../plugins/action-exec", "unyo-action-exec")
	sum := sha256File(t, bin)
	out := filepath.Join(t.TempDir(), "notified")
	marker := filepath.Join(t.TempDir(), "flaky")
	// fail: FAILED; flaky: RETRYABLE (exit 75) the first time, then
	// SUCCEEDED; else append the payload to the file $1.
	script := `case "$1" in
fail) echo boom >&2; exit 1;;
flaky) if [ ! -e "$2" ]; then touch "$2"; exit 75; fi; printf '%s' "$UNYO_IDEMPOTENCY_KEY" > "$2.key"; exit 0;;
esac
printf '%s\n' "$UNYO_IDEMPOTENCY_KEY" >> "$1.keys"; cat >> "$1"`

	f := newFleet(t, fmt.Sprintf(`  plugins:
    dirs: [%s]
    enabled:
      - kind: action
        name: exec
        sha256: %s
        config: {command: [sh, -c, %q, sh]}
`, filepath.Dir(bin), sum, script))
	f.agent("act1", "{role: act}", `  checks:
    - name: crit
      spec: {command: [check_dummy, "2", "it is down"], interval: 1s, reissue: 1h}
    - name: crit2
      spec: {command: [check_dummy, "2", "also down"], interval: 1s, reissue: 1h}
    - name: crit3
      spec: {command: [check_dummy, "2", "flaky"], interval: 1s, reissue: 1h}
`)
	// `unyo plugin ls` through root shows the cluster's action plugin.
	eventually(t, 30*time.Second, "plugin ls to show the cluster's exec plugin running", func() error {
		p, err := pluginLs(f, "cluster:c1", "action", "exec")
		if err != nil {
			return err
		}
		if str(p, "state") != "running" || str(p, "version") == "" {
			return fmt.Errorf("exec plugin: %v", p)
		}
		return nil
	})
	rules := writeFile(t, f.dir, "rules.yaml", fmt.Sprintf(`
kind: EventRule
name: notify-exec
spec:
  type: action
  match: {check: "^crit$"}
  actions:
    - plugin: {name: exec, config: {args: [%q]}}
  owner: oncall
  reason: notify through a plugin
---
kind: EventRule
name: broken-exec
spec:
  type: action
  match: {check: "^crit2$"}
  actions:
    - plugin: {name: exec, config: {args: [fail]}}
  owner: oncall
  reason: a plugin action that fails
---
kind: EventRule
name: flaky-exec
spec:
  type: action
  match: {check: "^crit3$"}
  actions:
    - plugin: {name: exec, config: {args: [flaky, %q]}}
  owner: oncall
  reason: a plugin action that succeeds when retried
`, out, marker))
	if o, err := f.cli("apply", "-f", rules); err != nil {
		t.Fatalf("apply: %v\n%s", err, o)
	}

	eventually(t, 60*time.Second, "the plugin ran with the event JSON and its key", func() error {
		data, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "notify-exec") || !strings.Contains(string(data), "it is down") {
			return fmt.Errorf("payload: %s", data)
		}
		keys, err := os.ReadFile(out + ".keys")
		if err != nil || !strings.HasPrefix(string(keys), "notify-exec/") {
			return fmt.Errorf("keys: %q %v", keys, err)
		}
		return nil
	})
	eventually(t, 60*time.Second, "the outcome in the explanation, the failure as an event, the plugin's state as an event", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if err := explained(f, "act1", "crit", "notify-exec", "plugin action/exec: SUCCEEDED"); err != nil {
			return err
		}
		failed := ev["act1/action-plugin"]
		if str(failed, "level") != "LEVEL_WARNING" || !strings.Contains(str(failed, "output"), "plugin action of rule broken-exec (plugin action/exec) failed: FAILED") {
			return fmt.Errorf("action-plugin: %v", failed)
		}
		if st := ev["c1/plugin-action-exec"]; str(st, "level") != "LEVEL_SUCCESS" {
			return fmt.Errorf("plugin-action-exec: %v", st)
		}
		// RETRYABLE is retried, under a key of its own (the plugin replays
		// every outcome of a key).
		if err := explained(f, "act1", "crit3", "plugin action/exec: SUCCEEDED", "(attempt 2)"); err != nil {
			return err
		}
		if key, err := os.ReadFile(marker + ".key"); err != nil || !strings.HasPrefix(string(key), "flaky-exec/") || !strings.HasSuffix(string(key), "/retry-1") {
			return fmt.Errorf("flaky key: %q %v", key, err)
		}
		return nil
	})
}

// explained finds an event of node/check whose `unyo events get` shows
// every one of want (later results are suppressed by reissue, so it is
// looked for in the history).
func explained(f *fleet, node, check string, want ...string) error {
	hist, err := f.json("events", "ls", "--history", "--node", node, "--check", check)
	if err != nil {
		return err
	}
	var last string
	for _, e := range hist {
		o, err := f.cli("events", "get", str(e, "id"))
		if err != nil {
			return err
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(o, w)
		}
		if ok {
			return nil
		}
		last = o
	}
	return fmt.Errorf("no event of %s/%s explains %q among %d; last:\n%s", node, check, want, len(hist), last)
}
