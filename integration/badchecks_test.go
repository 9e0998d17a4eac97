package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
)

func TestMisbehavingChecks(t *testing.T) {
	f := newFleet(t, "")
	pidFile := f.dir + "/child.pid"
	f.agent("n1", "{}", fmt.Sprintf(`  checks:
    - name: hangs
      spec: {command: [sleep, "300"], interval: 2s, timeout: 1s}
    - name: hangs-critical
      spec: {command: [sleep, "300"], interval: 2s, timeout: 1s, timeout_status: critical}
    - name: ten-megabytes
      spec: {command: [sh, -c, "head -c 10000000 /dev/zero | tr '\\0' x"], interval: 2s}
    - name: bad-utf8
      spec: {command: [sh, -c, "printf 'OK - caf\\351 \\377\\n'"], interval: 2s}
    - name: forks-child
      spec: {command: [sh, -c, "sleep 3017 & echo $! > %s; echo OK - forked"], interval: 2s}
    - name: no-such-plugin
      spec: {command: [check_does_not_exist], interval: 2s}
    - name: bad-perfdata
      spec: {command: [sh, -c, "echo 'OK - fine | good=1;2;3 bad=x;; also=0,5'"], interval: 2s}
    - name: healthy
      spec: {command: [check_dummy, "0", "still here"], interval: 1s}
`, pidFile))
	want := []string{"hangs", "hangs-critical", "ten-megabytes", "bad-utf8", "forks-child", "no-such-plugin", "bad-perfdata", "healthy"}
	var ev map[string]map[string]any
	testutil.Eventually(t, 60*time.Second, "a result of every check", func() error {
		var err error
		if ev, err = f.latest(); err != nil {
			return err
		}
		for _, c := range want {
			if ev["n1/"+c] == nil {
				return fmt.Errorf("no result of %s yet", c)
			}
		}
		return nil
	})
	get := func(c string) map[string]any { return ev["n1/"+c] }

	if e := get("hangs"); str(e, "status") != "unknown" || str(e, "timed_out") != "true" || !strings.Contains(str(e, "output"), "timed out after 1s") {
		t.Errorf("hanging check: %v", e)
	}
	if e := get("hangs-critical"); str(e, "status") != "critical" || str(e, "level") != "critical" {
		t.Errorf("hanging check with timeout_status critical: %v", e)
	}
	if e := get("ten-megabytes"); str(e, "truncated") != "true" || len(str(e, "output")) > 64<<10 || len(str(e, "output")) < 60<<10 {
		t.Errorf("10 MB output: truncated=%s, %d bytes kept", str(e, "truncated"), len(str(e, "output")))
	}
	if out := str(get("bad-utf8"), "output"); !utf8.ValidString(out) || !strings.Contains(out, "\uFFFD") || !strings.HasPrefix(out, "OK - caf") {
		t.Errorf("invalid UTF-8 output kept as %q", out)
	}
	if e := get("no-such-plugin"); str(e, "status") != "unknown" || !strings.Contains(str(e, "output"), "check_does_not_exist") {
		t.Errorf("missing plugin: %v", e)
	}
	if e := get("bad-perfdata"); str(e, "status") != "ok" || !strings.Contains(str(e, "long_output"), "perfdata") {
		t.Errorf("malformed perfdata: %v", e)
	} else if pd, _ := e["perfdata"].([]any); len(pd) != 1 {
		t.Errorf("malformed perfdata: kept %v, want only the good item", e["perfdata"])
	}

	// The child a check forked is gone once its run is over.
	testutil.Eventually(t, 20*time.Second, "the forked child to be gone", func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
		if procstat.Alive(pid) {
			return fmt.Errorf("pid %d (sleep 3017) still runs", pid)
		}
		return nil
	})

	// None of it stopped the healthy check from reporting.
	first := str(get("healthy"), "started_at")
	testutil.Eventually(t, 20*time.Second, "the healthy check to go on reporting", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if e := ev["n1/healthy"]; str(e, "started_at") == first || str(e, "output") != "OK: still here" {
			return fmt.Errorf("healthy: %v", e)
		}
		return nil
	})
}
