package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
)

// sha256File is the hex sha256 of a file, as sha256sum prints it.
func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// pluginLs is the item of `unyo plugin ls -o json` for one plugin.
func pluginLs(f *fleet, where, kind, name string) (map[string]any, error) {
	items, err := f.json("plugin", "ls")
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if str(it, "where") == where && str(it, "kind") == kind && str(it, "name") == name {
			return it, nil
		}
	}
	return nil, fmt.Errorf("no %s/%s plugin at %s in plugin ls: %v", kind, name, where, items)
}

// TestCheckPlugin: a Check naming the tcp check plugin runs through the
// agent's plugin host; its results follow the target; a SIGKILLed plugin
// is raised as an event, comes back, and never stops the agent's other
// checks.
func TestCheckPlugin(t *testing.T) {
	bin := buildPlugin(t, "../plugins/check-tcp", "unyo-check-tcp")
	sum := sha256File(t, bin)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()

	f := newFleet(t, "")
	f.agent("plug1", "{role: plug}", fmt.Sprintf(`  plugins:
    dirs: [%s]
    enabled:
      - {kind: check, name: tcp, sha256: %s}
      # Not installed: refused at start, which must not stop the agent.
      - {kind: check, name: http, sha256: %s}
  checks:
    - name: other
      spec:
        command: [check_dummy, "0", "still running"]
        interval: 1s
`, filepath.Dir(bin), sum, strings.Repeat("0", 64)))

	checks := writeFile(t, f.dir, "tcp.yaml", fmt.Sprintf(`
kind: Check
name: tcp-port
spec:
  plugin: {name: tcp, target: {address: %q, warning: 5s}}
  interval: 1s
  node_selector: {role: plug}
`, addr))
	if out, err := f.cli("apply", "-f", checks); err != nil || !strings.Contains(out, "Check/tcp-port (c1) created") {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	testutil.Eventually(t, 60*time.Second, "an OK result of the plugin check and the plugin's running event", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if e := ev["plug1/tcp-port"]; str(e, "level") != "success" || !strings.HasPrefix(str(e, "output"), "TCP OK") {
			return fmt.Errorf("tcp-port: %v", e)
		}
		if e := ev["plug1/plugin-check-tcp"]; str(e, "level") != "success" || !strings.Contains(str(e, "output"), "plugin check/tcp is running") {
			return fmt.Errorf("plugin-check-tcp: %v", e)
		}
		if e := ev["plug1/plugin-check-http"]; str(e, "level") != "critical" || !strings.Contains(str(e, "output"), "no executable unyo-check-http") {
			return fmt.Errorf("plugin-check-http: %v", e)
		}
		return nil
	})
	// `unyo plugin ls` shows the agent's plugins as its heartbeats carry them.
	testutil.Eventually(t, 30*time.Second, "plugin ls to show the tcp plugin running and the http plugin failed", func() error {
		tcp, err := pluginLs(f, "plug1", "check", "tcp")
		if err != nil {
			return err
		}
		if str(tcp, "state") != "running" || str(tcp, "version") == "" || str(tcp, "cluster") != "c1" || str(tcp, "since") == "" {
			return fmt.Errorf("tcp plugin: %v", tcp)
		}
		http, err := pluginLs(f, "plug1", "check", "http")
		if err != nil {
			return err
		}
		if str(http, "state") != "failed" || !strings.Contains(str(http, "last_error"), "no executable unyo-check-http") {
			return fmt.Errorf("http plugin: %v", http)
		}
		return nil
	})
	if out, err := f.cli("plugin", "ls"); err != nil || !strings.Contains(out, "WHERE") || !strings.Contains(out, "running") {
		t.Errorf("plugin ls: %v\n%s", err, out)
	}

	ev, _ := f.latest()
	ok := ev["plug1/tcp-port"]
	if pd, _ := ok["perfdata"].([]any); len(pd) != 1 || str(pd[0].(map[string]any), "label") != "time" || str(pd[0].(map[string]any), "uom") != "s" {
		t.Errorf("perfdata of the plugin's metrics: %v", ok["perfdata"])
	}

	// The target goes down: CRITICAL, with the plugin's output in the
	// event's details.
	ln.Close()
	var critID string
	testutil.Eventually(t, 30*time.Second, "a CRITICAL result once the listener is closed", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		e := ev["plug1/tcp-port"]
		if str(e, "level") != "critical" || !strings.Contains(str(e, "output"), "TCP CRITICAL - cannot connect to "+addr) {
			return fmt.Errorf("tcp-port: %v", e)
		}
		critID = str(e, "id")
		return nil
	})
	out, err := f.cli("events", "get", critID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "TCP CRITICAL") || !strings.Contains(out, "tcp-port") {
		t.Errorf("events get %s:\n%s", critID, out)
	}

	// Kill the plugin as a crash would.
	pids := procstat.PIDsOf(bin)
	if len(pids) != 1 {
		t.Fatalf("processes running %s: %v, want one", bin, pids)
	}
	before, _ := f.latest()
	otherBefore := str(before["plug1/other"], "id")
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "the crash raised as an event, the plugin back, the other check still running", func() error {
		hist, err := f.json("events", "ls", "--history", "--node", "plug1", "--check", "plugin-check-tcp")
		if err != nil {
			return err
		}
		crashed := false
		for _, e := range hist {
			if str(e, "level") == "warning" && strings.Contains(str(e, "output"), "plugin check/tcp") {
				crashed = true
			}
		}
		if !crashed {
			return fmt.Errorf("no warning event for the crashed plugin in %d events", len(hist))
		}
		now := procstat.PIDsOf(bin)
		if len(now) != 1 || now[0] == pids[0] {
			return fmt.Errorf("plugin processes %v (killed %d)", now, pids[0])
		}
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if e := ev["plug1/plugin-check-tcp"]; str(e, "level") != "success" {
			return fmt.Errorf("plugin-check-tcp: %v", e)
		}
		if e := ev["plug1/other"]; str(e, "id") == otherBefore || str(e, "level") != "success" {
			return fmt.Errorf("other check: %v", e)
		}
		// Answered by the restarted plugin again (not UNKNOWN).
		if e := ev["plug1/tcp-port"]; str(e, "level") != "critical" || !strings.Contains(str(e, "output"), "TCP CRITICAL") {
			return fmt.Errorf("tcp-port: %v", e)
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, "plugin ls to count the restart", func() error {
		tcp, err := pluginLs(f, "plug1", "check", "tcp")
		if err != nil {
			return err
		}
		if r, _ := tcp["restarts"].(float64); r < 1 || str(tcp, "state") != "running" {
			return fmt.Errorf("tcp plugin after the kill: %v", tcp)
		}
		return nil
	})
	if f.agents["plug1"].exited() {
		t.Fatal("the agent exited")
	}
}
