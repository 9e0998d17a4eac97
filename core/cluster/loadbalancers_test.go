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

func clusterLB(backends ...string) *unyov1.Loadbalancer {
	l := &unyov1.Loadbalancer{Name: "web-lb", Service: "web", Cluster: "c1", Vip: "10.1.0.5", Network: "net",
		Spec: &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, TargetPort: 8080, Protocol: "tcp"}},
			Health: &unyov1.LoadbalancerHealth{Kind: "http", Path: "/healthz"}}}
	for i, b := range backends {
		l.Backends = append(l.Backends, &unyov1.LoadbalancerBackend{Compute: b, Address: fmt.Sprintf("10.1.0.%d", 10+i)})
	}
	return l
}

// TestLoadbalancerStage: a load balancer root syncs is Blocked while no
// node takes it, placed on one when a node joins and handed to its agent as
// an assignment carrying the VIP, ports, backends and health; the agent's
// report makes it Active with its backends' health and traffic; new
// backends rewrite the assignment at a new generation (an update in
// place); dropped by root it is deleted on its agent, then gone.
func TestLoadbalancerStage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	sync := func(ls ...*unyov1.Loadbalancer) *unyov1.Loadbalancer {
		t.Helper()
		resp, err := e.c.Provision.SyncComputes(ctx, connect.NewRequest(&unyov1.SyncComputesRequest{Loadbalancers: ls}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.GetLoadbalancers()) == 0 {
			return nil
		}
		return resp.Msg.GetLoadbalancers()[0]
	}
	waitPhase := func(ls []*unyov1.Loadbalancer, phase string) *unyov1.Loadbalancer {
		t.Helper()
		var got *unyov1.Loadbalancer
		testutil.Eventually(t, 15*time.Second, "load balancer "+phase, func() error {
			got = sync(ls...)
			if p := got.GetStatus().GetPhase(); p != phase {
				return fmt.Errorf("phase %q (%s)", p, got.GetStatus().GetMessage())
			}
			return nil
		})
		return got
	}
	// A bad one is refused, naming the field.
	bad := clusterLB()
	bad.Vip = "nope"
	if _, err := e.c.Provision.SyncComputes(ctx, connect.NewRequest(&unyov1.SyncComputesRequest{Loadbalancers: []*unyov1.Loadbalancer{bad}})); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "loadbalancers[0].vip") {
		t.Fatalf("a bad VIP: %v", err)
	}

	want := []*unyov1.Loadbalancer{clusterLB("web-0")}
	if got := waitPhase(want, "Blocked"); got.GetStatus().GetReason() != "NoCapacity" || got.GetStatus().GetMessage() == "" {
		t.Errorf("Blocked with %v", got.GetStatus())
	}
	n := &unyov1.Node{Name: "n1", Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 4 << 30, DiskBytes: 10 << 30}}
	if _, err := e.c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "n1 ready", func() error {
		_, err := e.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n1"}))
		return err
	})
	got := waitPhase(want, "Creating:Scheduled")
	if got.GetStatus().GetNode() != "n1" {
		t.Fatalf("placed on %q", got.GetStatus().GetNode())
	}
	assignment := func() (*unyov1.Assignment, int64) {
		t.Helper()
		resp, err := e.c.Provision.GetAssignments(ctx, connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: "n1"}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.GetAssignments()) != 1 {
			t.Fatalf("assignments of n1: %v", resp.Msg.GetAssignments())
		}
		return resp.Msg.GetAssignments()[0], resp.Msg.GetGeneration()
	}
	a, _ := assignment()
	lb := a.GetLoadbalancer()
	if a.GetCompute() != "web-lb" || a.GetProvider() != "xdp" || a.GetDesired() != "running" || lb.GetVip() != "10.1.0.5" ||
		len(lb.GetPorts()) != 1 || lb.GetPorts()[0].GetTargetPort() != 8080 || len(lb.GetBackends()) != 1 || lb.GetHealth().GetPath() != "/healthz" {
		t.Fatalf("n1's assignment: %v", a)
	}
	report := func(state string, backends ...*unyov1.LoadbalancerBackendStatus) {
		t.Helper()
		_, err := e.c.Provision.ReportAssignments(ctx, connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: "n1", States: []*unyov1.AssignmentState{
			{Compute: "web-lb", Generation: a.GetGeneration(), State: state, Handle: "xdp/web-lb", Backends: backends, Packets: 10, Bytes: 1000}}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	report("running", &unyov1.LoadbalancerBackendStatus{Compute: "web-0", Address: "10.1.0.10", Healthy: true, Packets: 10, Bytes: 1000})
	got = waitPhase(want, "Active")
	if st := got.GetStatus(); len(st.GetBackends()) != 1 || !st.GetBackends()[0].GetHealthy() || st.GetPackets() != 10 || st.GetHandle() != "xdp/web-lb" {
		t.Fatalf("Active with %v", st)
	}

	// A backend joins: the same assignment at a new generation.
	want = []*unyov1.Loadbalancer{clusterLB("web-0", "web-1")}
	sync(want...)
	a2, _ := assignment()
	if a2.GetGeneration() <= a.GetGeneration() || len(a2.GetLoadbalancer().GetBackends()) != 2 || a2.GetDesired() != "running" {
		t.Fatalf("after a backend joined: %v (was generation %d)", a2, a.GetGeneration())
	}
	if got := sync(want...); got.GetStatus().GetPhase() != "Active" {
		t.Fatalf("an update in place left it %v", got.GetStatus())
	}

	// Dropped by root: deleted on its agent, then gone.
	if got := sync(); got.GetStatus().GetPhase() != "Deleting" {
		t.Fatalf("dropped: %v", got.GetStatus())
	}
	a, _ = assignment()
	if a.GetDesired() != "deleted" {
		t.Fatalf("the dropped load balancer's assignment: %v", a)
	}
	report("deleted")
	if got := sync(); got != nil {
		t.Fatalf("still held after its agent deleted it: %v", got)
	}
}
