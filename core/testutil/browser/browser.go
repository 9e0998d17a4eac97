// Package browser starts Debian's chromium headless for end-to-end tests
// of the web console, driven with chromedp.
package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/unyo-ops/unyo/core/testutil"
)

// flags start chromium so that it works on a closed network: nothing of
// its own phones home (connections it would open are refused here and
// stall it), in a window the size of a laptop screen.
var flags = []chromedp.ExecAllocatorOption{
	chromedp.Flag("headless", true),
	chromedp.Flag("no-sandbox", true),
	chromedp.Flag("disable-gpu", true),
	chromedp.Flag("no-first-run", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.WindowSize(1366, 900),
}

// New starts a headless chromium with a fresh profile and returns a
// context to run chromedp actions in. Without chromium the test skips, or
// fails under CI=true. When the test fails, a screenshot and the page's
// HTML are saved in ArtifactsDir.
func New(t *testing.T) context.Context {
	t.Helper()
	bin := testutil.NeedTool(t, "chromium", "apt-get install -y chromium", "/usr/bin/chromium", "chromium")
	// Not t.TempDir: Chromium's helper processes may still write to the
	// profile for a moment after the browser is gone, so the profile is
	// removed with retries once it has quit.
	profile, err := os.MkdirTemp("", "unyo-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.UserDataDir(profile)}, flags...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		if t.Failed() {
			save(t, ctx)
		}
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if err = os.RemoveAll(profile); err == nil {
				return
			}
		}
		t.Errorf("remove chromium's profile: %v", err)
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// ArtifactsDir is where a test leaves what helps after a failure:
// $UNYO_TEST_ARTIFACTS/<test>, or a directory under the system's temporary
// directory that outlives the test.
func ArtifactsDir(t *testing.T) string {
	base := os.Getenv("UNYO_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "unyo-test-artifacts")
	}
	dir := filepath.Join(base, strings.ReplaceAll(t.Name(), "/", "_"))
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

func save(t *testing.T, ctx context.Context) {
	var png []byte
	var url, body string
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, chromedp.Location(&url), chromedp.FullScreenshot(&png, 100), chromedp.OuterHTML("html", &body)); err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	dir := ArtifactsDir(t)
	_ = os.WriteFile(filepath.Join(dir, "screenshot.png"), png, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "page.html"), []byte(body), 0o644)
	t.Logf("the browser was at %s; screenshot and page saved in %s", url, dir)
}

// Step runs actions within timeout, failing the test with what it was
// doing.
func Step(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
