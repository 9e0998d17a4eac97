package cluster

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/server"
)

// newLBEnv is a healEnv holding load balancer web-lb (provider xdp, not
// placed yet); step runs the healer and the load balancer stage once and
// returns web-lb's status.
func newLBEnv(t *testing.T, nodes ...string) (*healEnv, func() *unyov1.LoadbalancerStatus) {
	e := newHealEnv(t, nodes...)
	lbs := newLBStage(e.c)
	ctx := e.t.Context()
	root := server.WithPrincipal(ctx, server.Principal{Kind: server.KindRoot, Name: "root"})
	l := &unyov1.Loadbalancer{Name: "web-lb", Service: "web", Cluster: "c1", Vip: "10.1.0.5",
		Spec: &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}}}}
	if _, err := (&provisionService{e.c}).SyncComputes(root, connect.NewRequest(&unyov1.SyncComputesRequest{Loadbalancers: []*unyov1.Loadbalancer{l}})); err != nil {
		t.Fatal(err)
	}
	return e, func() *unyov1.LoadbalancerStatus {
		t.Helper()
		if err := e.h.heal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lbs.pass(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := e.c.store.GetLoadbalancer(ctx, "web-lb")
		if err != nil {
			t.Fatal(err)
		}
		return got.GetStatus()
	}
}

// A load balancer on a node Down for lbReplaceAfter moves to another node
// (its old node's assignment goes); one Failed is placed again after
// lbRetryAfter.
func TestLoadbalancerSelfHealing(t *testing.T) {
	e, step := newLBEnv(t, "n1", "n2")
	ctx := e.t.Context()
	first := step().GetNode()
	if first != "n1" {
		t.Fatalf("placed on %q, want n1 (first by name)", first)
	}
	e.report(first, &unyov1.AssignmentState{Compute: "web-lb", State: "running"})
	if st := step(); st.GetPhase() != PhaseActive {
		t.Fatalf("after the report: %v", st)
	}
	e.down(first)
	step()
	e.advance(lbReplaceAfter - time.Second)
	if st := step(); st.GetNode() != first {
		t.Fatalf("moved before replace-after: %v", st)
	}
	e.advance(2 * time.Second)
	if st := step(); st.GetNode() != "n2" || st.GetPhase() != PhaseScheduled {
		t.Fatalf("after its node was Down for %s: %v", lbReplaceAfter, st)
	}
	if as, _, _ := e.c.store.ListAssignments(ctx, first); len(as) != 0 {
		t.Fatalf("the Down node still has %v", as)
	}
	// Its old node's late report changes nothing.
	e.report(first, &unyov1.AssignmentState{Compute: "web-lb", State: "failed", Message: "late"})
	if st := step(); st.GetPhase() != PhaseScheduled {
		t.Fatalf("after the old node's report: %v", st)
	}
	e.report("n2", &unyov1.AssignmentState{Compute: "web-lb", State: "failed", Message: "attach: no such device"})
	if st := step(); st.GetPhase() != PhaseFailed || st.GetReason() != ReasonProviderError {
		t.Fatalf("after a failure: %v", st)
	}
	_, gen, _ := e.c.store.ListAssignments(ctx, "n2")
	e.advance(lbRetryAfter + time.Second)
	if st := step(); st.GetPhase() != PhaseScheduled || st.GetNode() != "n2" {
		t.Fatalf("after lbRetryAfter: %v", st)
	}
	if as, gen2, _ := e.c.store.ListAssignments(ctx, "n2"); len(as) != 1 || gen2 <= gen {
		t.Fatalf("the retry did not move n2's assignment: %v (generation %d, was %d)", as, gen2, gen)
	}
}

// The healer judges a load balancer as it judges a replica (session 9):
// while more than half of the nodes went Down together (a partition is
// suspected) it stays on its Down node, and it moves once the guard
// clears.
func TestLoadbalancerPartitionGuard(t *testing.T) {
	e, step := newLBEnv(t, "n1", "n2", "n3")
	ctx := e.t.Context()
	if node := step().GetNode(); node != "n1" {
		t.Fatalf("placed on %q, want n1", node)
	}
	e.report("n1", &unyov1.AssignmentState{Compute: "web-lb", State: "running"})
	step()
	e.down("n1")
	e.down("n2")
	step()
	e.advance(2 * lbReplaceAfter)
	if st := step(); st.GetNode() != "n1" || st.GetPhase() != PhaseActive {
		t.Fatalf("moved while a partition is suspected (2/3 nodes Down at once): %v", st)
	}
	if err := e.c.store.SetNodeState(ctx, "n2", unyov1.NodeState_NODE_STATE_READY); err != nil {
		t.Fatal(err)
	}
	if st := step(); st.GetNode() != "n2" || st.GetPhase() != PhaseScheduled {
		t.Fatalf("after the guard cleared: %v, want moved to n2 (n1 Down, first Ready by name)", st)
	}
}
