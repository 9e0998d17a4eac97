package integration

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// "Every cluster" means every cluster, now and later (issue 11, item 5):
// a rule and a check applied without a cluster reach a cluster that
// registers afterwards; a rule deleted while a cluster is down is gone from
// it once it is back; and a cluster started on its own config has the
// default rules, applied once, so a deleted one stays deleted.
func TestObjectsForEveryClusterNowAndLater(t *testing.T) {
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, "")
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	startCluster := func(name, rootURL string) (*proc, string) { return startClusterServer(t, dir, name, rootURL, "") }
	// names lists "name:origin" of a kind's objects in a cluster, from the
	// table (ORIGIN is its last column; JSON and YAML print documents).
	names := func(server, noun, cluster string) ([]string, error) {
		args := []string{"--token", adminToken, noun, "ls"}
		if cluster != "" {
			args = append(args, "--cluster", cluster)
		}
		out, err := cli(t, server, args...)
		if err != nil {
			return nil, err
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 1 {
				got = append(got, f[0]+":"+f[len(f)-1])
			}
		}
		slices.Sort(got)
		return got, nil
	}
	has := func(server, noun, cluster string, want ...string) func() error {
		return func() error {
			got, err := names(server, noun, cluster)
			if err != nil {
				return err
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					return fmt.Errorf("%s in %s: %v, want %s", noun, cluster, got, w)
				}
			}
			return nil
		}
	}
	lacks := func(server, noun, cluster, name string) func() error {
		return func() error {
			got, err := names(server, noun, cluster)
			if err != nil {
				return err
			}
			for _, g := range got {
				if strings.HasPrefix(g, name+":") {
					return fmt.Errorf("%s in %s: %v still has %s", noun, cluster, got, name)
				}
			}
			return nil
		}
	}

	startCluster("a", rootURL)
	testutil.Eventually(t, 30*time.Second, "cluster a to register", func() error {
		if out, err := op("clusters", "ls"); err != nil || !strings.Contains(out, "yes") {
			return fmt.Errorf("clusters ls: %s %v", out, err)
		}
		return nil
	})
	file := writeFile(t, dir, "global.yaml", `kind: EventRule
name: global-page
spec: {type: action, owner: ops, reason: page on every cluster, match: {levels: [critical]}, actions: [{create_alert: {}}]}
---
kind: Check
name: global-true
spec: {command: ["true"], interval: 1m}
`)
	if out, err := op("apply", "-f", file); err != nil || !strings.Contains(out, "EventRule/global-page (a) created") {
		t.Fatalf("apply without a cluster: %v\n%s", err, out)
	}

	// A cluster that registers later gets both, marked as root's.
	b, _ := startCluster("b", rootURL)
	testutil.Eventually(t, 30*time.Second, "cluster b to get the global rule", has(rootURL, "rules", "b", "global-page:root"))
	testutil.Eventually(t, 10*time.Second, "cluster b to get the global check", has(rootURL, "checks", "b", "global-true:root"))
	if out, err := op("get", "rule", "global-page", "--cluster", "b"); err != nil || !strings.Contains(out, "ORIGIN") || !strings.HasSuffix(strings.TrimSpace(out), " root") {
		t.Errorf("get rule global-page in b: %v; want its origin, root\n%s", err, out)
	}

	// Deleted while b is down: a's copy goes at once, b's when it is back.
	b.kill()
	if out, err := op("delete", "rule", "global-page"); !strings.Contains(out, "EventRule/global-page (a) deleted") {
		t.Fatalf("delete with b down: %v\n%s", err, out)
	}
	if _, err := op("delete", "rule", "global-page"); err == nil || !strings.Contains(err.Error(), "deletes this cluster's copy when it answers again") {
		t.Errorf("delete again with b down: %v; want b named, and what root will do", err)
	}
	// Applied while b is down: b gets it when it is back.
	late := writeFile(t, dir, "late.yaml", "kind: Check\nname: late-check\nspec: {command: [\"true\"], interval: 1m}\n")
	if out, err := op("apply", "-f", late); err == nil || !strings.Contains(err.Error(), "brings this cluster up to date when it answers again") || !strings.Contains(out, "Check/late-check created") {
		t.Errorf("apply with b down: %v; want b named, and what root will do\n%s", err, out)
	}
	b.restart()
	testutil.Eventually(t, 30*time.Second, "cluster b, back, to drop the deleted rule", lacks(rootURL, "rules", "b", "global-page"))
	testutil.Eventually(t, 10*time.Second, "cluster b, back, to get the check applied while it was down", has(rootURL, "checks", "b", "global-true:root", "late-check:root"))
	// b started with the default rules too; root's objects do not replace
	// those of other names.
	if err := has(rootURL, "rules", "b", "critical-alerts:defaults")(); err != nil {
		t.Error(err)
	}

	// A standalone cluster starts with the default rules, once.
	s, sURL := startCluster("standalone", "")
	testutil.Eventually(t, 30*time.Second, "the standalone cluster to have the default rules", has(sURL, "rules", "", "critical-alerts:defaults", "node-down:defaults"))
	if _, err := cli(t, sURL, "--token", adminToken, "delete", "rule", "critical-alerts"); err != nil {
		t.Fatal(err)
	}
	s.stop(syscall.SIGTERM, 10*time.Second)
	s.restart()
	testutil.Eventually(t, 30*time.Second, "the standalone cluster to answer again", has(sURL, "rules", "", "node-down:defaults"))
	if err := lacks(sURL, "rules", "", "critical-alerts")(); err != nil {
		t.Errorf("a default rule deleted came back after a restart: %v", err)
	}
}

// startClusterServer starts a light cluster (1s heartbeats) with the
// admin token and its data under dir, registered at rootURL unless it is
// empty, with extra YAML added to its cluster section, and returns it and
// its URL.
func startClusterServer(t *testing.T, dir, name, rootURL, extra string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	register := ""
	if rootURL != "" {
		register = fmt.Sprintf("  root_url: %s\n  root_token: %s\n", rootURL, addClusterAt(t, rootURL, name))
	}
	return startUnyo(t, name, nil, "server", "--config", writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  admin_tokens: [%s]
cluster:
  name: %s
  heartbeat_interval: 1s
  stale_after: 3s
  down_after: 6s
%s%s%s`, dir, name, addr, adminToken, name, register, extra, lightCluster))), "http://" + addr
}

// startRootServer starts a root with the admin token and its data under
// dir, extra YAML added to its config, and returns its URL.
func startRootServer(t *testing.T, dir, extra string) string {
	t.Helper()
	_, url := startRootProc(t, dir, extra)
	return url
}

// startRootProc is startRootServer returning the process too.
func startRootProc(t *testing.T, dir, extra string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	p := startUnyo(t, "root", nil, "server", "--config", writeFile(t, dir, "root.yaml", fmt.Sprintf(`
role: root
data_dir: %s/root
server:
  listen: %s
  admin_tokens: [%s]
%s`, dir, addr, adminToken, extra)))
	return p, "http://" + addr
}
