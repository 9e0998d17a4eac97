package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestNodeTopology: the topology root records for a node sits beside the
// agent's labels, survives the agent registering again, selects checks
// (the agent is told to fetch them again), labels the node's events, and
// cannot be set by the agent.
func TestNodeTopology(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	register := func(labels map[string]string) error {
		_, err := e.c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{
			Name: "web-1", Labels: labels, AgentResource: "srv-1",
			// What only root says is not taken from the agent.
			Resource: "forged", TopologyLabels: map[string]string{"topology.unyo.dev/rack": "forged"},
		}}))
		return err
	}
	if err := register(map[string]string{"team": "ops"}); err != nil {
		t.Fatal(err)
	}
	err := register(map[string]string{"topology.unyo.dev/rack": "r9"})
	checkRefusal(t, err, `node.labels: "topology.unyo.dev/rack": labels under topology.unyo.dev/ are root's`)

	e.apply(`
kind: Check
name: in-r1
spec:
  command: [check_dummy, "0"]
  interval: 1m
  node_selector: {topology.unyo.dev/rack: r1}
`)
	checksOf := func() (int64, []string) {
		t.Helper()
		resp, err := e.c.Agent.GetChecks(ctx, connect.NewRequest(&unyov1.GetChecksRequest{Node: "web-1"}))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range resp.Msg.GetChecks() {
			names = append(names, c.GetName())
		}
		return resp.Msg.GetRevision(), names
	}
	beat := func() int64 {
		t.Helper()
		resp, err := e.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "web-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetChecksRevision()
	}
	rev0, got := checksOf()
	if len(got) != 0 {
		t.Fatalf("checks before the node has a rack: %v", got)
	}
	if beat() != rev0 {
		t.Fatal("the heartbeat's checks revision differs from GetChecks' before any change")
	}
	node := func() *unyov1.Node {
		t.Helper()
		resp, err := e.c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: "web-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetNodes()[0]
	}
	if n := node(); n.GetResource() != "" || len(n.GetTopologyLabels()) != 0 || n.GetAgentResource() != "srv-1" {
		t.Fatalf("registered node = %v: want agent_resource kept and nothing of root's taken from the agent", n)
	}

	top := &unyov1.NodeTopology{Node: "web-1", Resource: "srv-1", Labels: map[string]string{"topology.unyo.dev/rack": "r1", "topology.unyo.dev/zone": "az1"}}
	set := func(ts ...*unyov1.NodeTopology) []string {
		t.Helper()
		resp, err := e.c.Nodes.SetNodeTopology(ctx, connect.NewRequest(&unyov1.SetNodeTopologyRequest{Nodes: ts}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetChanged()
	}
	if changed := set(top, &unyov1.NodeTopology{Node: "not-here", Reason: "x"}); !slices.Equal(changed, []string{"web-1"}) {
		t.Fatalf("changed = %v, want [web-1] (an unknown node is skipped)", changed)
	}
	if changed := set(top); len(changed) != 0 {
		t.Fatalf("the same topology again changed %v", changed)
	}
	rev1, got := checksOf()
	if !slices.Equal(got, []string{"in-r1"}) {
		t.Fatalf("checks in rack r1 = %v, want [in-r1]", got)
	}
	if rev1 == rev0 || beat() != rev1 {
		t.Fatalf("checks revision %d before, %d after the node's rack changed (heartbeat says %d): the agent would not fetch again", rev0, rev1, beat())
	}

	// Registering again keeps root's topology.
	if err := register(map[string]string{"team": "web"}); err != nil {
		t.Fatal(err)
	}
	n := node()
	if n.GetResource() != "srv-1" || n.GetTopologyLabels()["topology.unyo.dev/rack"] != "r1" || n.GetLabels()["team"] != "web" {
		t.Fatalf("node after registering again = %v", n)
	}

	// The node's events carry its topology labels (event rules match them).
	id := e.report("web-1", "disk", unyov1.Level_LEVEL_WARNING, "disk 91%", 1, time.Hour)
	ev := e.explained(id)
	if ev.GetLabels()["topology.unyo.dev/rack"] != "r1" || ev.GetLabels()["team"] != "web" {
		t.Fatalf("event labels = %v, want the node's topology and own labels", ev.GetLabels())
	}

	_, err = e.c.Nodes.SetNodeTopology(ctx, connect.NewRequest(&unyov1.SetNodeTopologyRequest{Nodes: []*unyov1.NodeTopology{
		{Node: "web-1", Labels: map[string]string{"team": "x"}},
	}}))
	checkRefusal(t, err, `nodes[0].labels: "team" is not a topology label`)
}

// TestNodeTopologyReachesEveryReplica: root records a node's topology
// through one replica; another, which answers the node's agent from
// memory, picks it up and tells the agent to fetch its checks again.
func TestNodeTopologyReachesEveryReplica(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agentSide, rootSide := startCluster(t, st), startCluster(t, st)
	if _, err := agentSide.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web-1"}})); err != nil {
		t.Fatal(err)
	}
	checks := func() (int64, int) {
		resp, err := agentSide.Agent.GetChecks(ctx, connect.NewRequest(&unyov1.GetChecksRequest{Node: "web-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetRevision(), len(resp.Msg.GetChecks())
	}
	objs, err := manifest.Decode(strings.NewReader("kind: Check\nname: in-r1\nspec: {command: [check_dummy, \"0\"], interval: 1m, node_selector: {topology.unyo.dev/rack: r1}}\n"), "check.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rootSide.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: objs})); err != nil {
		t.Fatal(err)
	}
	rev0, _ := checks()
	if _, err := rootSide.Nodes.SetNodeTopology(ctx, connect.NewRequest(&unyov1.SetNodeTopologyRequest{Nodes: []*unyov1.NodeTopology{
		{Node: "web-1", Resource: "srv-1", Labels: map[string]string{"topology.unyo.dev/rack": "r1"}},
	}})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the other replica to select the rack check for the node", func() error {
		beat, err := agentSide.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "web-1"}))
		if err != nil {
			return err
		}
		if beat.Msg.GetChecksRevision() == rev0 {
			return fmt.Errorf("the heartbeat's checks revision is still %d", rev0)
		}
		if _, n := checks(); n != 1 {
			return fmt.Errorf("%d checks for the node", n)
		}
		return nil
	})
}
