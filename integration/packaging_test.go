package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestVersionFromLdflags: a binary built with the Makefile's -ldflags
// reports that version in `unyo version`, `--version` and -o json; one
// built without says dev (issue 17 item 6: every binary said "dev").
func TestVersionFromLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "unyo")
	const vpkg = "github.com/unyo-ops/unyo/core/version"
	build := exec.Command("go", "build", "-trimpath", "-ldflags",
		"-X "+vpkg+".version=v9.8.7 -X "+vpkg+".revision=0123456789abcdef -X "+vpkg+".buildDate=2026-11-26T03:00:00Z",
		"-o", bin, "../cmd/unyo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "unyo v9.8.7 (0123456789ab)\nbuilt: 2026-11-26T03:00:00Z\ngo: go1.") {
		t.Errorf("unyo version: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--version").CombinedOutput()
	if err != nil || string(out) != "unyo v9.8.7 (0123456789ab)\n" {
		t.Errorf("unyo --version: %v %q", err, out)
	}
	out, err = exec.Command(bin, "version", "-o", "json").Output()
	var v map[string]any
	if err != nil || json.Unmarshal(out, &v) != nil || v["version"] != "v9.8.7" || v["revision"] != "0123456789abcdef" {
		t.Errorf("unyo version -o json: %v %s", err, out)
	}
	out, err = exec.Command(unyoBin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "unyo dev") {
		t.Errorf("unyo --version without ldflags: %v %q", err, out)
	}
}

// TestSystemdUnitsVerify: the units in configs/systemd pass
// `systemd-analyze verify` (with ExecStart pointing at this build) and
// are hardened: `systemd-analyze security` rates each "OK" or better.
func TestSystemdUnitsVerify(t *testing.T) {
	sa := testutil.NeedTool(t, "systemd-analyze", "apt-get install -y systemd", "systemd-analyze")
	units, err := filepath.Glob("../configs/systemd/*.service")
	if err != nil || len(units) != 3 {
		t.Fatalf("units: %v %v", units, err)
	}
	dir := t.TempDir()
	var names []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(u)
		names = append(names, name)
		writeFile(t, dir, name, strings.ReplaceAll(string(b), "/usr/bin/unyo", unyoBin))
	}
	cmd := exec.Command(sa, append([]string{"verify", "--man=no"}, names...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, name := range names {
		cmd := exec.Command(sa, "security", "--offline=true", name)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "Overall exposure level for "+name+": 1.") && !strings.Contains(string(out), "Overall exposure level for "+name+": 0.") {
			t.Errorf("%s: exposure above 2 (or not rated):\n%s", name, out)
		}
	}
}

// TestManPages: `unyo man` writes a page for every command, readable by man.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command(unyoBin, "man", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("unyo man: %v\n%s", err, out)
	}
	for _, page := range []string{"unyo.1", "unyo-version.1", "unyo-apply.1", "unyo-metrics-query.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil || !strings.Contains(string(b), ".TH \"UNYO\" \"1\"") {
			t.Errorf("%s: %v\n%.300s", page, err, b)
		}
	}
}
