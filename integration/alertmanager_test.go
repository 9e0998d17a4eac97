package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	level, set := exitCodeFile(t, f.dir)
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

// TestAmtool: Debian's amtool, pointed at root and at the cluster with a
// bearer token, lists unyo's alerts (with a filter), creates a silence
// that becomes an unyo silence rule with its author and comment, which
// then silences the check's results, and expires it.
func TestAmtool(t *testing.T) {
	amtool := testutil.NeedTool(t, "amtool", "apt-get install -y prometheus-alertmanager", "amtool")
	f := newFleet(t, "")
	f.applyWithDefaultRules("")
	f.agent("web1", "{role: web}", `  checks:
    - name: flip
      spec: {command: [sh, -c, 'echo "FLIP down"; exit 2'], interval: 1s}
    - name: calm
      spec: {command: [sh, -c, 'echo "CALM down"; exit 2'], interval: 1s}
`)
	httpCfg := writeFile(t, f.dir, "amtool-http.yaml", "authorization:\n  type: Bearer\n  credentials: "+adminToken+"\n")
	run := func(url string, args ...string) (string, error) {
		t.Helper()
		args = append([]string{"--alertmanager.url=" + url, "--http.config.file=" + httpCfg}, args...)
		// stdout only: amtool warns on stderr that unyo's version is not
		// an Alertmanager version.
		var stderr strings.Builder
		cmd := exec.Command(amtool, args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), fmt.Errorf("amtool %s: %w: %s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out), nil
	}
	for _, url := range []string{f.rootURL, f.clURL} {
		testutil.Eventually(t, 30*time.Second, "amtool to list the alerts at "+url, func() error {
			out, err := run(url, "alert", "query", "node=web1")
			if err != nil {
				return err
			}
			if !strings.Contains(out, "flip") || !strings.Contains(out, "calm") || !strings.Contains(out, "FLIP down") {
				return fmt.Errorf("alert query: %s", out)
			}
			return nil
		})
	}
	out, err := run(f.rootURL, "alert", "query", "alertname=flip")
	if err != nil || !strings.Contains(out, "flip") || strings.Contains(out, "calm") {
		t.Fatalf("alert query alertname=flip: %v\n%s", err, out)
	}
	if _, err := exec.Command(amtool, "--alertmanager.url="+f.rootURL, "alert", "query").CombinedOutput(); err == nil {
		t.Fatal("amtool without a token listed alerts")
	}

	out, err = run(f.rootURL, "silence", "add", "alertname=flip", "node=web1", "--author=ops", "--comment=disk swap", "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if !strings.HasPrefix(id, "am-") {
		t.Fatalf("silence add printed %q", out)
	}
	rule, err := f.cli("get", "rule", id, "-o", "yaml")
	if err != nil || !strings.Contains(rule, "type: silence") || !strings.Contains(rule, "owner: ops") || !strings.Contains(rule, "reason: disk swap") || !strings.Contains(rule, "check: flip") {
		t.Fatalf("the silence's rule: %v\n%s", err, rule)
	}
	testutil.Eventually(t, 30*time.Second, "the cluster to silence flip", func() error {
		latest, err := f.latest()
		if err != nil {
			return err
		}
		ev := latest["web1/flip"]
		if ev == nil || ev["silenced_by"] != "rule:"+id {
			return fmt.Errorf("latest flip event: %v", ev)
		}
		return nil
	})
	// Silenced, flip's alert is suppressed and says by what; calm's is not.
	for _, url := range []string{f.rootURL, f.clURL} {
		testutil.Eventually(t, 30*time.Second, "amtool to show flip silenced at "+url, func() error {
			out, err := run(url, "alert", "query", "node=web1")
			if err != nil || strings.Contains(out, "flip") || !strings.Contains(out, "calm") {
				return fmt.Errorf("alert query (active only): %v %s", err, out)
			}
			out, err = run(url, "alert", "query", "--silenced", "node=web1")
			if err != nil || !strings.Contains(out, "flip") || strings.Contains(out, "calm") {
				return fmt.Errorf("alert query --silenced: %v %s", err, out)
			}
			out, err = run(url, "-o", "json", "alert", "query", "--silenced", "--active", "node=web1")
			if err != nil {
				return err
			}
			var as []struct {
				Labels map[string]string
				Status struct {
					State       string
					SilencedBy  []string
					InhibitedBy []string
				}
			}
			if err := json.Unmarshal([]byte(out), &as); err != nil {
				return fmt.Errorf("alert query -o json: %w: %s", err, out)
			}
			states := map[string]string{}
			for _, a := range as {
				states[a.Labels["alertname"]] = fmt.Sprintf("%s %v %v", a.Status.State, a.Status.SilencedBy, a.Status.InhibitedBy)
			}
			if want := map[string]string{"flip": "suppressed [" + id + "] []", "calm": "active [] []"}; fmt.Sprint(states) != fmt.Sprint(want) {
				return fmt.Errorf("alert statuses %v, want %v", states, want)
			}
			return nil
		})
	}
	// karma cannot be installed here (not in Debian, npm's "karma" is a test
	// runner, and the Go module proxy refuses github.com/prymitive/karma):
	// the requests it makes, with the fields Alertmanager's OpenAPI spec
	// marks required in each answer.
	for _, url := range []string{f.rootURL, f.clURL} {
		testutil.Eventually(t, 30*time.Second, "karma's requests answered at "+url, func() error {
			return karmaShapes(url, id)
		})
	}
	for _, url := range []string{f.rootURL, f.clURL} {
		testutil.Eventually(t, 30*time.Second, "amtool to list the silence at "+url, func() error {
			out, err := run(url, "silence", "query", "alertname=flip")
			if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "ops") || !strings.Contains(out, "disk swap") {
				return fmt.Errorf("silence query: %v %s", err, out)
			}
			return nil
		})
	}
	if _, err := run(f.rootURL, "silence", "expire", id); err != nil {
		t.Fatal(err)
	}
	out, err = run(f.rootURL, "silence", "query", "-q")
	if err != nil || strings.Contains(out, id) {
		t.Fatalf("after expire, silence query: %v\n%s", err, out)
	}
	if _, err := f.cli("get", "rule", id); err == nil {
		t.Fatalf("the silence's rule %s outlived its expiry", id)
	}
	testutil.Eventually(t, 30*time.Second, "flip active again once its next result is not silenced", func() error {
		out, err := run(f.rootURL, "alert", "query", "alertname=flip")
		if err != nil || !strings.Contains(out, "flip") {
			return fmt.Errorf("alert query: %v %s", err, out)
		}
		return nil
	})
	out, err = run(f.rootURL, "config", "show")
	if err != nil || !strings.Contains(out, "unyo") {
		t.Fatalf("config show (status): %v\n%s", err, out)
	}
}

// exitCodeFile is a file in dir that a check's command reads its exit
// code from (sh -c 'exit $(cat FILE)'), and the function that sets it.
func exitCodeFile(t *testing.T, dir string) (string, func(code int)) {
	path := filepath.Join(dir, "flip-level")
	return path, func(code int) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprint(code)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// karmaShapes makes karma's requests to an Alertmanager API at url (the
// status, the silences, and the alert groups with every alert) and checks
// each answer has what Alertmanager's OpenAPI spec marks required, and that
// the groups hold an alert silenced by silence.
func karmaShapes(url, silence string) error {
	get := func(path string, into any) error {
		req, err := http.NewRequest(http.MethodGet, url+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("GET %s: %w: %s", path, err, body)
		}
		return nil
	}
	need := func(what string, m map[string]any, keys ...string) error {
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("%s lacks %q: %v", what, k, m)
			}
		}
		return nil
	}
	var status map[string]any
	if err := get("/api/v2/status", &status); err != nil {
		return err
	}
	if err := need("status", status, "cluster", "versionInfo", "config", "uptime"); err != nil {
		return err
	}
	var silences []map[string]any
	if err := get("/api/v2/silences", &silences); err != nil {
		return err
	}
	found := false
	for _, sl := range silences {
		if err := need("silence", sl, "id", "matchers", "startsAt", "endsAt", "createdBy", "comment", "status", "updatedAt"); err != nil {
			return err
		}
		found = found || sl["id"] == silence
	}
	if !found {
		return fmt.Errorf("silence %s not listed: %v", silence, silences)
	}
	var groups []map[string]any
	if err := get("/api/v2/alerts/groups?active=true&silenced=true&inhibited=true&unprocessed=true", &groups); err != nil {
		return err
	}
	silenced := 0
	for _, g := range groups {
		if err := need("alert group", g, "labels", "receiver", "alerts"); err != nil {
			return err
		}
		if r, _ := g["receiver"].(map[string]any); r["name"] == nil {
			return fmt.Errorf("alert group's receiver has no name: %v", g)
		}
		alerts, _ := g["alerts"].([]any)
		for _, a := range alerts {
			am, _ := a.(map[string]any)
			if err := need("alert", am, "labels", "annotations", "receivers", "fingerprint", "startsAt", "updatedAt", "endsAt", "status"); err != nil {
				return err
			}
			st, _ := am["status"].(map[string]any)
			if err := need("alert status", st, "state", "silencedBy", "inhibitedBy"); err != nil {
				return err
			}
			if by, _ := st["silencedBy"].([]any); st["state"] == "suppressed" && len(by) == 1 && by[0] == silence {
				silenced++
			}
		}
	}
	if silenced == 0 {
		return fmt.Errorf("no alert of the groups is suppressed by %s: %v", silence, groups)
	}
	return nil
}
