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

// TestDrainEndToEnd: a cluster (SIGKILLed and restarted mid-drain) and
// three agents running provider-exec. A node with two computes is
// drained: replacements run on the other nodes, the originals' processes
// are gone, nothing is reserved on the node, and the drain's maintenance
// opened and ended, with nothing doubled or leaked across the restart.
// Then a surge update runs the new spec beside the old one before the old
// one goes, and a node whose agent is killed is cordoned automatically.
func TestDrainEndToEnd(t *testing.T) {
	f := newProvisionFleet(t)
	ops := adminCLI{t: t, url: f.url}
	f.agent("a1")
	n1, err := f.node("a1")
	if err != nil {
		t.Fatal(err)
	}
	mem := n1.GetCapacity().GetMemoryBytes()
	replica := func(i int, rev int64, tag string) *unyov1.Compute {
		return &unyov1.Compute{
			Name: fmt.Sprintf("dr-%d", i), Service: "dr", Index: int32(i), Cluster: "c1", SpecRevision: rev, Surge: rev > 1,
			Spec: &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", marker},
				Env: map[string]string{"UNYO_TEST_SERVICE": tag}},
			Resources: &unyov1.ComputeResources{MemoryBytes: mem * 2 / 5},
		}
	}
	cs := []*unyov1.Compute{replica(0, 1, "dr"), replica(1, 1, "dr")}
	f.waitPhases(cs, map[string]string{"dr-0": "Active", "dr-1": "Active"})
	f.agent("a2")
	f.agent("a3")

	out := ops.must("nodes", "drain", "a1", "--deadline", "5m")
	if !strings.Contains(out, "node a1 draining") {
		t.Errorf("nodes drain: %s", out)
	}
	// The cluster dies mid-drain (a replacement placed) and comes back:
	// the drain and the replacements are in the store.
	testutil.Eventually(t, 30*time.Second, "a replacement placed", func() error {
		for _, c := range f.sync(cs) {
			if c.GetStatus().GetReplacingNode() != "" {
				return nil
			}
		}
		return fmt.Errorf("no replacement yet")
	})
	f.cluster.kill()
	f.cluster.restart()
	testutil.Eventually(t, 30*time.Second, "the cluster back", func() error {
		_, err := f.node("a1")
		return err
	})
	var got map[string]*unyov1.Compute
	testutil.Eventually(t, 60*time.Second, "both computes moved off a1", func() error {
		got = f.sync(cs)
		for _, c := range got {
			st := c.GetStatus()
			if st.GetPhase() != "Active" || st.GetNode() == "a1" || st.GetNode() == "" || st.GetReplacementPhase() != "" {
				return fmt.Errorf("%s: %v", c.GetName(), st)
			}
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, "a1 drained", func() error {
		n, err := f.node("a1")
		if err != nil {
			return err
		}
		if n.GetDrain().GetPhase() != "Drained" || n.GetReserved().GetMemoryBytes() != 0 {
			return fmt.Errorf("a1: drain %v, reserved %v", n.GetDrain(), n.GetReserved())
		}
		return nil
	})
	testutil.Eventually(t, 20*time.Second, "the originals' processes gone", func() error {
		if r := running(t); r["dr"] != 2 {
			return fmt.Errorf("running: %v", r)
		}
		return nil
	})
	checkNoOvercommit(t, f, got)
	resp, err := f.cl.Objects.Get(t.Context(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Maintenance", Name: "drain-a1"}}))
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Msg.GetObjects()[0].GetMaintenance(); m.GetEndedAt() == nil || m.GetSpec().GetNodes()[0] != "a1" {
		t.Errorf("the drain's maintenance: %v", m)
	}
	if out := ops.must("nodes", "get", "a1"); !strings.Contains(out, "Drain of a1: Drained") || !strings.Contains(out, "maintenance drain-a1") {
		t.Errorf("nodes get a1:\n%s", out)
	}

	// A surge update of dr-0: the new spec runs beside the old one, then
	// the old one goes.
	from := got["dr-0"].GetStatus().GetNode()
	cs[0] = replica(0, 2, "dr-v2")
	testutil.Eventually(t, 60*time.Second, "dr-0 updated", func() error {
		got = f.sync(cs)
		st := got["dr-0"].GetStatus()
		if st.GetSpecRevision() != 2 || st.GetPhase() != "Active" || st.GetReplacementPhase() != "" {
			return fmt.Errorf("dr-0: %v", st)
		}
		return nil
	})
	if n := got["dr-0"].GetStatus().GetNode(); n == from || n == "a1" {
		t.Errorf("dr-0 updated on %s (it ran on %s; a1 is drained)", n, from)
	}
	testutil.Eventually(t, 20*time.Second, "the old instance's process gone", func() error {
		if r := running(t); r["dr"] != 1 || r["dr-v2"] != 1 {
			return fmt.Errorf("running: %v", r)
		}
		return nil
	})
	checkNoOvercommit(t, f, got)

	// Auto-cordon: a3's agent dies; a3 is cordoned once not Ready for 2s.
	ops.must("nodes", "set", "a3", "--auto-cordon", "2s")
	f.agents["a3"].kill()
	testutil.Eventually(t, 60*time.Second, "a3 auto-cordoned", func() error {
		n, err := f.node("a3")
		if err != nil {
			return err
		}
		if !n.GetCordoned() || !n.GetAuto().GetCordoned() {
			return fmt.Errorf("a3: %s, cordoned %v, auto %v", n.GetState(), n.GetCordoned(), n.GetAuto())
		}
		return nil
	})
	if out := ops.must("nodes", "get", "a3"); !strings.Contains(out, "cordon after 2s") || !strings.Contains(out, "cordoned automatically") {
		t.Errorf("nodes get a3:\n%s", out)
	}
	if out := ops.must("events", "ls", "--check", "node-auto"); !strings.Contains(out, "cordoned automatically") {
		t.Errorf("no auto-cordon event:\n%s", out)
	}
}
