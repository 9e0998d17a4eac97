package amtest_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/integration/amtest"
)

// TestStart starts Alertmanager, posts one firing alert and reads it back,
// so that a broken harness shows here rather than as odd benchmark figures.
func TestStart(t *testing.T) {
	am := amtest.Start(t)
	labels := map[string]string{"alertname": "check-1", "instance": "node-1", "severity": "critical"}
	if err := am.Post(t.Context(), http.DefaultClient, []amtest.Alert{{Labels: labels, StartsAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	got, err := am.Alerts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Alertmanager holds %d alerts, want the 1 posted: %+v", len(got), got)
	}
	for k, v := range labels {
		if got[0].Labels[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, got[0].Labels[k], v, got[0].Labels)
		}
	}
	if !got[0].EndsAt.After(time.Now()) {
		t.Errorf("the alert ends at %v: it should be firing", got[0].EndsAt)
	}
}

// TestMissingAlertmanager runs TestStart in a child process that cannot find
// Alertmanager: it must skip, except under CI, where it must fail.
func TestMissingAlertmanager(t *testing.T) {
	if os.Getenv("AMTEST_CHILD") != "" {
		t.Skip("only in the parent")
	}
	for _, tc := range []struct {
		ci   string
		want string
	}{
		{"", "--- SKIP: TestStart"},
		{"true", "--- FAIL: TestStart"},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestStart$", "-test.v")
		missing := filepath.Join(t.TempDir(), "prometheus-alertmanager")
		cmd.Env = append(os.Environ(), "AMTEST_CHILD=1", amtest.BinEnv+"="+missing, "CI="+tc.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "not found") {
			t.Errorf("CI=%q: want %q and an explanation, got:\n%s", tc.ci, tc.want, out)
		}
	}
}
