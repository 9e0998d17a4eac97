package eventrules_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainImportsNoVictoriaMetrics keeps the domain packages light: the
// pipeline's rules, maintenances and alerts import no VictoriaMetrics code,
// whose packages register process-wide flags on import.
func TestDomainImportsNoVictoriaMetrics(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...", "../maintenance", "../alerts").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/VictoriaMetrics/") {
			t.Errorf("eventrules, maintenance or alerts depend on %s", pkg)
		}
	}
}
