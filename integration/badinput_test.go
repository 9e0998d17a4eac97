package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// run runs unyo and returns its exit error and stderr.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, unyoBin, args...).CombinedOutput()
	return string(out), err
}

func TestBadConfigurationStopsTheProcess(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file string
		want       []string
	}{
		{"unknown key", "role: agent\nagent:\n  heartbeat_intervall: 5s\n", []string{"bad.yaml", "agent.heartbeat_intervall", "unknown key"}},
		{"bad duration", "role: agent\nagent:\n  flush_interval: 5x\n", []string{"bad.yaml", "agent.flush_interval", "duration"}},
		{"wrong type", "role: agent\nagent:\n  labels: [a, b]\n", []string{"bad.yaml", "agent.labels"}},
		{"invalid YAML", "role: agent\nagent: {\n", []string{"bad.yaml", "line"}},
		{"bad local check", "role: agent\nagent:\n  checks:\n    - name: x\n      spec: {command: [\"true\"], intervall: 5s}\n", []string{"bad.yaml", "intervall"}},
		{"unyo's own variable passed to checks", "role: agent\nagent:\n  check_env: [HTTPS_PROXY, UNYO_AGENT_TOKEN]\n", []string{"agent.check_env[1]", "UNYO_AGENT_TOKEN", "never passed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := writeFile(t, dir, "bad.yaml", tt.file)
			out, err := run(t, "agent", "--config", f)
			if err == nil {
				t.Fatalf("unyo agent started with a bad configuration:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("error does not mention %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestBadApplyChangesNothing(t *testing.T) {
	f := newFleet(t, "")
	good := writeFile(t, f.dir, "good.yaml", "kind: Check\nname: one\nspec: {command: [\"true\"], interval: 10s}\n")
	if _, err := f.cli("apply", "-f", good); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc, want string
	}{
		{"unknown field", "kind: Check\nname: two\nspec: {command: [\"true\"], intervall: 10s}\n", "intervall"},
		{"unknown kind", "kind: Chek\nname: two\nspec: {}\n", "Chek"},
		{"invalid yaml", "kind: Check\nname: [\n", "line"},
		{"bad duration", "kind: Check\nname: two\nspec: {command: [\"true\"], interval: 10x}\n", "spec.interval"},
		{"unknown metrics format", "kind: Check\nname: two\nspec: {command: [\"true\"], interval: 10s, metrics_format: xml}\n", `spec.metrics_format: "xml" is not a metrics format`},
		{"second document bad", "kind: Check\nname: two\nspec: {command: [\"true\"], interval: 10s}\n---\nkind: Check\nname: three\nspec: {command: [], interval: 10s}\n", "spec.command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := writeFile(t, f.dir, "bad.yaml", tt.doc)
			_, err := f.cli("apply", "-f", bad)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("apply: %v, want an error naming %q", err, tt.want)
			}
			items, err := f.json("checks", "ls")
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 1 || str(items[0], "name") != "one" {
				t.Fatalf("a refused apply changed the checks: %v", items)
			}
		})
	}
}
