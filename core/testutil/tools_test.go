package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNeedTool(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		name       string
		ci         string
		candidates []string
		want       string // the path found, or "" when missing
		skipped    bool   // when missing: skipped rather than failed
	}{
		{"path", "", []string{filepath.Join(dir, "nope"), tool}, tool, false},
		{"name in PATH", "true", []string{"nope", "tool"}, tool, false},
		{"missing, locally", "", []string{"nope"}, "", true},
		{"missing, CI=false", "false", []string{"nope"}, "", true},
		{"missing, under CI", "true", []string{"nope", "/no/such/tool"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(CIEnv, tc.ci)
			f := &fatalTB{TB: t}
			got := NeedTool(f, "the tool", "apt-get install -y tool", tc.candidates...)
			if got != tc.want {
				t.Errorf("NeedTool = %q, want %q", got, tc.want)
			}
			if tc.want != "" {
				if f.msg != "" {
					t.Errorf("NeedTool ended the test: %s", f.msg)
				}
				return
			}
			if f.skipped != tc.skipped {
				t.Errorf("skipped = %v, want %v (%s)", f.skipped, tc.skipped, f.msg)
			}
			for _, w := range append([]string{"the tool is not installed", "apt-get install -y tool"}, tc.candidates...) {
				if !strings.Contains(f.msg, w) {
					t.Errorf("message %q does not say %q", f.msg, w)
				}
			}
		})
	}
}
