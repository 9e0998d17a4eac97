package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
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
	testutil.Eventually(t, 30*time.Second, "plugin ls to show the cluster's exec plugin running", func() error {
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

	testutil.Eventually(t, 60*time.Second, "the plugin ran with the event JSON and its key", func() error {
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
	testutil.Eventually(t, 60*time.Second, "the outcome in the explanation, the failure as an event, the plugin's state as an event", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if err := explained(f, "act1", "crit", "notify-exec", "plugin action/exec: SUCCEEDED"); err != nil {
			return err
		}
		failed := ev["act1/action-plugin"]
		if str(failed, "level") != "critical" || !strings.Contains(str(failed, "output"), "plugin action of rule broken-exec (plugin action/exec) failed: FAILED") {
			return fmt.Errorf("action-plugin: %v", failed)
		}
		if st := ev["c1/plugin-action-exec"]; str(st, "level") != "success" {
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

// TestBadActionPlugins: an action plugin that panics inside Execute, and
// one that hangs (stops answering anything), never stop the cluster from
// processing other events: the panic is retried, then raised naming the
// plugin and its panic; the hung plugin is found by its failed health
// probes and replaced; meanwhile a new event still opens its alert.
func TestBadActionPlugins(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "crashy")
	if out, err := exec.Command("go", "build", "-o", src, "../plugins/host/testdata/unyo-check-crashy").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	sum := sha256File(t, src)
	var enabled strings.Builder
	for _, n := range []string{"panic", "hang"} {
		if err := os.Link(src, filepath.Join(dir, "unyo-action-"+n)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&enabled, "      - {kind: action, name: %s, sha256: %s}\n", n, sum)
	}
	f := newFleet(t, fmt.Sprintf("  plugins:\n    dirs: [%s]\n    enabled:\n%s", dir, enabled.String()))
	f.agent("badact1", "{role: badact}", `  checks:
    - name: crit-panic
      spec: {command: [check_dummy, "2", "panic please"], interval: 1s, reissue: 1h}
    - name: crit-hang
      spec: {command: [check_dummy, "2", "hang please"], interval: 1s, reissue: 1h}
`)
	rules := writeFile(t, f.dir, "rules.yaml", `
kind: EventRule
name: panics
spec:
  type: action
  match: {check: "^crit-panic$"}
  actions: [{plugin: {name: panic, config: {mode: panic}}}]
  owner: oncall
  reason: an action plugin that panics
---
kind: EventRule
name: hangs
spec:
  type: action
  match: {check: "^crit-hang$"}
  actions: [{plugin: {name: hang, config: {mode: hang}}}]
  owner: oncall
  reason: an action plugin that hangs
---
kind: EventRule
name: alert-late
spec:
  type: action
  match: {check: "^late$"}
  actions: [{create_alert: {}}]
  owner: oncall
  reason: events keep being processed
`)
	if o, err := f.cli("apply", "-f", rules); err != nil {
		t.Fatalf("apply: %v\n%s", err, o)
	}
	testutil.Eventually(t, 60*time.Second, "the hang plugin hung by its action", func() error {
		pids := procstat.PIDsOf(filepath.Join(dir, "unyo-action-hang"))
		if len(pids) != 1 {
			return fmt.Errorf("hang plugin processes %v, not one stopped", pids)
		}
		if p, _ := procstat.Read(pids[0]); p.State != 'T' {
			return fmt.Errorf("hang plugin processes %v, not one stopped", pids)
		}
		return nil
	})
	// A check that starts failing while the hung plugin holds its action.
	late := writeFile(t, f.dir, "late.yaml", `
kind: Check
name: late
spec:
  command: [check_dummy, "2", "late trouble"]
  interval: 1s
  node_selector: {role: badact}
`)
	if o, err := f.cli("apply", "-f", late); err != nil {
		t.Fatalf("apply: %v\n%s", err, o)
	}
	testutil.Eventually(t, 60*time.Second, "an alert for the late check while an action plugin hangs", func() error {
		if as := f.alertsWhere("badact1", "late"); len(as) != 1 {
			return fmt.Errorf("alerts of late: %v", as)
		}
		return nil
	})
	// The hung plugin's failure is an event of the same node and check, and
	// may come after the panic's: look through the history.
	testutil.Eventually(t, 90*time.Second, "the panicking action raised with the plugin's name and panic", func() error {
		hist, err := f.json("events", "ls", "--history", "--node", "badact1", "--check", "action-plugin")
		if err != nil {
			return err
		}
		want := []string{"plugin action of rule panics (plugin action/panic) failed", "gave up after 3 attempts", "plugin action/panic exited during the call", "panic: crashy was told to panic"}
	events:
		for _, e := range hist {
			for _, w := range want {
				if !strings.Contains(str(e, "output"), w) {
					continue events
				}
			}
			return nil
		}
		return fmt.Errorf("no action-plugin event of badact1 holds all of %q among %d", want, len(hist))
	})
	testutil.Eventually(t, 90*time.Second, "the hung action plugin replaced after failed health probes", func() error {
		p, err := pluginLs(f, "cluster:c1", "action", "hang")
		if err != nil {
			return err
		}
		if r, _ := p["restarts"].(float64); r < 1 || !strings.Contains(str(p, "last_error"), "failed 3 health checks in a row (hung?)") {
			return fmt.Errorf("hang plugin: %v", p)
		}
		return nil
	})
}
