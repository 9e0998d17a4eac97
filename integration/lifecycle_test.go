package integration

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
)

// lifecycleCluster starts one cluster on SQLite, without root, judging
// liveness with staleAfter, and applies the default event rules; operator
// commands go to it directly.
func lifecycleCluster(t *testing.T, staleAfter time.Duration) *fleet {
	t.Helper()
	f := sqliteClusterLiveness(t, nil, staleAfter)
	rules, err := os.ReadFile("../configs/resources/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "rules.yaml", string(rules))); err != nil {
		t.Fatal(err)
	}
	return f
}

// shellCheck is a central check running a shell command every second.
func shellCheck(name, script, extra string) string {
	return fmt.Sprintf("---\nkind: Check\nname: %s\nspec: {command: [sh, -c, %q], interval: 1s%s}\n", name, script, extra)
}

// waitReady waits until node is Ready.
func (f *fleet) waitReady(node string) {
	f.t.Helper()
	testutil.Eventually(f.t, 30*time.Second, node+" Ready", func() error {
		nodes, err := f.json("nodes", "get", node)
		if err != nil {
			return err
		}
		if st := str(nodes[0], "state"); st != "ready" {
			return fmt.Errorf("%s is %s", node, st)
		}
		return nil
	})
}

// TestClusterRestartGrace: a cluster stopped for longer than stale_after
// and started again, with its agents up all along, makes no node Stale and
// raises no liveness event: the time it was down is its own, not the
// nodes' (issue 11, item 7).
func TestClusterRestartGrace(t *testing.T) {
	const staleAfter = 10 * time.Second
	f := lifecycleCluster(t, staleAfter)
	f.agent("web1", "{role: web}", "")
	f.agent("web2", "{role: web}", "")
	f.waitReady("web1")
	f.waitReady("web2")

	const away = staleAfter + 2*time.Second
	f.cluster.stop(syscall.SIGTERM, 10*time.Second)
	time.Sleep(away)
	f.cluster.restart()
	f.waitClusterUp()
	// Through the grace period (stale_after, after as long as the cluster
	// was away, for the agents' backoff) and past it, both stay Ready.
	for end := time.Now().Add(away + staleAfter + 5*time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		nodes, err := f.json("nodes", "ls")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if st := str(n, "state"); st != "ready" {
				t.Fatalf("after the cluster's restart %s is %s", str(n, "name"), st)
			}
		}
	}
	h, err := f.json("events", "ls", "--history", "--check", "node-liveness")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 0 {
		t.Errorf("liveness events after the cluster's restart: %v", h)
	}
}

// TestDeleteCheckAndNode: deleting a check resolves its open alerts with
// that reason and removes its latest events, for good (results the agent
// ran before it learnt of the deletion included); deleting a node revokes
// its agent's credential, resolves its alerts and removes its latest
// events (issue 11, item 6).
func TestDeleteCheckAndNode(t *testing.T) {
	f := lifecycleCluster(t, 5*time.Second)
	checks := shellCheck("broken", "echo CRITICAL: broken; exit 2", "") + shellCheck("fine", "echo OK", "")
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "checks.yaml", checks)); err != nil {
		t.Fatal(err)
	}
	f.agent("web1", "{role: web}", "")
	f.agent("web2", "{role: web}", "")
	openAlert := func(node, check string) string {
		t.Helper()
		var id string
		testutil.Eventually(t, 30*time.Second, "an open alert for "+node+"/"+check, func() error {
			as := f.alertsWhere(node, check)
			if len(as) != 1 || str(as[0], "state") != "open" {
				return fmt.Errorf("alerts: %v", as)
			}
			id = str(as[0], "id")
			return nil
		})
		return id
	}
	web1, web2 := openAlert("web1", "broken"), openAlert("web2", "broken")

	out, err := f.cli("delete", "check", "broken")
	if err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("delete check: %v\n%s", err, out)
	}
	gone := func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		for k := range ev {
			if strings.HasSuffix(k, "/broken") {
				return fmt.Errorf("events ls still shows %s: %v", k, ev[k])
			}
		}
		if ev["web1/fine"] == nil || ev["web2/fine"] == nil {
			return fmt.Errorf("the other check's events went too: %v", ev)
		}
		for _, id := range []string{web1, web2} {
			as, err := f.json("alerts", "get", id)
			if err != nil {
				return err
			}
			if st := str(as[0], "state"); st != "resolved" {
				return fmt.Errorf("alert %s is %s", id, st)
			}
			if h := fmt.Sprint(as[0]["history"]); !strings.Contains(h, `check \"broken\" deleted`) && !strings.Contains(h, `check "broken" deleted`) {
				return fmt.Errorf("alert %s history does not say why: %s", id, h)
			}
		}
		return nil
	}
	// A result in flight when the check was deleted may bring its event
	// back until the cluster's next pass removes it again.
	testutil.Eventually(t, 30*time.Second, "the deleted check's events and alerts gone", gone)
	// Results in flight when it was deleted do not bring it back: after
	// the cluster's second pass (stale_after later) it is gone for good.
	time.Sleep(7 * time.Second)
	if err := gone(); err != nil {
		t.Fatal(err)
	}
	if out, err := f.cli("events", "ls"); err != nil || strings.Contains(out, "broken") {
		t.Errorf("events ls: %v\n%s", err, out)
	}

	// A node: its alert (the check made critical again) resolved, its
	// events gone, its agent's credential revoked.
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "bad.yaml", shellCheck("bad", "echo CRITICAL: bad; exit 2", ", node_selector: {role: web}"))); err != nil {
		t.Fatal(err)
	}
	bad := openAlert("web2", "bad")
	if out, err := f.cli("nodes", "delete", "web2"); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("nodes delete: %v\n%s", err, out)
	}
	testutil.Eventually(t, 30*time.Second, "web2 gone with its events and alerts", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		for k := range ev {
			if strings.HasPrefix(k, "web2/") {
				return fmt.Errorf("events ls still shows %s", k)
			}
		}
		if ev["web1/fine"] == nil {
			return fmt.Errorf("web1's events went too: %v", ev)
		}
		as, err := f.json("alerts", "get", bad)
		if err != nil {
			return err
		}
		if st := str(as[0], "state"); st != "resolved" || !strings.Contains(fmt.Sprint(as[0]["history"]), "deleted") {
			return fmt.Errorf("alert %s is %s: %v", bad, st, as[0]["history"])
		}
		if out, err := f.cli("nodes", "ls"); err != nil || strings.Contains(out, "web2") {
			return fmt.Errorf("nodes ls: %v\n%s", err, out)
		}
		return nil
	})
	// Its agent may no longer report: its credential is revoked.
	testutil.Eventually(t, 30*time.Second, "web2's agent refused", func() error {
		if log := readFile(t, f.agents["web2"].log); !strings.Contains(log, "revoked") && !strings.Contains(log, "Unauthenticated") && !strings.Contains(log, "unauthenticated") {
			return fmt.Errorf("web2's agent log does not show it refused")
		}
		return nil
	})
}

// TestCheckTTL: a check with a ttl whose results stop while its node is
// Ready (the agent frozen, shorter than stale_after) gets an UNKNOWN event
// of the check, which the default rules alert on; results resuming clear
// it (issue 11, item 6).
// TestDeletedCheckInFlight: an agent keeps sending results of a check for
// a moment after the check was deleted and its alert closed (results it
// ran or spooled before it heard). They are dropped at ingest: the closed
// alert stays closed and no new alert opens, not even until the cluster's
// second retire pass (stale_after later) would have cleaned up.
func TestDeletedCheckInFlight(t *testing.T) {
	f := lifecycleCluster(t, 6*time.Second)
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "gone.yaml", shellCheck("gone", "exit 2", ", node_selector: {role: none}"))); err != nil {
		t.Fatal(err)
	}
	// The agent is this test, so that it sends exactly when it should.
	ctx := t.Context()
	agent, err := enrol(ctx, f.clURL, &unyov1.Node{Name: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(at time.Time) *unyov1.ReportResultsResponse {
		t.Helper()
		resp, err := agent.Agent.ReportResults(ctx, connect.NewRequest(&unyov1.ReportResultsRequest{Node: "web1", Results: []*unyov1.Event{{
			Id: uuid.NewString(), Node: "web1", Check: "gone", Level: unyov1.Level_LEVEL_CRITICAL,
			Status: unyov1.CheckStatus_CHECK_STATUS_CRITICAL, Output: "CRITICAL: gone", StartedAt: timestamppb.New(at),
		}}}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	send(time.Now())
	var id string
	testutil.Eventually(t, 30*time.Second, "an open alert for web1/gone", func() error {
		as := f.alertsWhere("web1", "gone")
		if len(as) != 1 || str(as[0], "state") != "open" {
			return fmt.Errorf("alerts: %v", as)
		}
		id = str(as[0], "id")
		return nil
	})

	ranBefore := time.Now()
	if out, err := f.cli("delete", "check", "gone"); err != nil {
		t.Fatalf("delete check: %v\n%s", err, out)
	}
	if out, err := f.cli("alerts", "close", id, "--by", "alice", "--reason", "check retired"); err != nil {
		t.Fatalf("alerts close: %v\n%s", err, out)
	}
	// A result run before the deletion, then two the agent ran before its
	// next heartbeat told it the check was gone.
	for _, at := range []time.Time{ranBefore, time.Now(), time.Now().Add(time.Second)} {
		if r := send(at); r.GetAccepted() != 0 || r.GetFiltered() != 1 {
			t.Errorf("result of the deleted check run at %s: %v; want it dropped (counted as filtered)", at.Format(time.StampMilli), r)
		}
	}
	// Until after the cluster's second retire pass: one alert, closed.
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		as := f.alertsWhere("web1", "gone")
		if len(as) != 1 || str(as[0], "id") != id || str(as[0], "state") != "closed" {
			t.Fatalf("after the check was deleted and its alert closed: %v; want alert %s closed and no other", as, id)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if log := readFile(t, f.cluster.log); !strings.Contains(log, "dropped results of a deleted check") {
		t.Error("the cluster log does not say it dropped results of the deleted check")
	}

	// Applied again under the same name, the check's results count again.
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "gone.yaml", shellCheck("gone", "exit 2", ", node_selector: {role: none}"))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a result of the re-applied check stored", func() error {
		if r := send(time.Now()); r.GetAccepted() != 1 {
			return fmt.Errorf("report: %v", r)
		}
		return nil
	})
}

func TestCheckTTL(t *testing.T) {
	f := lifecycleCluster(t, 60*time.Second)
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "checks.yaml", shellCheck("fresh", "echo OK: fresh", ", ttl: 4s"))); err != nil {
		t.Fatal(err)
	}
	web := f.agent("web1", "{role: web}", "")
	testutil.Eventually(t, 30*time.Second, "web1/fresh OK", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if st := str(ev["web1/fresh"], "status"); st != "ok" {
			return fmt.Errorf("web1/fresh: %v", ev["web1/fresh"])
		}
		return nil
	})
	// Frozen: no result, no heartbeat, but not for stale_after.
	if err := syscall.Kill(web.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "a freshness event for web1/fresh and its alert", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		e := ev["web1/fresh"]
		if str(e, "status") != "unknown" || str(e, "level") != "critical" || !strings.Contains(str(e, "output"), "no result of check fresh from node web1") {
			return fmt.Errorf("web1/fresh: %v", e)
		}
		if as := f.alertsWhere("web1", "fresh"); len(as) != 1 || str(as[0], "state") != "open" {
			return fmt.Errorf("alerts: %v", as)
		}
		return nil
	})
	if err := syscall.Kill(web.pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "web1/fresh OK again and its alert resolved", func() error {
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if st := str(ev["web1/fresh"], "status"); st != "ok" {
			return fmt.Errorf("web1/fresh: %v", ev["web1/fresh"])
		}
		if as := f.alertsWhere("web1", "fresh"); len(as) != 1 || str(as[0], "state") != "resolved" {
			return fmt.Errorf("alerts: %v", as)
		}
		return nil
	})
	h, err := f.json("events", "ls", "--history", "--node", "web1", "--check", "fresh", "--level", "critical")
	if err != nil || len(h) != 1 {
		t.Errorf("freshness events: %v, %v; want exactly one for the one silence", h, err)
	}
	if nodes, err := f.json("nodes", "get", "web1"); err != nil || str(nodes[0], "state") != "ready" {
		t.Errorf("web1: %v %v, want Ready throughout", nodes, err)
	}
}

// TestStaleNodeEvents: the latest results of a node that stopped reporting
// are shown stale in `events ls`, not OK (issue 11, item 6).
func TestStaleNodeEvents(t *testing.T) {
	f := lifecycleCluster(t, 3*time.Second)
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "checks.yaml", shellCheck("fine", "echo OK", ""))); err != nil {
		t.Fatal(err)
	}
	web := f.agent("web1", "{role: web}", "")
	testutil.Eventually(t, 30*time.Second, "web1/fine OK", func() error {
		out, err := f.cli("events", "ls")
		if err != nil || !strings.Contains(out, "fine") || strings.Contains(out, "stale") {
			return fmt.Errorf("events ls: %v\n%s", err, out)
		}
		return nil
	})
	web.kill()
	testutil.Eventually(t, 30*time.Second, "web1/fine shown stale", func() error {
		out, err := f.cli("events", "ls", "--check", "fine")
		if err != nil || !strings.Contains(out, "stale (was OK)") {
			return fmt.Errorf("events ls: %v\n%s", err, out)
		}
		ev, err := f.latest()
		if err != nil {
			return err
		}
		if s := str(ev["web1/fine"], "stale"); !strings.Contains(s, "web1 is") {
			return fmt.Errorf("web1/fine stale %q", s)
		}
		return nil
	})
}
