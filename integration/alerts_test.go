package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// hookReceiver is a webhook endpoint that records every delivery.
type hookReceiver struct {
	mu   sync.Mutex
	got  []map[string]any
	keys map[string]int
	srv  *httptest.Server
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{keys: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body is not JSON: %s", body)
		}
		h.mu.Lock()
		h.got = append(h.got, m)
		h.keys[r.Header.Get("Idempotency-Key")]++
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

func (h *hookReceiver) all() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.got...)
}

// applyWithDefaultRules applies configs/resources/rules.yaml followed by
// extra (YAML documents starting with ---).
func (f *fleet) applyWithDefaultRules(extra string) {
	f.t.Helper()
	rules, err := os.ReadFile("../configs/resources/rules.yaml")
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.cli("apply", "-f", writeFile(f.t, f.dir, "rules.yaml", string(rules)+extra)); err != nil {
		f.t.Fatal(err)
	}
}

// alertsWhere returns the alerts (any state) for node/check.
func (f *fleet) alertsWhere(node, check string) []map[string]any {
	f.t.Helper()
	items, err := f.json("alerts", "ls", "--all", "--node", node, "--check", check)
	if err != nil {
		f.t.Fatal(err)
	}
	return items
}

func TestAlertsEndToEnd(t *testing.T) {
	f := newFleet(t, "  down_after: 6s\n")
	plain, am := newHookReceiver(t), newHookReceiver(t)
	f.applyWithDefaultRules(fmt.Sprintf(`---
kind: EventRule
name: page-web
spec:
  type: action
  priority: 50
  match: {levels: [critical], node: "web.*"}
  actions:
    - api_hook: {url: %q}
    - api_hook: {url: %q, format: alertmanager}
  continue: true
  owner: oncall
  reason: page for web nodes
`, plain.srv.URL, am.srv.URL))
	failing := func(name, text string) string {
		return fmt.Sprintf("    - name: %s\n      spec: {command: [check_dummy, \"2\", %q], interval: 1s}\n", name, text)
	}
	web := f.agent("web1", "{role: web}", "  checks:\n"+failing("broken", "web1 is broken")+failing("disk", "disk full"))
	f.agent("db1", "{role: db}", "  checks:\n"+failing("disk", "disk full")+failing("raid", "raid degraded"))

	// Failing real plugins become alerts, merged at root from the cluster.
	testutil.Eventually(t, 30*time.Second, "alerts for the failing checks", func() error {
		for _, nc := range [][2]string{{"web1", "broken"}, {"web1", "disk"}, {"db1", "disk"}, {"db1", "raid"}} {
			as := f.alertsWhere(nc[0], nc[1])
			if len(as) != 1 || str(as[0], "state") != "open" || str(as[0], "level") != "critical" {
				return fmt.Errorf("%s/%s: %v", nc[0], nc[1], as)
			}
		}
		return nil
	})
	// The webhook receivers got them, in both payload forms.
	testutil.Eventually(t, 30*time.Second, "webhook deliveries", func() error {
		if plain.count() == 0 || am.count() == 0 {
			return fmt.Errorf("unyo form %d, alertmanager form %d", plain.count(), am.count())
		}
		return nil
	})
	for _, m := range plain.all() {
		evs, _ := m["events"].([]any)
		if m["version"] != "unyo.v1" || len(evs) != 1 || !strings.HasPrefix(str(evs[0].(map[string]any), "node"), "web") {
			t.Errorf("unyo webhook payload: %v", m)
		}
	}
	for _, m := range am.all() {
		alerts, _ := m["alerts"].([]any)
		if m["version"] != "4" || m["status"] != "firing" || len(alerts) != 1 {
			t.Fatalf("alertmanager webhook payload: %v", m)
		}
		labels := alerts[0].(map[string]any)["labels"].(map[string]any)
		if labels["node"] != "web1" || labels["alertname"] == nil {
			t.Errorf("alertmanager labels: %v", labels)
		}
	}

	// An event's explanation names the rules that acted.
	ev, err := f.latest()
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.cli("events", "get", str(ev["web1/broken"], "id"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Explanation:", "critical-alerts", "page-web", "api_hook"} {
		if !strings.Contains(out, want) {
			t.Errorf("events get does not mention %q:\n%s", want, out)
		}
	}

	// Maintenance silences exactly its scope and says which one did it.
	if _, err := f.cli("maintenance", "start", "--name", "raid-swap", "--nodes", "db1", "--checks", "raid", "--reason", "replacing a disk", "--owner", "bob"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "db1/raid events silenced by the maintenance", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if got := str(ev["db1/raid"], "silenced_by"); got != "maintenance:raid-swap" {
			return fmt.Errorf("db1/raid silenced_by %q", got)
		}
		return nil
	})
	ev, _ = f.latest()
	for _, k := range []string{"db1/disk", "web1/disk"} {
		if s := str(ev[k], "silenced_by"); s != "" {
			t.Errorf("%s is outside the maintenance's scope but silenced by %s", k, s)
		}
	}
	maint, err := f.cli("maintenance", "ls")
	if err != nil || !strings.Contains(maint, "raid-swap") || !strings.Contains(maint, "active") {
		t.Errorf("maintenance ls: %v\n%s", err, maint)
	}
	if _, err := f.cli("maintenance", "end", "raid-swap", "--by", "bob"); err != nil {
		t.Fatal(err)
	}
	if maint, _ = f.cli("maintenance", "ls"); !strings.Contains(maint, "ended") {
		t.Errorf("an ended maintenance stays listed as ended:\n%s", maint)
	}

	// Operators acknowledge and close; closing needs a reason.
	id := str(f.alertsWhere("db1", "disk")[0], "id")
	if _, err := f.cli("alerts", "ack", id, "--by", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli("alerts", "close", id, "--by", "alice"); err == nil {
		t.Error("closing without a reason was accepted")
	}
	if _, err := f.cli("alerts", "close", id, "--by", "alice", "--reason", "known issue, ticket 42"); err != nil {
		t.Fatal(err)
	}
	detail, err := f.cli("alerts", "get", id)
	// With authentication the token says who acted, not --by.
	if err != nil || !strings.Contains(detail, "ticket 42") || !strings.Contains(detail, "admin-token-") || strings.Contains(detail, "alice") {
		t.Errorf("alerts get shows who closed it and why: %v\n%s", err, detail)
	}
	screen, err := f.cli("alerts", "watch", "--once")
	if err != nil || !strings.Contains(screen, "web1") || strings.Contains(screen, id) {
		t.Errorf("alerts watch: %v\n%s", err, screen)
	}

	// An agent killed: its node turns Stale, then Down, and that is an alert.
	web.kill()
	testutil.Eventually(t, 60*time.Second, "web1 Down and alerted", func() error {
		nodes, err := f.json("nodes", "get", "web1")
		if err != nil {
			return err
		}
		if st := str(nodes[0], "state"); st != "down" {
			return fmt.Errorf("web1 is %s", st)
		}
		as := f.alertsWhere("web1", "node-liveness")
		if len(as) != 1 || str(as[0], "state") != "open" {
			return fmt.Errorf("node-liveness alerts: %v", as)
		}
		return nil
	})
	h, err := f.json("events", "ls", "--history", "--node", "web1", "--check", "node-liveness")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for i := len(h) - 1; i >= 0; i-- {
		seen = append(seen, str(h[i], "level"))
	}
	if strings.Join(seen, ",") != "warning,critical" {
		t.Errorf("liveness events of web1: %v, want Stale (warning) then Down (critical)", seen)
	}
	// It comes back: two heartbeats make it Ready and resolve the alert.
	web.restart()
	testutil.Eventually(t, 60*time.Second, "web1 Ready and its alert resolved", func() error {
		nodes, err := f.json("nodes", "get", "web1")
		if err != nil {
			return err
		}
		if st := str(nodes[0], "state"); st != "ready" {
			return fmt.Errorf("web1 is %s", st)
		}
		if as := f.alertsWhere("web1", "node-liveness"); len(as) != 1 || str(as[0], "state") != "resolved" {
			return fmt.Errorf("node-liveness alerts: %v", as)
		}
		return nil
	})
}
