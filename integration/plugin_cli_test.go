package integration

import (
	"encoding/xml"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildPlugin builds a plugin's main package into dir under its installed name.
func buildPlugin(t *testing.T, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func TestPluginCommands(t *testing.T) {
	tcp := buildPlugin(t, "../plugins/check-tcp", "unyo-check-tcp")
	if out, err := run(t, "plugin", "check", tcp); err != nil {
		t.Fatalf("plugin check of a bundled plugin: %v\n%s", err, out)
	}
	out, err := run(t, "plugin", "conformance", tcp, "--fixtures", "../plugins/conformance/testdata/fixtures/check-tcp.yaml", "-o", "junit")
	if err != nil {
		t.Fatalf("conformance of a bundled plugin: %v\n%s", err, out)
	}
	// The report is valid JUnit XML (stderr's progress lines come first in
	// the combined output).
	var suites struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal([]byte(out[strings.Index(out, "<?xml"):]), &suites); err != nil {
		t.Fatalf("junit report: %v\n%s", err, out)
	}

	// A deliberately broken plugin fails, naming the broken cases.
	broken := buildPlugin(t, "../plugins/conformance/testdata/unyo-check-broken", "unyo-check-broken")
	out, err = run(t, "plugin", "conformance", broken, "--fixtures", "../plugins/conformance/testdata/fixtures/check-broken.yaml")
	if err == nil {
		t.Fatalf("a broken plugin passed conformance:\n%s", out)
	}
	for _, c := range []string{"no_fd_or_memory_growth", "no_zombie_children"} {
		if !strings.Contains(out, c) {
			t.Errorf("report does not name the failed case %s:\n%s", c, out)
		}
	}
}
