package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
)

// replica is one compute of service with cpus vCPUs (1 GiB each).
func replica(service string, i int, cpus int64) *unyov1.Compute {
	return &unyov1.Compute{
		Name: fmt.Sprintf("%s-%d", service, i), Service: service, Index: int32(i), Cluster: "c1",
		Spec:      &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", "600"}},
		Resources: &unyov1.ComputeResources{Vcpus: cpus, MemoryBytes: cpus << 30},
	}
}

// TestNodeStage: computes root syncs are placed on nodes without
// overcommit and handed to their agents only; one that does not fit is
// Blocked with its reason (and an event) and placed when a node joins; one
// no node could ever hold fails at once; reports make computes Active; a
// compute root drops is deleted on its agent and its reservation released.
func TestNodeStage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	join := func(name string) {
		t.Helper()
		n := &unyov1.Node{Name: name, Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 4 << 30, DiskBytes: 10 << 30}}
		if _, err := e.c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, name+" ready", func() error {
			if _, err := e.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: name})); err != nil {
				return err
			}
			resp, err := e.c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: name}))
			if err != nil {
				return err
			}
			if resp.Msg.GetNodes()[0].GetState() != unyov1.NodeState_NODE_STATE_READY {
				return fmt.Errorf("state %s", resp.Msg.GetNodes()[0].GetState())
			}
			return nil
		})
	}
	join("n1")
	join("n2")
	want := []*unyov1.Compute{replica("web", 0, 2), replica("web", 1, 2), replica("web", 2, 2), replica("zz", 0, 4), replica("huge", 0, 16)}
	sync := func(cs []*unyov1.Compute) map[string]*unyov1.Compute {
		t.Helper()
		resp, err := e.c.Provision.SyncComputes(ctx, connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*unyov1.Compute{}
		for _, c := range resp.Msg.GetComputes() {
			out[c.GetName()] = c
		}
		return out
	}
	phases := func(got map[string]*unyov1.Compute) string {
		var b strings.Builder
		for _, c := range want {
			if g, ok := got[c.GetName()]; ok {
				fmt.Fprintf(&b, "%s=%s ", c.GetName(), g.GetStatus().GetPhase())
			}
		}
		return strings.TrimSpace(b.String())
	}
	waitPhases := func(cs []*unyov1.Compute, wantPhases string) map[string]*unyov1.Compute {
		t.Helper()
		var got map[string]*unyov1.Compute
		testutil.Eventually(t, 15*time.Second, wantPhases, func() error {
			got = sync(cs)
			if p := phases(got); p != wantPhases {
				return fmt.Errorf("phases %s", p)
			}
			return nil
		})
		return got
	}
	got := waitPhases(want, "web-0=Creating:Scheduled web-1=Creating:Scheduled web-2=Creating:Scheduled zz-0=Blocked huge-0=Failed")
	if st := got["zz-0"].GetStatus(); st.GetReason() != "NoCapacity" || !strings.Contains(st.GetMessage(), "0/2 nodes fit") ||
		!strings.Contains(st.GetMessage(), "insufficient vCPU") || len(st.GetReasons()) == 0 {
		t.Errorf("zz-0's status: %v", st)
	}
	if st := got["huge-0"].GetStatus(); st.GetReason() != "Unsatisfiable" || !strings.Contains(st.GetMessage(), "too small") {
		t.Errorf("huge-0's status: %v", st)
	}

	// Each agent gets only its own assignments; none is overcommitted.
	assignments := func(node string, since int64) (*unyov1.GetAssignmentsResponse, error) {
		resp, err := e.c.Provision.GetAssignments(ctx, connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: node, SinceGeneration: since}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	total := 0
	for _, node := range []string{"n1", "n2"} {
		a, err := assignments(node, 0)
		if err != nil {
			t.Fatal(err)
		}
		cpus := int64(0)
		var states []*unyov1.AssignmentState
		for _, as := range a.GetAssignments() {
			if as.GetNode() != node || as.GetDesired() != "running" || as.GetProvider() != "exec" {
				t.Errorf("assignment of %s: %v", node, as)
			}
			cpus += as.GetResources().GetVcpus()
			states = append(states, &unyov1.AssignmentState{Compute: as.GetCompute(), Generation: as.GetGeneration(), State: "running", Handle: "h-" + as.GetCompute()})
		}
		if cpus > 4 {
			t.Errorf("node %s overcommitted: %d vCPUs assigned", node, cpus)
		}
		total += len(a.GetAssignments())
		// A node may not report another node's computes.
		if _, err := e.c.Provision.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: node, States: states})); err != nil {
			t.Fatal(err)
		}
	}
	if total != 3 {
		t.Errorf("%d assignments, want 3", total)
	}
	waitPhases(want, "web-0=Active web-1=Active web-2=Active zz-0=Blocked huge-0=Failed")

	// The placement problem was an event through the pipeline.
	testutil.Eventually(t, 10*time.Second, "placement event", func() error {
		resp, err := e.c.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{Check: "compute-placement"}))
		if err != nil {
			return err
		}
		for _, ev := range resp.Msg.GetEvents() {
			if ev.GetLabels()["compute"] == "zz-0" && strings.Contains(ev.GetOutput(), "NoCapacity") {
				return nil
			}
		}
		return fmt.Errorf("%d placement events, none about zz-0", len(resp.Msg.GetEvents()))
	})

	// A third node joins: zz-0 is placed there, without any retry delay.
	join("n3")
	got = waitPhases(want, "web-0=Active web-1=Active web-2=Active zz-0=Creating:Scheduled huge-0=Failed")
	if n := got["zz-0"].GetStatus().GetNode(); n != "n3" {
		t.Errorf("zz-0 placed on %q, want n3", n)
	}

	// Root drops web-2: its agent is told (the long poll answers), and once
	// it reports the resource deleted the compute and its reservation go.
	node := got["web-2"].GetStatus().GetNode()
	cur, err := assignments(node, 0)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan *unyov1.GetAssignmentsResponse, 1)
	go func() {
		a, err := assignments(node, cur.GetGeneration())
		if err != nil {
			t.Error(err)
		}
		polled <- a
	}()
	want = []*unyov1.Compute{want[0], want[1], want[3], want[4]}
	got = sync(want)
	if p := got["web-2"].GetStatus().GetPhase(); p != "Deleting" {
		t.Fatalf("web-2 is %s after root dropped it, want Deleting", p)
	}
	var a *unyov1.GetAssignmentsResponse
	select {
	case a = <-polled:
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer the change")
	}
	deleted := false
	for _, as := range a.GetAssignments() {
		if as.GetCompute() == "web-2" {
			deleted = as.GetDesired() == "deleted"
		}
	}
	if !deleted {
		t.Fatalf("%s's assignments after web-2 was dropped: %v", node, a.GetAssignments())
	}
	if _, err := e.c.Provision.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: node,
		States: []*unyov1.AssignmentState{{Compute: "web-2", State: "deleted"}}})); err != nil {
		t.Fatal(err)
	}
	got = sync(want)
	if _, ok := got["web-2"]; ok {
		t.Errorf("web-2 still held after its agent deleted it: %v", got["web-2"].GetStatus())
	}
	resp, err := e.c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: node}))
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, c := range got {
		if c.GetStatus().GetNode() == node {
			held += c.GetResources().GetVcpus()
		}
	}
	if r := int64(resp.Msg.GetNodes()[0].GetReserved().GetCpus()); r != held {
		t.Errorf("node %s has %d vCPUs reserved, its computes hold %d", node, r, held)
	}

	// The only node with room is cordoned: a new replica is Blocked,
	// saying so, and placed there as soon as it is uncordoned.
	cordon := func(cordoned bool) {
		t.Helper()
		if _, err := e.c.Nodes.CordonNode(ctx, connect.NewRequest(&unyov1.CordonNodeRequest{Name: node, Cordoned: cordoned})); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	want = append(want, replica("web", 3, 2))
	got = waitPhases(want, "web-0=Active web-1=Active zz-0=Creating:Scheduled huge-0=Failed web-3=Blocked")
	if m := got["web-3"].GetStatus().GetMessage(); !strings.Contains(m, "1 cordoned") {
		t.Errorf("web-3 Blocked with %q, want it to count the cordoned node", m)
	}
	cordon(false)
	got = waitPhases(want, "web-0=Active web-1=Active zz-0=Creating:Scheduled huge-0=Failed web-3=Creating:Scheduled")
	if n := got["web-3"].GetStatus().GetNode(); n != node {
		t.Errorf("web-3 placed on %s, want %s", n, node)
	}
}
