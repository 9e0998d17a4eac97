package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/core/testutil/browser"
)

// Issue 18 item 6 and the node buttons, in a real browser against root, a
// cluster and three agents on provider-exec: a RegionService's replicas
// turn Active on its open page without a reload; the services list and
// the rack view show them; cordon from a node's page shows in `unyo nodes
// ls`; a drain from the page shows as draining; scaling from the page removes
// the tail replica.
func TestWebServicesInBrowser(t *testing.T) {
	ctx := browser.New(t)
	dir := t.TempDir()
	rootURL, _ := startServiceFleet(t, dir, lightCluster)
	a := adminCLI{t, rootURL}

	browser.Step(t, ctx, "log in", 30*time.Second,
		chromedp.Navigate(rootURL+"/login"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", adminToken, chromedp.ByID),
		chromedp.Submit("#token", chromedp.ByID),
		chromedp.WaitVisible("#live-status", chromedp.ByID))

	// The service is applied with its page open: the replicas' rows turn
	// Active by themselves (the page redraws them every few seconds).
	a.must("apply", "-f", writeFile(t, dir, "web.yaml", webService(3)))
	browser.Step(t, ctx, "open the service", 30*time.Second,
		chromedp.Navigate(rootURL+"/service?name=web"),
		chromedp.WaitVisible("#replicas-section", chromedp.ByID),
		chromedp.Evaluate(`window.unyoMarker = 42`, nil))
	active := func(replica string) string {
		return `//tr[@id="c-` + replica + `"][td/span[normalize-space(.)="Active"]]`
	}
	browser.Step(t, ctx, "see the replicas turn Active without reloading", 90*time.Second,
		chromedp.WaitVisible(active("web-0"), chromedp.BySearch),
		chromedp.WaitVisible(active("web-1"), chromedp.BySearch),
		chromedp.WaitVisible(active("web-2"), chromedp.BySearch))
	var marker int
	var replicas string
	browser.Step(t, ctx, "read the replicas", 5*time.Second,
		chromedp.Evaluate(`window.unyoMarker || 0`, &marker),
		chromedp.Text("#replicas-section tbody", &replicas, chromedp.ByQuery))
	if marker != 42 {
		t.Error("the service page was reloaded to show the replicas")
	}
	for _, n := range []string{"node-a", "node-b", "node-c", "c1"} {
		if !strings.Contains(replicas, n) {
			t.Errorf("the replicas' table lacks %q:\n%s", n, replicas)
		}
	}

	var list string
	browser.Step(t, ctx, "list the services", 30*time.Second,
		chromedp.Navigate(rootURL+"/services"),
		chromedp.WaitVisible(`//a[normalize-space(.)="web"]`, chromedp.BySearch),
		chromedp.Text("main table tbody", &list, chromedp.ByQuery))
	if !strings.Contains(list, "Active") || !strings.Contains(list, "3 / 3") {
		t.Errorf("the services list shows %q, want web Active 3 / 3", list)
	}

	// The cluster's rack view: each server's computes, linked to them.
	var rack string
	var titled int
	browser.Step(t, ctx, "draw c1's racks", 30*time.Second,
		chromedp.Navigate(rootURL+"/racks?cluster=c1"),
		chromedp.WaitVisible("#rack-computes", chromedp.ByID),
		chromedp.Text("#rack-computes", &rack, chromedp.ByID),
		chromedp.Evaluate(`[...document.querySelectorAll('#rack-diagram title')].filter(t => /on it:\n  web-\d \(Compute\)/.test(t.textContent)).length`, &titled))
	for _, w := range []string{"srv-a", "srv-b", "srv-c", "web-0", "web-1", "web-2"} {
		if !strings.Contains(rack, w) {
			t.Errorf("the rack view's computes lack %q:\n%s", w, rack)
		}
	}
	if titled != 3 {
		t.Errorf("%d servers of the drawing name their compute, want 3", titled)
	}

	// Cordon from node-a's page (the second press confirms): the CLI's
	// SCHED column says cordoned.
	browser.Step(t, ctx, "cordon node-a", 30*time.Second,
		chromedp.Navigate(rootURL+"/node?name=node-a&cluster=c1"),
		chromedp.WaitVisible("#cordon", chromedp.ByID),
		chromedp.Click("#cordon", chromedp.ByID),
		chromedp.WaitVisible(".confirm", chromedp.ByQuery),
		chromedp.Click("#cordon", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Node node-a cordoned by admin")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//dd[@id="sched"][contains(., "cordoned")]`, chromedp.BySearch),
		chromedp.WaitVisible("#uncordon", chromedp.ByID))
	items, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if cordoned := it["cordoned"] == true; cordoned != (it["name"] == "node-a") {
			t.Errorf("node %v: cordoned %v", it["name"], it["cordoned"])
		}
	}
	if out := a.must("nodes", "ls"); !nodeSched(out, "node-a", "cordoned") || !nodeSched(out, "node-b", "schedulable") {
		t.Errorf("nodes ls does not show node-a cordoned:\n%s", out)
	}

	// Drain from the page: the cluster takes it, the page and the CLI say
	// draining. (Its replica cannot move: every other node has one of the
	// service's, which the hostname anti-affinity forbids; so it stays.)
	browser.Step(t, ctx, "drain node-a", 30*time.Second,
		chromedp.SetValue("#drain-deadline", "10m", chromedp.ByID),
		chromedp.Click("#drain", chromedp.ByID),
		chromedp.WaitVisible(`//form[@action="/node/drain"]/span[@class="confirm"]`, chromedp.BySearch),
		chromedp.Click("#drain", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Node node-a draining by admin")]`, chromedp.BySearch))
	testutil.Eventually(t, 30*time.Second, "node-a draining in nodes ls", func() error {
		if out := a.must("nodes", "ls"); !nodeSched(out, "node-a", "draining") {
			return fmt.Errorf("nodes ls:\n%s", out)
		}
		return nil
	})

	// The new pages have the accessibility basics in the browser too.
	for _, p := range []string{"/services", "/service?name=web", "/node?name=node-a&cluster=c1", "/racks?cluster=c1"} {
		var problems []string
		browser.Step(t, ctx, "check "+p, 30*time.Second, chromedp.Navigate(rootURL+p), chromedp.WaitReady("main", chromedp.ByQuery),
			chromedp.Evaluate(a11yScript, &problems))
		for _, pr := range problems {
			t.Errorf("%s: %s", p, pr)
		}
	}

	// Scale from the service's page. A fourth replica has no node left
	// (anti-affinity on the hostname): its row shows, by itself, that it
	// cannot be placed, with the scheduler's words and counts. Then down
	// to two: the tail goes.
	scale := func(n string) chromedp.Tasks {
		return chromedp.Tasks{
			chromedp.Navigate(rootURL + "/service?name=web"),
			chromedp.WaitVisible("#replicas", chromedp.ByID),
			chromedp.SetValue("#replicas", n, chromedp.ByID),
			chromedp.Click("#scale", chromedp.ByID),
			chromedp.WaitVisible(".confirm", chromedp.ByQuery),
			chromedp.Click("#scale", chromedp.ByID),
			chromedp.WaitVisible(`//p[@class="flash"][contains(., "scaled to `+n+` replica(s) by admin")]`, chromedp.BySearch),
		}
	}
	var blocked string
	browser.Step(t, ctx, "scale web to 4", 30*time.Second, scale("4"))
	browser.Step(t, ctx, "see why web-3 is not placed", 60*time.Second,
		chromedp.WaitVisible(`//tr[@id="c-web-3"]//li[starts-with(., "anti_affinity: 3")]`, chromedp.BySearch),
		chromedp.Text("#c-web-3", &blocked, chromedp.ByID))
	if !strings.Contains(blocked, "Unsatisfiable") || !strings.Contains(blocked, "0/3 nodes fit") {
		t.Errorf("web-3's row does not say why it is not placed: %q", blocked)
	}
	browser.Step(t, ctx, "scale web to 2", 30*time.Second, scale("2"))
	testutil.Eventually(t, 60*time.Second, "web-2 gone", func() error {
		out, err := a.run("computes", "ls")
		if err == nil && (strings.Contains(out, "web-2") || !strings.Contains(out, "web-1")) {
			err = fmt.Errorf("computes ls:\n%s", out)
		}
		return err
	})
}

// nodeSched says whether `unyo nodes ls` shows node's SCHED as want.
func nodeSched(out, node, want string) bool {
	lines := strings.Split(out, "\n")
	if len(lines) == 0 {
		return false
	}
	col := -1
	for i, h := range strings.Fields(lines[0]) {
		if h == "SCHED" {
			col = i
		}
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > col && col >= 0 && f[0] == node {
			return f[col] == want
		}
	}
	return false
}
