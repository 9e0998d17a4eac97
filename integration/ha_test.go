package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// haReplica starts another replica of cluster c1 on the fleet's database
// that registers its own URL at root, with extra YAML at the top level.
func haReplica(t *testing.T, f *fleet, name, extra string) (*proc, string) {
	return startReplica(t, f, name, fmt.Sprintf("  root_url: %s\n  root_token: %s\n", f.rootURL, f.clusterToken), extra)
}

// Two replicas of one cluster on one PostgreSQL, with no load balancer:
// root learns both URLs from their registrations, the agent is given both,
// and when the first replica is killed, results keep arriving and root
// keeps answering through the second. A replica that would keep metrics
// or logs in its own process refuses to join them.
func TestReplicasWithoutLoadBalancer(t *testing.T) {
	f := newFleet(t, sharedStores)
	_, secondURL := haReplica(t, f, "replica-2", sharedStores)
	testutil.Eventually(t, 30*time.Second, "root to know both replicas' URLs", func() error {
		cs, err := f.json("clusters", "ls")
		if err != nil {
			return err
		}
		if len(cs) != 1 || str(cs[0], "url") != f.clURL+","+secondURL {
			return fmt.Errorf("clusters: %v", cs)
		}
		return nil
	})

	// A third replica with embedded metrics would split the data: it
	// refuses to start and says why.
	third, _ := haReplica(t, f, "replica-3", "logs: {store: none}\n")
	testutil.Eventually(t, 30*time.Second, "the replica with embedded metrics to refuse to start", func() error {
		if !third.exited() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if log, _ := os.ReadFile(third.log); !strings.Contains(string(log), "replicas must share them (metrics.store: remote") {
		t.Errorf("the refusing replica's log does not say why:\n%s", log)
	}

	f.clURL += "," + secondURL // the agent gets both
	f.agent("n1", "{}", "")
	checks := `
kind: Check
name: tick
spec: {command: [sh, -c, "echo OK"], interval: 1s, timeout: 1s}
`
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "tick.yaml", checks)); err != nil {
		t.Fatal(err)
	}
	count := func() (int, error) {
		h, err := f.json("events", "ls", "--history", "--node", "n1", "--check", "tick", "--limit", "10000")
		return len(h), err
	}
	var before int
	testutil.Eventually(t, 60*time.Second, "results from the agent through the first replica", func() error {
		n, err := count()
		if err != nil || n < 3 {
			return fmt.Errorf("%d results (%v)", n, err)
		}
		before = n
		return nil
	})

	f.cluster.kill()
	testutil.Eventually(t, 60*time.Second, "results to keep arriving through the second replica, read through root", func() error {
		n, err := count()
		if err != nil {
			return err
		}
		if n < before+5 {
			return fmt.Errorf("%d results, %d before the kill", n, before)
		}
		return nil
	})
	if out, err := f.cli("nodes", "ls"); err != nil || !strings.Contains(out, "n1") {
		t.Errorf("nodes ls through root after the kill: %v\n%s", err, out)
	}
}
