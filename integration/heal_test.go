package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
)

// healFleet is a provision fleet whose nodes turn Down within seconds,
// with agents a1, a2 and a3 and the replicas of healReplicas Active on
// them.
func healFleet(t *testing.T) (*provisionFleet, []*unyov1.Compute, map[string]*unyov1.Compute) {
	f := newProvisionFleetWith(t, "  down_after: 8s\n")
	for _, a := range []string{"a1", "a2", "a3"} {
		f.agent(a)
	}
	cs := healReplicas(t, f)
	return f, cs, f.waitPhases(cs, allActive)
}

// healReplicas are three replicas of web, two of which fill a node, that
// are replaced after their node was Down for 3s.
func healReplicas(t *testing.T, f *provisionFleet) []*unyov1.Compute {
	n, err := f.node("a1")
	if err != nil {
		t.Fatal(err)
	}
	mem := n.GetCapacity().GetMemoryBytes() * 2 / 5
	var out []*unyov1.Compute
	for i := range 3 {
		out = append(out, &unyov1.Compute{
			Name: fmt.Sprintf("web-%d", i), Service: "web", Index: int32(i), Cluster: "c1", SpecRevision: 1,
			Spec: &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", marker}, ReplaceAfter: "3s",
				Env: map[string]string{"UNYO_TEST_SERVICE": "web"}},
			Resources: &unyov1.ComputeResources{MemoryBytes: mem},
		})
	}
	return out
}

var allActive = map[string]string{"web-0": "Active", "web-1": "Active", "web-2": "Active"}

// TestSelfHealing: an agent SIGKILLed turns its node Down, and 3s later
// (replace_after) its replica is Active on another node, having shown
// reason NodeDown meanwhile; the stale original keeps running until the
// agent comes back, whose stray cleanup removes it.
func TestSelfHealing(t *testing.T) {
	f, cs, got := healFleet(t)
	victim := got["web-0"].GetStatus().GetNode()
	moved := map[string]bool{}
	for n, c := range got {
		if c.GetStatus().GetNode() == victim {
			moved[n] = true
		}
	}
	waitRunning(t, 3)
	f.agents[victim].kill()
	sawNodeDown := false
	testutil.Eventually(t, 60*time.Second, "the replicas of "+victim+" Active elsewhere", func() error {
		got = f.sync(cs)
		for n := range moved {
			st := got[n].GetStatus()
			if st.GetReason() == "NodeDown" {
				sawNodeDown = true
			}
			if st.GetPhase() != "Active" || st.GetNode() == victim {
				return fmt.Errorf("%s is %s on %s (%s %s)", n, st.GetPhase(), st.GetNode(), st.GetReason(), st.GetMessage())
			}
		}
		return nil
	})
	if !sawNodeDown {
		t.Error("no replica showed reason NodeDown while its node was Down")
	}
	checkNoOvercommit(t, f, got)
	// The original still runs: its agent is gone, not its command.
	waitRunning(t, 3+len(moved))

	f.agents[victim].restart()
	waitRunning(t, 3)
	if got := f.waitPhases(cs, allActive); got["web-0"].GetStatus().GetNode() == victim {
		t.Errorf("web-0 went back to %s", victim)
	}
	removeAll(t, f)
}

// TestPartitionGuard: two of three agents SIGKILLed at once look like a
// partition: nothing is replaced, an event says so, and once they are
// back everything is Active where it was.
func TestPartitionGuard(t *testing.T) {
	f, cs, before := healFleet(t)
	f.agents["a1"].kill()
	f.agents["a2"].kill()
	testutil.Eventually(t, 30*time.Second, "the partition event", func() error {
		resp, err := f.cl.Events.ListEvents(t.Context(), connect.NewRequest(&unyov1.ListEventsRequest{Check: "partition-guard"}))
		if err != nil {
			return err
		}
		for _, e := range resp.Msg.GetEvents() {
			if strings.Contains(e.GetOutput(), "partition suspected: 2/3 nodes Down") {
				return nil
			}
		}
		return fmt.Errorf("events: %v", resp.Msg.GetEvents())
	})
	// Well past replace_after: nothing moved.
	time.Sleep(6 * time.Second)
	got := f.sync(cs)
	for n, c := range got {
		st := c.GetStatus()
		if st.GetNode() != before[n].GetStatus().GetNode() {
			t.Errorf("%s moved from %s to %s during a partition", n, before[n].GetStatus().GetNode(), st.GetNode())
		}
		if down := st.GetNode() == "a1" || st.GetNode() == "a2"; down && !strings.Contains(st.GetMessage(), "partition suspected") {
			t.Errorf("%s on a Down node says: %s %s", n, st.GetReason(), st.GetMessage())
		}
	}
	f.agents["a1"].restart()
	f.agents["a2"].restart()
	testutil.Eventually(t, 60*time.Second, "every replica Active where it was, without a reason", func() error {
		for n, c := range f.sync(cs) {
			if st := c.GetStatus(); st.GetPhase() != "Active" || st.GetNode() != before[n].GetStatus().GetNode() || st.GetReason() != "" {
				return fmt.Errorf("%s after the partition: %v", n, st)
			}
		}
		return nil
	})
	waitRunning(t, 3)
	removeAll(t, f)
}

// removeAll removes every replica through its agent and waits until none
// runs, so that no provider shim still writes into the test's directories
// when they are removed.
func removeAll(t *testing.T, f *provisionFleet) {
	t.Helper()
	f.waitPhases(nil, map[string]string{})
	waitRunning(t, 0)
}

// waitRunning waits until n of the test's web commands run.
func waitRunning(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d web commands", n), func() error {
		if r := running(t); r["web"] != n {
			return fmt.Errorf("running: %v", r)
		}
		return nil
	})
}
