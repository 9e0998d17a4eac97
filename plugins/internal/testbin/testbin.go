// Package testbin builds plugin binaries for tests, once per test binary,
// with the ordinary go build cache so that repeated runs only link.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles each package (an import path or a ./relative dir) into dir
// under the name given by names[i] and returns the paths.
func Build(dir string, pkgs, names []string) ([]string, error) {
	out := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		out[i] = filepath.Join(dir, names[i])
		// Stripped, as plugins/README.md says to build them: a third
		// less to hash at a plugin's first start.
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", out[i], pkg)
		cmd.Env = os.Environ()
		b, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(b)))
		}
	}
	return out, nil
}
