package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestBadCheckPlugins: an agent runs check plugins that misbehave in every
// way the issue lists, beside a healthy command check. Each misbehaviour is
// contained and reported with the plugin's name and what went wrong, in the
// check's events, in the plugin's state events and in `unyo plugin ls`;
// leaked children die with their plugin; crash loops end in failed; the
// healthy check reports throughout and the agent never stops.
func TestBadCheckPlugins(t *testing.T) {
	// One build, installed under one name per misbehaviour: the name picks
	// how it starts, the check's target what it does in a call.
	dir := t.TempDir()
	src := filepath.Join(dir, "crashy")
	if out, err := exec.Command("go", "build", "-o", src, "../plugins/host/testdata/unyo-check-crashy").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	sum := sha256File(t, src)
	names := []string{"stdout", "silent", "garbage", "crashloop", "panic", "hang", "leak"}
	var enabled, checks strings.Builder
	for _, n := range names {
		if err := os.Link(src, filepath.Join(dir, "unyo-check-"+n)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&enabled, "      - {kind: check, name: %s, sha256: %s}\n", n, sum)
		fmt.Fprintf(&checks, "    - name: bad-%s\n      spec: {plugin: {name: %s, target: {mode: %s}}, interval: 1s, timeout: 1s}\n", n, n, n)
	}
	bin := func(n string) string { return filepath.Join(dir, "unyo-check-"+n) }

	f := newFleet(t, "")
	agent := f.agent("bad1", "{role: bad}", fmt.Sprintf(`  plugins:
    dirs: [%s]
    enabled:
%s  checks:
    - name: healthy
      spec: {command: [check_dummy, "0", "still here"], interval: 1s}
%s`, dir, enabled.String(), checks.String()))

	// healthyRuns counts the healthy check's results so far.
	healthyRuns := func() int {
		hist, err := f.json("events", "ls", "--history", "--node", "bad1", "--check", "healthy")
		if err != nil {
			return -1
		}
		for _, e := range hist {
			if str(e, "level") != "success" {
				t.Errorf("healthy check: %v", e)
			}
		}
		return len(hist)
	}
	// anyEvent finds an event of check in bad1's history whose output holds
	// every one of want.
	anyEvent := func(check string, want ...string) error {
		hist, err := f.json("events", "ls", "--history", "--node", "bad1", "--check", check)
		if err != nil {
			return err
		}
		var last string
		for _, e := range hist {
			out := str(e, "output")
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(out, w)
			}
			if ok {
				return nil
			}
			last = out
		}
		return fmt.Errorf("no event of %s among %d says %q; last: %q", check, len(hist), want, last)
	}

	// The leaking plugin: its child dies when the plugin is killed.
	var child int
	testutil.Eventually(t, 60*time.Second, "the leak plugin's answer naming its child", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		out := str(ev["bad1/bad-leak"], "output")
		pid, err := strconv.Atoi(strings.TrimPrefix(out, "OK leaked "))
		if err != nil || !procstat.Alive(pid) {
			return fmt.Errorf("bad-leak: %q", out)
		}
		child = pid
		return nil
	})
	pids := procstat.PIDsOf(bin("leak"))
	if len(pids) != 1 {
		t.Fatalf("leak plugin processes: %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the leaked child gone with its plugin", func() error {
		if procstat.Alive(child) {
			return fmt.Errorf("child %d alive", child)
		}
		return nil
	})

	checksFor := []struct {
		name string
		// check is what the plugin's check events say (one of them).
		check []string
		// state is what the plugin's state events say (one of them).
		state []string
		// lastError is in `unyo plugin ls` once it is failed or restarted.
		lastError string
	}{
		{"stdout", []string{"plugin check/stdout", `wrote "hello from a plugin that talks before its handshake" to stdout before its handshake`},
			[]string{"plugin check/stdout failed", "crash-looped"}, "to stdout before its handshake"},
		{"silent", []string{"plugin check/silent", "no handshake within the start timeout (10s)"},
			[]string{"plugin check/silent stopped or failed to start", "no handshake within the start timeout"}, "no handshake within the start timeout"},
		{"garbage", []string{"plugin check/garbage", "error reading server preface"},
			[]string{"plugin check/garbage failed", "crash-looped"}, "error reading server preface"},
		{"crashloop", []string{"plugin check/crashloop", "exited before its handshake (exit status 3)"},
			[]string{"plugin check/crashloop failed", "crash-looped", "exited before its handshake (exit status 3)"}, "crash-looped"},
		{"panic", []string{"plugin check/panic exited during the call (exit status 2; its stderr: panic: crashy was told to panic)"},
			[]string{"plugin check/panic failed", "crash-looped"}, "panic: crashy was told to panic"},
		{"hang", []string{"plugin check/hang did not answer within the check's timeout 1s"},
			[]string{"plugin check/hang stopped or failed to start", "failed 3 health checks in a row (hung?)"}, "failed 3 health checks in a row (hung?)"},
		{"leak", []string{"OK leaked"},
			[]string{"plugin check/leak stopped or failed to start", "exited unexpectedly (signal: killed)"}, "exited unexpectedly (signal: killed)"},
	}
	before := healthyRuns()
	hung := procstat.PIDsOf(bin("hang"))
	for _, c := range checksFor {
		testutil.Eventually(t, 120*time.Second, "check plugin "+c.name+" reported with its name and problem", func() error {
			if err := anyEvent("bad-"+c.name, c.check...); err != nil {
				return err
			}
			if err := anyEvent("plugin-check-"+c.name, c.state...); err != nil {
				return err
			}
			p, err := pluginLs(f, "bad1", "check", c.name)
			if err != nil {
				return err
			}
			if !strings.Contains(str(p, "last_error"), c.lastError) {
				return fmt.Errorf("plugin ls: %v", p)
			}
			return nil
		})
	}
	// The crash loops ended in failed, raised as critical events.
	testutil.Eventually(t, 60*time.Second, "crash-looping plugins failed, as critical events and in plugin ls", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		for _, n := range []string{"stdout", "garbage", "crashloop", "panic"} {
			if e := ev["bad1/plugin-check-"+n]; str(e, "level") != "critical" || !strings.Contains(str(e, "output"), "crash-looped") {
				return fmt.Errorf("plugin-check-%s: %v", n, e)
			}
			p, err := pluginLs(f, "bad1", "check", n)
			if err != nil {
				return err
			}
			if str(p, "state") != "failed" {
				return fmt.Errorf("plugin ls %s: %v", n, p)
			}
			if pids := procstat.PIDsOf(bin(n)); len(pids) != 0 {
				return fmt.Errorf("failed plugin %s still has processes %v", n, pids)
			}
		}
		if e := ev["bad1/bad-crashloop"]; str(e, "status") != "unknown" || !strings.Contains(str(e, "output"), "plugin check/crashloop is failed") {
			return fmt.Errorf("bad-crashloop: %v", e)
		}
		return nil
	})
	// The hung plugin was replaced, the old process killed.
	testutil.Eventually(t, 60*time.Second, "the hung plugin restarted", func() error {
		p, err := pluginLs(f, "bad1", "check", "hang")
		if err != nil {
			return err
		}
		if r, _ := p["restarts"].(float64); r < 1 {
			return fmt.Errorf("plugin ls hang: %v", p)
		}
		for _, pid := range hung {
			if procstat.Alive(pid) {
				return fmt.Errorf("the hung plugin %d is still there", pid)
			}
		}
		return nil
	})
	if after := healthyRuns(); after <= before {
		t.Errorf("the healthy check stopped reporting: %d results before, %d after", before, after)
	}
	n := healthyRuns()
	testutil.Eventually(t, 10*time.Second, "a fresh result of the healthy check", func() error {
		if m := healthyRuns(); m <= n {
			return fmt.Errorf("healthy check: %d results, then %d", n, m)
		}
		return nil
	})
	if agent.exited() {
		t.Fatal("the agent exited")
	}
	st, err := f.agentStatus("bad1")
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := st["plugins"].([]any); len(ps) != len(names) {
		t.Errorf("agent status plugins: %v", st["plugins"])
	}
}
