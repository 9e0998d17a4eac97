package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/provision/heal"
)

// healEnv is a cluster with three nodes of 4 vCPUs, a clock the test
// moves, and the node stage and healer driven by hand.
type healEnv struct {
	t     *testing.T
	c     *Cluster
	stage *nodeStage
	h     *healer
	mu    sync.Mutex
	now   time.Time
}

func newHealEnv(t *testing.T, nodes ...string) *healEnv {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "unyo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &healEnv{t: t, now: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)}
	e.c = New(st, Options{Name: "c1", Now: e.clock})
	e.stage, e.h = newNodeStage(e.c), newHealer(e.c)
	for _, n := range nodes {
		if err := st.UpsertNode(t.Context(), &unyov1.Node{Name: n, State: unyov1.NodeState_NODE_STATE_READY,
			LastHeartbeat: timestamppb.New(e.now), Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 4 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *healEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *healEnv) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

// step runs the healer and the node stage once each.
func (e *healEnv) step() {
	e.t.Helper()
	if err := e.h.heal(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.stage.pass(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *healEnv) sync(cs ...*unyov1.Compute) {
	e.t.Helper()
	root := server.WithPrincipal(e.t.Context(), server.Principal{Kind: server.KindRoot, Name: "root"})
	if _, err := (&provisionService{e.c}).SyncComputes(root, connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs})); err != nil {
		e.t.Fatal(err)
	}
}

func (e *healEnv) report(node string, states ...*unyov1.AssignmentState) {
	e.t.Helper()
	ag := server.WithPrincipal(e.t.Context(), server.Principal{Kind: server.KindNode, Name: node})
	if _, err := (&provisionService{e.c}).ReportAssignments(ag, connect.NewRequest(&unyov1.ReportAssignmentsRequest{States: states})); err != nil {
		e.t.Fatal(err)
	}
}

func (e *healEnv) compute(name string) *unyov1.Compute {
	e.t.Helper()
	c, err := e.c.store.GetCompute(e.t.Context(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *healEnv) down(node string) {
	e.t.Helper()
	if err := e.c.store.SetNodeState(e.t.Context(), node, unyov1.NodeState_NODE_STATE_DOWN); err != nil {
		e.t.Fatal(err)
	}
}

// where is each compute's phase and node: "web-0=Active@n1 ...".
func (e *healEnv) where(names ...string) string {
	var out []string
	for _, n := range names {
		c := e.compute(n)
		out = append(out, fmt.Sprintf("%s=%s@%s", n, c.GetStatus().GetPhase(), c.GetStatus().GetNode()))
	}
	return strings.Join(out, " ")
}

func healReplica(name string, replaceAfter string) *unyov1.Compute {
	return &unyov1.Compute{Name: name, Service: "web", Cluster: "c1", SpecRevision: 1,
		Spec:      &unyov1.ComputeSpec{Provider: "exec", ReplaceAfter: replaceAfter, Schedule: &unyov1.SchedulePolicy{Nodes: nil}},
		Resources: &unyov1.ComputeResources{Vcpus: 3}}
}

// A replica on a node Down for its replace_after is placed on another
// node, one with replace_after never stays, and none moves while more than
// half of the nodes are Down (partition guard).
func TestHealNodeDown(t *testing.T) {
	e := newHealEnv(t, "n1", "n2", "n3", "n4")
	e.sync(healReplica("a-0", "1m"), healReplica("b-0", "never"))
	e.step()
	a := e.compute("a-0").GetStatus().GetNode()
	b := e.compute("b-0").GetStatus().GetNode()
	e.report(a, &unyov1.AssignmentState{Compute: "a-0", State: "running"})
	e.report(b, &unyov1.AssignmentState{Compute: "b-0", State: "running"})
	if got := e.where("a-0"); got != "a-0=Active@"+a {
		t.Fatalf("placed: %s", got)
	}
	if e.compute("a-0").GetStatus().GetSpecRevision() != 1 {
		t.Errorf("an Active replica's status lacks its spec revision: %v", e.compute("a-0").GetStatus())
	}
	e.down(a)
	e.down(b)
	e.step() // Down from now on
	e.advance(30 * time.Second)
	e.step()
	if st := e.compute("a-0").GetStatus(); st.GetPhase() != "Active" || st.GetReason() != ReasonNodeDown || !strings.Contains(st.GetMessage(), "replaced elsewhere at") {
		t.Fatalf("a-0 before replace_after: %v", st)
	}
	e.advance(31 * time.Second)
	e.step()
	st := e.compute("a-0").GetStatus()
	if st.GetPhase() != "Creating:Scheduled" || st.GetNode() == a || st.GetNode() == b || st.GetNode() == "" {
		t.Fatalf("a-0 after replace_after: %v", st)
	}
	if st := e.compute("b-0").GetStatus(); st.GetNode() != b || !strings.Contains(st.GetMessage(), "replace_after is never") {
		t.Errorf("b-0 (never) moved or says nothing: %v", st)
	}
	// The Down node's agent no longer has a-0: its stray cleanup removes it.
	as, _, err := e.c.store.ListAssignments(t.Context(), a)
	if err != nil || len(as) != 0 {
		t.Errorf("assignments of the Down node: %v, %v", as, err)
	}
	rs, _ := e.c.store.ListReservations(t.Context())
	if len(rs) != 2 {
		t.Errorf("reservations: %+v, want a-0's new one and b-0's", rs)
	}

	// A third node goes Down at once: 3/4 within the window, a partition.
	c := e.compute("a-0").GetStatus().GetNode()
	e.report(c, &unyov1.AssignmentState{Compute: "a-0", State: "running"})
	e.down(c)
	e.advance(2 * time.Minute)
	e.step()
	e.advance(2 * time.Minute)
	e.step()
	if st := e.compute("a-0").GetStatus(); st.GetNode() != c || !strings.Contains(st.GetMessage(), "partition suspected: 3/4 nodes Down") {
		t.Fatalf("a-0 during a partition: %v", st)
	}
	evs, err := e.c.store.ListEvents(t.Context(), store.EventFilter{Check: PartitionCheck})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || !strings.Contains(evs[0].GetOutput(), "partition suspected: 3/4 nodes Down") || evs[0].GetNode() != "c1" {
		t.Errorf("partition events: %v", evs)
	}
	// Two nodes come back: the guard clears and a-0 moves.
	for _, n := range []string{a, b} {
		if err := e.c.store.SetNodeState(t.Context(), n, unyov1.NodeState_NODE_STATE_READY); err != nil {
			t.Fatal(err)
		}
	}
	e.step()
	if st := e.compute("a-0").GetStatus(); st.GetNode() == c || st.GetPhase() != "Creating:Scheduled" {
		t.Fatalf("a-0 after the partition cleared: %v", st)
	}
}

// A replica its provider failed is re-created after the backoff, on the
// same node, and after MaxFailuresPerNode failures there on another.
func TestHealProviderFailures(t *testing.T) {
	e := newHealEnv(t, "n1", "n2")
	e.sync(healReplica("a-0", ""))
	e.step()
	first := e.compute("a-0").GetStatus().GetNode()
	for i := 1; i <= heal.MaxFailuresPerNode; i++ {
		e.report(first, &unyov1.AssignmentState{Compute: "a-0", State: "failed", Message: "exec: boom"})
		st := e.compute("a-0").GetStatus()
		if st.GetPhase() != "Failed" || st.GetReason() != ReasonProviderError || st.GetRetry().GetFailures() != int32(i) {
			t.Fatalf("after failure %d: %v", i, st)
		}
		e.step()
		if p := e.compute("a-0").GetStatus().GetPhase(); p != "Failed" {
			t.Fatalf("retried before the backoff: %s", p)
		}
		e.advance(heal.Backoff(i))
		e.step()
		if st := e.compute("a-0").GetStatus(); st.GetPhase() != PhaseUpdating || !strings.Contains(st.GetMessage(), "exec: boom") {
			t.Fatalf("after the backoff of failure %d: %v", i, st)
		}
		as, _, _ := e.c.store.ListAssignments(t.Context(), first)
		if len(as) != 1 || as[0].GetDesired() != "deleted" {
			t.Fatalf("the failed instance is not being removed: %v", as)
		}
		e.report(first, &unyov1.AssignmentState{Compute: "a-0", State: "deleted"})
		e.step()
		want := first
		if i == heal.MaxFailuresPerNode {
			want = map[string]string{"n1": "n2", "n2": "n1"}[first]
		}
		if got := e.where("a-0"); got != "a-0=Creating:Scheduled@"+want {
			t.Fatalf("after failure %d: %s, want on %s", i, got, want)
		}
	}
	rs, _ := e.c.store.ListReservations(t.Context())
	if len(rs) != 1 {
		t.Errorf("reservations: %+v", rs)
	}
}

// In place: a new spec revision removes the old instance first, then
// places the replica again on the same node with the new spec.
func TestReplaceInPlace(t *testing.T) {
	e := newHealEnv(t, "n1", "n2")
	e.sync(healReplica("a-0", ""))
	e.step()
	node := e.compute("a-0").GetStatus().GetNode()
	e.report(node, &unyov1.AssignmentState{Compute: "a-0", State: "running"})
	next := healReplica("a-0", "")
	next.SpecRevision, next.Spec.Env = 2, map[string]string{"V": "2"}
	e.sync(next)
	if st := e.compute("a-0").GetStatus(); st.GetPhase() != PhaseUpdating || st.GetSpecRevision() != 1 {
		t.Fatalf("after revision 2: %v", st)
	}
	// A late "running" of the old instance does not make it Active.
	e.report(node, &unyov1.AssignmentState{Compute: "a-0", State: "running"})
	e.report(node, &unyov1.AssignmentState{Compute: "a-0", State: "deleted"})
	e.step()
	if got := e.where("a-0"); got != "a-0=Creating:Scheduled@"+node {
		t.Fatalf("placed again: %s", got)
	}
	as, _, _ := e.c.store.ListAssignments(t.Context(), node)
	if len(as) != 1 || as[0].GetEnv()["V"] != "2" || as[0].GetDesired() != "running" {
		t.Fatalf("the new assignment: %v", as)
	}
	e.report(node, &unyov1.AssignmentState{Compute: "a-0", State: "running"})
	if st := e.compute("a-0").GetStatus(); st.GetPhase() != "Active" || st.GetSpecRevision() != 2 {
		t.Fatalf("after the new instance runs: %v", st)
	}
}
