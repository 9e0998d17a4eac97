package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// webAutoscaled is the service "web" of webService, autoscaled between 1
// and 3 replicas on the load the test writes (target 10),
// scaling down after a 3s window, evaluated every second.
var webAutoscaled = webService(1) + `    autoscale:
      min: 1
      max: 3
      metric: max(web_load{service="web"})
      target: 10
      scale_down_window: 3s
      interval: 1s
`

// Autoscaling (issue 14, item 9) with real processes: root evaluates the
// service's metric, written to the cluster's TSDB as agents write theirs,
// with the HPA rule: three times the target scales 1 → 3 (max) at once; a
// value far below scales back to 1 only after the 3s scale-down window;
// each decision is an event with its inputs; the autoscaler owns the
// replicas (scale refuses, apply keeps its count); `services get` shows
// its state.
func TestRegionServiceAutoscale(t *testing.T) {
	dir := t.TempDir()
	rootURL, clURL := startServiceFleet(t, dir, "logs: {store: none}\nstats: {enabled: false}\n")
	a := adminCLI{t, rootURL}
	cl, err := client.New(client.Options{URL: clURL, Token: adminToken, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	load := func(v float64) {
		t.Helper()
		_, err := cl.Metrics.WriteMetrics(context.Background(), connect.NewRequest(&unyov1.WriteMetricsRequest{Node: "node-a",
			Samples: []*unyov1.Sample{{Name: "web_load", Labels: map[string]string{"service": "web"}, Value: v, TimeMs: time.Now().UnixMilli()}}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	// replicas is the service's replica count and its live computes.
	replicas := func() (int, int, error) {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "services", "ls")
		if err != nil || len(items) != 1 {
			return 0, 0, fmt.Errorf("services: %v, %v", items, err)
		}
		spec := items[0]["spec"].(map[string]any)["compute"].(map[string]any)
		n := 0
		fmt.Sscan(fmt.Sprint(spec["replicas"]), &n)
		computes, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
		live := 0
		for _, c := range computes {
			if st, _ := c["status"].(map[string]any); st["phase"] != "Deleting" {
				live++
			}
		}
		return n, live, err
	}
	waitReplicas := func(want int) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, fmt.Sprintf("web at %d replicas", want), func() error {
			n, live, err := replicas()
			if err == nil && (n != want || live != want) {
				err = fmt.Errorf("replicas %d, live computes %d", n, live)
			}
			return err
		})
	}

	load(30)
	a.must("apply", "-f", writeFile(t, dir, "web.yaml", webAutoscaled))
	waitReplicas(3)
	out := a.must("services", "get", "web")
	for _, want := range []string{"AUTOSCALE", "1..3 metric 30/10 want 3", "scaled", "ago"} {
		if !strings.Contains(out, want) {
			t.Errorf("services get web lacks %q:\n%s", want, out)
		}
	}
	// The autoscaler owns the replicas: scale refuses, and applying the
	// document again (replicas: 1) keeps its count.
	a.wantErr("its autoscaler owns the replicas", "services", "scale", "web", "2")
	if out := a.must("apply", "-f", writeFile(t, dir, "web.yaml", webAutoscaled)); !strings.Contains(out, "unchanged") {
		t.Errorf("apply of the same document changed the service:\n%s", out)
	}
	if n, _, err := replicas(); err != nil || n != 3 {
		t.Errorf("after apply: replicas %d (%v), want the autoscaler's 3", n, err)
	}

	lowered := time.Now()
	load(3) // 3 × 3/10 = 0.9 → 1 replica, after the 3s window
	waitReplicas(1)
	if d := time.Since(lowered); d < 2*time.Second {
		t.Errorf("scaled down %s after the load dropped: the 3s scale-down window did not hold", d)
	}

	testutil.Eventually(t, 30*time.Second, "both decisions as events", func() error {
		hist, err := cliJSON(t, rootURL, "--token", adminToken, "events", "ls", "--history", "--check", "service-autoscale")
		if err != nil {
			return err
		}
		var outs []string
		for _, e := range hist {
			outs = append(outs, fmt.Sprint(e["output"], " ", e["long_output"], e["longOutput"]))
		}
		all := strings.Join(outs, "\n")
		for _, want := range []string{"web scaled from 1 to 3 replicas", "metric 30 / target 10 = 3", "web scaled from 3 to 1 replicas", "metric 3 / target 10 = 0.3", "scale_down_window 3s"} {
			if !strings.Contains(all, want) {
				return fmt.Errorf("events lack %q:\n%s", want, all)
			}
		}
		return nil
	})
}
