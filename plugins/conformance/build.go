package conformance

import (
	"path/filepath"
	"testing"

	"github.com/unyo-ops/unyo/plugins/internal/testbin"
)

// Build compiles the plugin package pkg (an import path or a ./relative
// directory) as name (unyo-<kind>-<name>) into a temporary directory of
// the test and returns its path, for a plugin's own conformance test:
//
//	conformance.Run(t, conformance.Binary(conformance.Build(t, ".", "unyo-check-x"), fixtures))
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := testbin.Build(dir, []string{pkg}, []string{name}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}
