package integration

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
)

// faultMarker marks these tests' commands (sleep MARKER): other tests
// that run provider-exec kill every command of marker when they end.
const faultMarker = "31536019"

// manyReplicas are n provider-exec replicas of ten-replica services
// sharing half the memory of three nodes of mem bytes. Each command's
// UNYO_TEST_SERVICE is its compute's name, so running counts the
// commands of each compute.
func manyReplicas(n int, mem int64) []*unyov1.Compute {
	cs := make([]*unyov1.Compute, n)
	for i := range cs {
		svc, idx := fmt.Sprintf("s%03d", i/10), i%10
		name := fmt.Sprintf("%s-%d", svc, idx)
		cs[i] = &unyov1.Compute{
			Name: name, Service: svc, Index: int32(idx), Cluster: "c1",
			Spec: &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", faultMarker},
				Env: map[string]string{"UNYO_TEST_SERVICE": name}},
			Resources: &unyov1.ComputeResources{MemoryBytes: mem * 3 / 2 / int64(n)},
		}
	}
	return cs
}

// converge syncs cs to the cluster (killing the cluster process with
// SIGKILL kill after the sync and restarting it, when kill > 0) and
// waits until every compute is Active and runs exactly one command:
// nothing overcommitted, no reservation leaked, no replica doubled or
// lost. It returns the time from the first sync to all Active.
func converge(t *testing.T, f *provisionFleet, cs []*unyov1.Compute, kill time.Duration, timeout time.Duration) time.Duration {
	t.Helper()
	want := map[string]string{}
	for _, c := range cs {
		want[c.GetName()] = "Active"
	}
	t.Cleanup(func() {
		for pid := range markedWith(faultMarker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	start := time.Now()
	f.sync(cs)
	if kill > 0 {
		time.Sleep(kill)
		f.cluster.kill()
		f.cluster.restart()
	}
	var got map[string]*unyov1.Compute
	testutil.Eventually(t, timeout, fmt.Sprintf("%d computes Active", len(cs)), func() error {
		var err error
		if got, err = f.trySync(cs); err != nil {
			return err
		}
		active := 0
		for _, c := range got {
			if c.GetStatus().GetPhase() == "Active" {
				active++
			}
		}
		if active != len(want) || len(got) != len(want) {
			return fmt.Errorf("%d of %d Active (%d held)", active, len(want), len(got))
		}
		return nil
	})
	took := time.Since(start)
	checkNoOvercommit(t, f, got)
	testutil.Eventually(t, 20*time.Second, "one command per compute", func() error {
		r := map[string]int{}
		for _, compute := range markedWith(faultMarker) {
			r[compute]++
		}
		for _, c := range cs {
			if r[c.GetName()] != 1 {
				return fmt.Errorf("compute %s runs %d commands", c.GetName(), r[c.GetName()])
			}
		}
		if len(r) != len(cs) {
			return fmt.Errorf("commands of %d computes run, want %d", len(r), len(cs))
		}
		return nil
	})
	return took
}

// TestProvisionClusterKilledMidPlacement: the cluster is SIGKILLed while
// it places a SyncComputes of 300 replicas over three agents and is
// restarted: every replica ends Active on one node, exactly one
// provider-exec command each, reservations equal to what the computes
// hold and within capacity.
func TestProvisionClusterKilledMidPlacement(t *testing.T) {
	f := newProvisionFleet(t)
	for _, a := range []string{"a1", "a2", "a3"} {
		f.agent(a)
	}
	n1, err := f.node("a1")
	if err != nil {
		t.Fatal(err)
	}
	took := converge(t, f, manyReplicas(300, n1.GetCapacity().GetMemoryBytes()), 300*time.Millisecond, 5*time.Minute)
	t.Logf("300 replicas Active %s after the sync, the cluster killed 300 ms in", took.Round(time.Millisecond))
}

// TestProvisionConvergence1000 (UNYO_PERF=1): 1,000 provider-exec
// replicas over three agents from SyncComputes to all Active; it reports
// the time (the issue asks for under 60 s) and fails only when they do not
// converge within five minutes.
func TestProvisionConvergence1000(t *testing.T) {
	if os.Getenv("UNYO_PERF") == "" {
		t.Skip("set UNYO_PERF=1 to run the convergence benchmark")
	}
	f := newProvisionFleet(t)
	for _, a := range []string{"a1", "a2", "a3"} {
		f.agent(a)
	}
	n1, err := f.node("a1")
	if err != nil {
		t.Fatal(err)
	}
	took := converge(t, f, manyReplicas(1000, n1.GetCapacity().GetMemoryBytes()), 0, 5*time.Minute)
	// A measurement, not a timed assertion: the figure depends on what
	// else the machine runs; converge fails only past its deadline.
	t.Logf("1000 replicas over 3 agents Active in %s (the issue asks for under 60 s)", took.Round(time.Millisecond))
}

// TestRegionServiceRootKilledMidPlacement: root is SIGKILLed right after a
// RegionService of six replicas is applied (at most two per node, which
// fills the three nodes' vCPUs) and restarted: the service converges with
// every replica Active exactly once, two per node, one process each.
func TestRegionServiceRootKilledMidPlacement(t *testing.T) {
	dir := t.TempDir()
	root, rootURL, _ := startServiceFleetRoot(t, dir, lightCluster)
	admin := adminCLI{t, rootURL}
	svc := strings.Replace(webService(6), "[{key: topology.unyo.dev/hostname}]", "[{key: topology.unyo.dev/hostname, max_per_domain: 2}]", 1)
	admin.must("apply", "-f", writeFile(t, dir, "web.yaml", svc))
	time.Sleep(500 * time.Millisecond)
	root.kill()
	root.restart()
	start := time.Now()
	var got map[string][]string
	testutil.Eventually(t, 90*time.Second, "web Active 6/6", func() error {
		var err error
		if got, err = rootComputes(t, rootURL); err != nil {
			return err
		}
		active := 0
		for _, p := range got {
			if p[0] == "Active" {
				active++
			}
		}
		if active != 6 || len(got) != 6 {
			return fmt.Errorf("computes: %v", got)
		}
		if n := len(serviceProcs()); n != 6 {
			return fmt.Errorf("%d replica processes run, want 6", n)
		}
		return nil
	})
	t.Logf("web converged %s after root restarted", time.Since(start).Round(time.Millisecond))
	perNode := map[string]int{}
	for name, p := range got {
		if p[1] != "c1" || p[2] == "" {
			t.Errorf("%s: %v, want Active in c1 on a node", name, p)
		}
		perNode[p[2]]++
	}
	for n, k := range perNode {
		if k != 2 {
			t.Errorf("node %s holds %d replicas, want 2: %v", n, k, got)
		}
	}
	// Still six after a while: nothing doubled late.
	time.Sleep(3 * time.Second)
	if n := len(serviceProcs()); n != 6 {
		t.Errorf("%d replica processes run after 3s more, want 6", n)
	}
}
