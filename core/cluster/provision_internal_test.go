package cluster

import (
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// An agent acts only for its own node: it may not sync computes, it gets
// only its node's assignments whatever node it names, and it cannot
// report for another node's computes.
func TestProvisionIdentities(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "unyo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := New(st, Options{Name: "c1"})
	svc := &provisionService{c}
	web1 := server.WithPrincipal(t.Context(), server.Principal{Kind: server.KindNode, Name: "web1"})
	root := server.WithPrincipal(t.Context(), server.Principal{Kind: server.KindRoot, Name: "root"})
	for _, n := range []string{"web1", "web2"} {
		if err := st.UpsertNode(t.Context(), &unyov1.Node{Name: n, State: unyov1.NodeState_NODE_STATE_READY,
			Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 4 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	cs := []*unyov1.Compute{
		{Name: "a-0", Service: "a", Spec: &unyov1.ComputeSpec{Provider: "exec"}, Resources: &unyov1.ComputeResources{Vcpus: 1}},
		{Name: "b-0", Service: "b", Spec: &unyov1.ComputeSpec{Provider: "exec"}, Resources: &unyov1.ComputeResources{Vcpus: 1}},
	}
	if _, err := svc.SyncComputes(web1, connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("an agent synced computes: %v", err)
	}
	if _, err := svc.SyncComputes(root, connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs})); err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"web1", "web2"} {
		n, err := st.GetNode(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReserveCompute(t.Context(), store.Reservation{Compute: cs[i].GetName(), Service: cs[i].GetService(), Node: node,
			Resources: schedule.Resources{VCPUs: 1}, Generation: n.GetGeneration()}, assignmentFor(cs[i]),
			&unyov1.ComputeStatus{Phase: PhaseScheduled, Node: node}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := svc.GetAssignments(web1, connect.NewRequest(&unyov1.GetAssignmentsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if as := resp.Msg.GetAssignments(); len(as) != 1 || as[0].GetCompute() != "a-0" {
		t.Errorf("web1's assignments: %v", as)
	}
	if _, err := svc.GetAssignments(web1, connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: "web2"})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("web1 asked for web2's assignments: %v", err)
	}
	// web1 reports b-0 (web2's) running: ignored.
	if _, err := svc.ReportAssignments(web1, connect.NewRequest(&unyov1.ReportAssignmentsRequest{
		States: []*unyov1.AssignmentState{{Compute: "b-0", State: "running"}, {Compute: "a-0", State: "failed", Message: "exec: no such file"}}})); err != nil {
		t.Fatal(err)
	}
	b, _ := st.GetCompute(t.Context(), "b-0")
	a, _ := st.GetCompute(t.Context(), "a-0")
	if b.GetStatus().GetPhase() != PhaseScheduled {
		t.Errorf("b-0 is %s after another node reported it", b.GetStatus().GetPhase())
	}
	if st := a.GetStatus(); st.GetPhase() != PhaseFailed || st.GetReason() != ReasonProviderError || st.GetMessage() != "exec: no such file" {
		t.Errorf("a-0 after its agent reported a failure: %v", st)
	}
}
