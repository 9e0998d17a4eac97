package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// runCLI runs a unyo command and returns its stdout, stderr and exit code.
func runCLI(t *testing.T, server string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unyoBin, append([]string{"--server", server, "--token", adminToken}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("unyo %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// TestCLIHabits: an operator migrating from Nagios imports Debian's
// example configuration, tries it with apply --dry-run (nothing stored),
// applies a directory tree with -R, reads diff's answer before and after
// an edit, selects with -l, reads event IDs and clusters, deletes
// something missing (non-zero exit), and pipes alerts watch (no screen
// codes).
func TestCLIHabits(t *testing.T) {
	const nagiosCfg = "/etc/nagios4/nagios.cfg"
	testutil.NeedTool(t, "nagios4's example configuration", "apt-get install -y nagios4-common", nagiosCfg)
	dir := t.TempDir()
	url := startLoneCluster(t, dir, "  heartbeat_interval: 1s\n")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, url, args...)
		if code != 0 {
			t.Fatalf("unyo %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	// unyo import nagios: documents on stdout, the report on stderr.
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	docs, report, code := runCLI(t, url, "import", "nagios", nagiosCfg)
	if code != 0 {
		t.Fatalf("import nagios: exit %d: %s", code, report)
	}
	for _, want := range []string{"host localhost: its node needs the labels nagios.host/localhost=true nagios.hostgroup/linux-servers=true", "check(s) translated"} {
		if !strings.Contains(report, want) {
			t.Errorf("import report lacks %q:\n%s", want, report)
		}
	}
	writeFile(t, conf, "nagios.yaml", docs)
	writeFile(t, filepath.Join(conf, "team"), "web.yaml", `kind: Check
name: web-alive
labels: {team: web}
spec: {command: [/bin/sh, -c, "echo OK; exit 0"], interval: 1s}
`)

	// --dry-run says what apply would do and stores nothing.
	out := run("apply", "-f", conf, "-R", "--dry-run")
	if !strings.Contains(out, "Check/current-load (c1) created (dry run)") || !strings.Contains(out, "Check/web-alive (c1) created (dry run)") {
		t.Errorf("apply --dry-run:\n%s", out)
	}
	if out := run("checks", "ls"); strings.Contains(out, "current-load") {
		t.Errorf("a dry run stored checks:\n%s", out)
	}
	// Without -R a directory is its own files only.
	if out := run("apply", "-f", conf, "--dry-run"); strings.Contains(out, "web-alive") {
		t.Errorf("apply -f DIR without -R read a subdirectory:\n%s", out)
	}
	_, errOut, code := runCLI(t, url, "diff", "-f", conf, "-R")
	if code != 1 {
		t.Errorf("diff before apply: exit %d, want 1 (%s)", code, errOut)
	}
	run("apply", "-f", conf, "-R")
	if out, errOut, code := runCLI(t, url, "diff", "-f", conf, "-R"); code != 0 || out != "" {
		t.Errorf("diff after apply: exit %d, output %q %s", code, out, errOut)
	}
	writeFile(t, filepath.Join(conf, "team"), "web.yaml", `kind: Check
name: web-alive
labels: {team: web}
spec: {command: [/bin/sh, -c, "echo OK; exit 0"], interval: 2s}
`)
	out, _, code = runCLI(t, url, "diff", "-f", filepath.Join(conf, "team"))
	if code != 1 || !strings.Contains(out, "-  interval: 1s") || !strings.Contains(out, "+  interval: 2s") || !strings.Contains(out, "--- stored: Check/web-alive in c1") {
		t.Errorf("diff of an edit: exit %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, url, "diff", "-f", filepath.Join(dir, "missing.yaml")); code != 2 {
		t.Errorf("diff of a missing file: exit %d, want 2 (%s)", code, errOut)
	}

	// -l on lists.
	if out := run("checks", "ls", "-l", "team=web"); !strings.Contains(out, "web-alive") || strings.Contains(out, "current-load") {
		t.Errorf("checks ls -l team=web:\n%s", out)
	}
	if out := run("get", "check", "-l", "!team"); strings.Contains(out, "web-alive") || !strings.Contains(out, "current-load") {
		t.Errorf("get check -l '!team':\n%s", out)
	}
	if _, errOut, code := runCLI(t, url, "checks", "ls", "-l", "team in web"); code == 0 || !strings.Contains(errOut, "expected in (value,...)") {
		t.Errorf("a bad selector: exit %d: %s", code, errOut)
	}

	// An agent whose labels the import report named runs the checks.
	agentCfg := writeFile(t, dir, "n1.yaml", fmt.Sprintf(`
role: agent
data_dir: %s/n1
agent:
  node_name: n1
  cluster_url: %s
  token: %s
  labels: {nagios.host/localhost: "true", nagios.hostgroup/linux-servers: "true", rack: r1}
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
`, dir, url, joinToken))
	startUnyo(t, "n1", nil, "agent", "--config", agentCfg)
	testutil.Eventually(t, 30*time.Second, "an event of web-alive", func() error {
		out := run("events", "ls", "-l", "team=web")
		if !strings.Contains(out, "web-alive") {
			return fmt.Errorf("events ls -l team=web:\n%s", out)
		}
		return nil
	})
	out = run("events", "ls", "--check", "web-alive")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[0]); len(f) < 3 || f[0] != "ID" || f[1] != "CLUSTER" || f[2] != "NODE" {
		t.Errorf("events ls header: %s", lines[0])
	}
	if f := strings.Fields(lines[len(lines)-1]); len(f) < 3 || len(f[0]) != 36 || f[1] != "c1" || f[2] != "n1" {
		t.Errorf("events ls row: %s", lines[len(lines)-1])
	}
	if out := run("events", "ls", "-l", "team=db"); strings.Contains(out, "web-alive") {
		t.Errorf("events ls -l team=db:\n%s", out)
	}
	if out := run("nodes", "ls", "-l", "rack in (r1,r2)"); !strings.Contains(out, "n1") {
		t.Errorf("nodes ls -l 'rack in (r1,r2)':\n%s", out)
	}
	if out := run("nodes", "ls", "-l", "rack notin (r1)"); strings.Contains(out, "n1") {
		t.Errorf("nodes ls -l 'rack notin (r1)':\n%s", out)
	}

	// Shell completion of names and IDs, and IDs by a unique prefix.
	if out := run("__complete", "get", "check", "web-"); !strings.Contains(out, "web-alive") || strings.Contains(out, "current-load") {
		t.Errorf("completion of check names:\n%s", out)
	}
	if out := run("__complete", "nodes", "get", ""); !strings.Contains(out, "n1") {
		t.Errorf("completion of node names:\n%s", out)
	}
	id := strings.Fields(lines[len(lines)-1])[0]
	if out := run("__complete", "events", "get", id[:30]); !strings.Contains(out, id) {
		t.Errorf("completion of event ID %s:\n%s", id, out)
	}
	if out := run("events", "get", id[:30], "-o", "json"); !strings.Contains(out, id) {
		t.Errorf("events get by a prefix of %s:\n%s", id, out)
	}
	testutil.Eventually(t, 30*time.Second, "two events of web-alive in the same second's IDs", func() error {
		// UUIDv7 IDs of one minute share their first 8 characters.
		if _, errOut, code := runCLI(t, url, "events", "get", id[:8]); code == 0 || !strings.Contains(errOut, "is ambiguous") {
			return fmt.Errorf("events get by an ambiguous prefix: exit %d: %s", code, errOut)
		}
		return nil
	})

	// Deleting what is not there fails, unless asked not to.
	if _, errOut, code := runCLI(t, url, "delete", "check", "no-such-check"); code == 0 || !strings.Contains(errOut, "not found: Check/no-such-check") {
		t.Errorf("delete of a missing check: exit %d: %s", code, errOut)
	}
	run("delete", "check", "no-such-check", "--ignore-not-found")
	run("delete", "check", "web-alive")

	// alerts watch into a pipe: screens without terminal control codes.
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	watch := exec.CommandContext(ctx, unyoBin, "--server", url, "--token", adminToken, "alerts", "watch", "--interval", "1s")
	var pipe bytes.Buffer
	watch.Stdout = &pipe // exec connects it through a pipe
	_ = watch.Run()      // ended by the context
	if n := strings.Count(pipe.String(), "unyo alerts —"); n < 2 || strings.Contains(pipe.String(), "\x1b") {
		t.Errorf("alerts watch into a pipe: %d screens, escape codes: %v\n%q", n, strings.Contains(pipe.String(), "\x1b"), pipe.String())
	}
}

// TestApplyDryRunThroughRoot: root tries its own copy of a check meant for
// every cluster and has each cluster try its part; nothing is stored
// anywhere.
func TestApplyDryRunThroughRoot(t *testing.T) {
	f := newFleet(t, "")
	doc := writeFile(t, f.dir, "dry.yaml", "kind: Check\nname: dry\nspec: {command: [/bin/true], interval: 1m}\n")
	out, err := f.cli("apply", "-f", doc, "--dry-run")
	if err != nil || !strings.Contains(out, "Check/dry created (dry run)") || !strings.Contains(out, "Check/dry (c1) created (dry run)") {
		t.Fatalf("apply --dry-run through root: %v\n%s", err, out)
	}
	if out, err := f.cli("checks", "ls"); err != nil || strings.Contains(out, "dry") {
		t.Errorf("a dry run stored the check: %v\n%s", err, out)
	}
	if out, err := f.cli("diff", "-f", doc); err == nil || !strings.Contains(out, "+++ file: Check/dry") {
		t.Errorf("diff of a check stored nowhere: %v\n%s", err, out)
	}
	if _, err := f.cli("apply", "-f", doc); err != nil {
		t.Fatal(err)
	}
	if out, err := f.cli("apply", "-f", doc, "--dry-run"); err != nil || !strings.Contains(out, "Check/dry (c1) unchanged (dry run)") {
		t.Errorf("apply --dry-run of what is stored: %v\n%s", err, out)
	}
}
