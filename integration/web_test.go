package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/testutil/browser"
	"github.com/unyo-ops/unyo/provision/diagram"
)

// Issue 18: the web console in a real browser, served by root: log in; a
// failing check's alert appears without a reload; acknowledge and close it
// from the page (recorded under the token's name); an event's
// explanation; a rack diagram with the expected racks and units.
func TestWebConsoleInBrowser(t *testing.T) {
	ctx := browser.New(t)
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, "")
	clAddr := freeAddr(t)
	startUnyo(t, "c1", nil, "server", "--config", writeFile(t, dir, "c1.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/c1
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c1
  heartbeat_interval: 1s
  root_url: %s
  root_token: %s
%s`, dir, clAddr, adminToken, joinToken, rootURL, addClusterAt(t, rootURL, "c1"), lightCluster)))
	startUnyo(t, "web1", nil, "agent", "--config", writeFile(t, dir, "web1.yaml", fmt.Sprintf(`
role: agent
data_dir: %s/web1
agent:
  node_name: web1
  cluster_url: http://%s
  token: %s
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
`, dir, clAddr, joinToken)))
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	testutil.Eventually(t, 60*time.Second, "node web1 to be Ready through root", func() error {
		out, err := op("nodes", "ls")
		if err == nil && !strings.Contains(out, "Ready") {
			err = fmt.Errorf("nodes ls: %s", out)
		}
		return err
	})
	inventory := filepath.Join("..", "provision", "diagram", "testdata", "inventory.yaml")
	if out, err := op("apply", "-f", inventory); err != nil {
		t.Fatalf("apply the inventory: %v\n%s", err, out)
	}

	// No page without a session: the console sends the browser to log in.
	var loc string
	browser.Step(t, ctx, "open the console", 30*time.Second,
		chromedp.Navigate(rootURL+"/alerts"), chromedp.WaitVisible("#token", chromedp.ByID), chromedp.Location(&loc))
	if !strings.Contains(loc, "/login") {
		t.Fatalf("without a session the console showed %s", loc)
	}
	browser.Step(t, ctx, "log in", 30*time.Second,
		chromedp.SendKeys("#token", adminToken, chromedp.ByID),
		chromedp.Submit("#token", chromedp.ByID),
		chromedp.WaitVisible("#live-status", chromedp.ByID),
		chromedp.WaitVisible(`//p[@id="live-status"][starts-with(., "Live")]`, chromedp.BySearch),
		// A marker that a reload would wipe.
		chromedp.Evaluate(`window.unyoMarker = 42`, nil))

	// A failing check: its alert must appear on the open page by itself.
	check := writeFile(t, dir, "fail.yaml", `
kind: Check
name: web-fail
spec:
  command: [sh, -c, 'echo "CRITICAL - web console test"; exit 2']
  interval: 1s
`)
	if out, err := op("apply", "-f", check); err != nil {
		t.Fatalf("apply the failing check: %v\n%s", err, out)
	}
	row := `//tr[td[normalize-space(.)="web-fail"]]`
	browser.Step(t, ctx, "see the alert appear without reloading", 90*time.Second, chromedp.WaitVisible(row, chromedp.BySearch))
	var marker int
	browser.Step(t, ctx, "read the marker", 5*time.Second, chromedp.Evaluate(`window.unyoMarker || 0`, &marker))
	if marker != 42 {
		t.Fatal("the page was reloaded to show the alert")
	}

	// Acknowledge from the page: the row turns acknowledged, live.
	browser.Step(t, ctx, "acknowledge it", 30*time.Second,
		chromedp.Click(row+`//input[@type="checkbox"]`, chromedp.BySearch),
		chromedp.Click("#ack-selected", chromedp.ByID),
		chromedp.WaitVisible(`//tr[td[normalize-space(.)="web-fail"]][td[normalize-space(.)="acknowledged"]]`, chromedp.BySearch))
	// The check recovers, so that no new alert opens for it once it is
	// closed: once an OK result is the latest, no failing one is in flight
	// (an agent sends its results in order).
	recovered := writeFile(t, dir, "ok.yaml", `
kind: Check
name: web-fail
spec:
  command: [sh, -c, 'echo "OK - web console test recovered"; exit 0']
  interval: 1s
`)
	if out, err := op("apply", "-f", recovered); err != nil {
		t.Fatalf("apply the recovered check: %v\n%s", err, out)
	}
	testutil.Eventually(t, 60*time.Second, "an OK result as web-fail's latest", func() error {
		out, err := op("events", "ls", "--check", "web-fail")
		if err == nil && !strings.Contains(out, "recovered") {
			err = fmt.Errorf("events ls --check web-fail:\n%s", out)
		}
		return err
	})
	// Close needs a reason; with one, the row leaves the open alerts.
	browser.Step(t, ctx, "close it with a reason", 30*time.Second,
		chromedp.Click(row+`//input[@type="checkbox"]`, chromedp.BySearch),
		chromedp.SendKeys("#close-reason", "fixed by the browser test", chromedp.ByID),
		chromedp.Click("#close-selected", chromedp.ByID))
	browser.Step(t, ctx, "see it closed", 30*time.Second,
		chromedp.WaitVisible(`//span[@id="act-status"][contains(., "Closed 1 alert")]`, chromedp.BySearch))
	browser.Step(t, ctx, "see its row go", 30*time.Second,
		chromedp.Poll(`document.evaluate('count(`+row+`)', document, null, XPathResult.NUMBER_TYPE, null).numberValue === 0`, nil))
	out, err := op("alerts", "ls", "--all", "--check", "web-fail", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "fixed by the browser test") || !strings.Contains(out, `"by": "admin-token-`) {
		t.Errorf("the alert's history does not record the close by the admin token:\n%s", out)
	}

	// An event's explanation.
	var outcome string
	browser.Step(t, ctx, "open the event's explanation", 30*time.Second,
		chromedp.Navigate(rootURL+"/events?check=web-fail&history=1"),
		chromedp.Click(`//a[contains(., "web console test")]`, chromedp.BySearch),
		chromedp.WaitVisible("#explanation", chromedp.ByID),
		chromedp.Text("#outcome", &outcome, chromedp.ByID))
	if outcome == "" {
		t.Error("the event page shows no outcome")
	}

	// The rack diagram: the racks and units the layout code draws.
	objs, err := manifest.DecodeFile(inventory)
	if err != nil {
		t.Fatal(err)
	}
	want, err := diagram.FloorRacks(diagram.FromObjects(objs), "floor-1-1-1", diagram.RackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantRacks, wantUnits := 0, 0
	for _, r := range want.Rows {
		for _, rk := range r.Racks {
			wantRacks++
			wantUnits += rk.Units
		}
	}
	var racks, units int
	browser.Step(t, ctx, "draw the floor's racks", 30*time.Second,
		chromedp.Navigate(rootURL+"/racks?floor=floor-1-1-1"),
		chromedp.WaitVisible("#rack-diagram svg", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#rack-diagram g[id^="rack-"]').length`, &racks),
		chromedp.Evaluate(`document.querySelectorAll('#rack-diagram text.ruler').length`, &units))
	if racks != wantRacks || units != wantUnits || racks == 0 {
		t.Errorf("the rack diagram has %d racks and %d units, want %d and %d", racks, units, wantRacks, wantUnits)
	}

	// Every page of the console has the accessibility basics in the
	// browser too: one h1, a label for every control.
	for _, p := range []string{"/alerts", "/events", "/nodes", "/node?name=web1&cluster=c1", "/rules", "/maintenance", "/racks?floor=floor-1-1-1", "/networks?from=rack-1-1-server1", "/graph?q=up"} {
		var problems []string
		browser.Step(t, ctx, "check "+p, 30*time.Second, chromedp.Navigate(rootURL+p), chromedp.WaitReady("main", chromedp.ByQuery),
			chromedp.Evaluate(a11yScript, &problems))
		for _, pr := range problems {
			t.Errorf("%s: %s", p, pr)
		}
	}
}

// a11yScript lists accessibility problems of the page in the browser:
// headings, names of controls and buttons, the document's language.
const a11yScript = `(() => {
  const out = [];
  if (document.querySelectorAll('h1').length !== 1) out.push('want exactly one h1');
  if (!document.documentElement.lang) out.push('no lang on html');
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    if (!el.labels?.length && !el.getAttribute('aria-label')) out.push('no label for ' + (el.name || el.id));
  }
  for (const b of document.querySelectorAll('button')) {
    if (!b.hidden && !b.textContent.trim() && !b.getAttribute('aria-label')) out.push('a button has no name');
  }
  return out;
})()`
