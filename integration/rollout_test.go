package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// rollingWeb is webService(3) with env V=v, updated one replica at a time
// without surge.
func rollingWeb(v string) string {
	return webService(3) + fmt.Sprintf(`    env: {V: "%s"}
    update: {max_unavailable: 1}
`, v)
}

// serviceEnvs are the values of V in the replicas' processes, sorted.
func serviceEnvs() []string {
	var out []string
	for _, pid := range serviceProcs() {
		env, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "V="); ok {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// A rolling update from root (issue 14, item 8): changing the env of a
// 3-replica service's compute template replaces the replicas one at a
// time (max_unavailable 1, no surge), never with fewer than two Active;
// `services rollout status --watch` waits for it, `rollout history` lists
// the revisions, and `rollout undo` goes back to the first template as
// revision 3.
func TestRollingUpdate(t *testing.T) {
	dir := t.TempDir()
	rootURL, _ := startServiceFleet(t, dir, lightCluster)
	a := adminCLI{t, rootURL}
	must := a.must
	must("apply", "-f", writeFile(t, dir, "web.yaml", rollingWeb("1")))
	testutil.Eventually(t, 60*time.Second, "web Active 3/3 at revision 1", func() error {
		out, err := a.run("services", "rollout", "status", "web")
		if err == nil && !strings.Contains(out, "revision 1: 3/3 replicas updated (Active)") {
			err = fmt.Errorf("rollout status: %s", out)
		}
		return err
	})
	// active counts root's Active records.
	active := func() (int, error) {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, it := range items {
			if st, _ := it["status"].(map[string]any); st["phase"] == "Active" {
				n++
			}
		}
		return n, nil
	}
	// rollTo applies (or undoes) and watches the rollout to revision rev,
	// checking that at least two replicas are Active all along.
	rollTo := func(v string, rev int, change func()) {
		t.Helper()
		change()
		fewest, polls := 3, 0
		testutil.Eventually(t, 120*time.Second, fmt.Sprintf("revision %d rolled out", rev), func() error {
			n, err := active()
			if err != nil {
				return err
			}
			fewest, polls = min(fewest, n), polls+1
			out, err := a.run("services", "rollout", "status", "web")
			if err != nil {
				return err
			}
			if !strings.Contains(out, fmt.Sprintf("revision %d: 3/3 replicas updated (Active)", rev)) {
				return fmt.Errorf("rollout status: %s", out)
			}
			if envs := serviceEnvs(); !slices.Equal(envs, []string{v, v, v}) {
				return fmt.Errorf("the replicas run V=%v", envs)
			}
			return nil
		})
		if fewest < 2 {
			t.Errorf("during the rollout to revision %d only %d replicas were Active at one time", rev, fewest)
		}
		if fewest == 3 {
			t.Errorf("the rollout to revision %d never showed a replica being replaced (%d polls)", rev, polls)
		}
		if out := must("services", "rollout", "status", "--watch", "web"); !strings.Contains(out, "3/3 replicas updated") {
			t.Errorf("rollout status --watch: %s", out)
		}
	}
	rollTo("2", 2, func() { must("apply", "-f", writeFile(t, dir, "web.yaml", rollingWeb("2"))) })
	// Scaling is no new revision.
	out := must("services", "rollout", "history", "web")
	if !strings.Contains(out, "2 (current)") || !strings.Contains(out, "V=1") || !strings.Contains(out, "V=2") {
		t.Errorf("rollout history:\n%s", out)
	}
	rollTo("1", 3, func() { must("services", "rollout", "undo", "web") })
	if out := must("services", "rollout", "history", "web"); !strings.Contains(out, "3 (current)") {
		t.Errorf("rollout history after undo:\n%s", out)
	}
	// Removed through their agents, so that no provider shim is still
	// writing into the test's directories when they are removed.
	must("services", "delete", "web")
	testutil.Eventually(t, 60*time.Second, "no replica process left", func() error {
		if pids := serviceProcs(); len(pids) > 0 {
			return fmt.Errorf("replica processes still run: %v", pids)
		}
		return nil
	})
}
