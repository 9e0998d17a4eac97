package web_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	chromium "github.com/unyo-ops/unyo/core/testutil/browser"
)

// The performance in a real browser: the alerts page with 10,000
// open alerts over 10 clusters loads, stays responsive, and a change
// reaches the open page within 2 s. The figures are logged (go test -v).
// It is a measurement, run on demand (UNYO_BROWSER_BENCH=1): on a machine
// shared with a test suite the browser's timings say more about the load
// than about the page.
func TestAlertsPage10kInBrowser(t *testing.T) {
	if os.Getenv("UNYO_BROWSER_BENCH") != "1" {
		t.Skip("a measurement: run with UNYO_BROWSER_BENCH=1 (starts chromium and renders 10,000 alerts)")
	}
	f := fixture(t)
	f.alerts = manyAlerts(10000)
	e := newEnvLive(t, f, time.Second) // the default
	// The browser after the server: cleanups run in reverse, so the
	// browser (and its live connection) goes before the server closes,
	// which waits for open connections.
	ctx := chromium.New(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys("#token", adminTok, chromedp.ByID),
		chromedp.Submit("#token", chromedp.ByID),
		chromedp.WaitVisible(`//p[@id="live-status"][starts-with(., "Live:")]`, chromedp.BySearch)); err != nil {
		t.Fatalf("log in and open /alerts: %v", err)
	}
	var loadMs, rows float64
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`(() => { const n = performance.getEntriesByType("navigation")[0]; return n.loadEventEnd - n.startTime; })()`, &loadMs),
		chromedp.Evaluate(`document.querySelectorAll("#groups tr[id]").length`, &rows)); err != nil {
		t.Fatal(err)
	}
	if rows != 10000 {
		t.Fatalf("%v rows on the page, want 10000", rows)
	}
	t.Logf("10,000 alerts: the page loaded in %.0f ms (navigation start to load event)", loadMs)

	// A change: one alert acknowledged, one new; the page shows both.
	f.mu.Lock()
	f.alerts[5].State = unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED
	f.alerts = append(f.alerts, alert("cluster-3", "fresh", unyov1.AlertLevel_ALERT_LEVEL_FATAL, time.Now(), "node-x", "check-x"))
	f.mu.Unlock()
	changed := time.Now()
	if err := chromedp.Run(ctx, chromedp.Poll(`!!document.getElementById("a-cluster-3/fresh") && document.getElementById("a-cluster-5/00000005").className === "st-acknowledged"`, nil,
		chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("the change never showed: %v", err)
	}
	push := time.Since(changed)
	t.Logf("a change reached the open page in %v", push)
	// The target is 2 s (1 s polling plus the browser's update);
	// the bound here leaves room for a CI machine shared by many processes,
	// where the figures above are what to read.
	if push > 10*time.Second {
		t.Errorf("the change took %v to reach the page (target under 2 s)", push)
	}
	// Responsive: the page answers a script and a click at once.
	start := time.Now()
	if err := chromedp.Run(ctx, chromedp.Click(`input[value="cluster-3/fresh"]`, chromedp.ByQuery), chromedp.Evaluate(`1`, nil)); err != nil {
		t.Fatal(err)
	}
	click := time.Since(start)
	t.Logf("a click on a row's box with the page open took %v", click)
	if click > 3*time.Second {
		t.Errorf("a click took %v with 10,000 alerts on the page", click)
	}
}
