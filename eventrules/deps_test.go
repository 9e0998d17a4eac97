package eventrules_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainImports keeps the domain packages light. The pipeline's rules,
// maintenances and alerts import no VictoriaMetrics code at all; checks
// imports only the MetricsQL parser (to validate spec.metric.expr), never
// VictoriaMetrics' lib, whose packages register process-wide flags on
// import.
func TestDomainImports(t *testing.T) {
	for _, tc := range []struct {
		pkgs      []string
		forbidden string
	}{
		{[]string{"./...", "../maintenance", "../alerts"}, "github.com/VictoriaMetrics/"},
		{[]string{"../checks"}, "github.com/VictoriaMetrics/VictoriaMetrics/"},
	} {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, tc.pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkgs, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, tc.forbidden) {
				t.Errorf("%s depend on %s", strings.Join(tc.pkgs, " "), pkg)
			}
		}
	}
}
