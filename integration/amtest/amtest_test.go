package amtest_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
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
	missing := filepath.Join(t.TempDir(), "prometheus-alertmanager")
	testutil.SkipsOrFailsWithoutTool(t, "TestStart", "Prometheus Alertmanager is not installed (looked for "+missing+")", amtest.BinEnv+"="+missing)
}
