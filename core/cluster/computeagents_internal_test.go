package cluster

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// An agent inside a compute (registered through its node's proxy) is
// marked with the node it came through, whatever it claims, and is
// deregistered once its compute is deleted; an ordinary node cannot mark
// itself, and stays.
func TestComputeAgentGoesWithItsCompute(t *testing.T) {
	e := newHealEnv(t, "n1")
	ctx := t.Context()
	e.sync(healReplica("web-0", "5m"))
	e.step()
	node := e.compute("web-0").GetStatus().GetNode()
	e.report(node, &unyov1.AssignmentState{Compute: "web-0", State: "running"})

	agents := &agentService{e.c}
	register := func(p server.Principal, n *unyov1.Node) {
		t.Helper()
		p.From = "127.0.0.1:5000"
		if _, err := agents.Register(server.WithPrincipal(ctx, p), connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
			t.Fatal(err)
		}
	}
	// The compute's agent claims another node; an ordinary node claims to
	// be a compute's agent.
	register(server.Principal{Kind: server.KindNode, Name: "web-0", Via: node},
		&unyov1.Node{Name: "web-0", Labels: map[string]string{LabelViaNode: "elsewhere", "app": "web"}})
	register(server.Principal{Kind: server.KindNode, Name: "n2"},
		&unyov1.Node{Name: "n2", Labels: map[string]string{LabelViaNode: node}})
	labelOf := func(name string) (string, error) {
		n, err := e.c.store.GetNode(ctx, name)
		return n.GetLabels()[LabelViaNode], err
	}
	if via, err := labelOf("web-0"); err != nil || via != node {
		t.Fatalf("the compute agent's %s = %q (%v), want %q", LabelViaNode, via, err, node)
	}
	if via, err := labelOf("n2"); err != nil || via != "" {
		t.Fatalf("an ordinary node marked itself a compute agent: %q (%v)", via, err)
	}

	sweep := func() {
		t.Helper()
		if err := (computeAgents{e.c}).sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sweep()
	if _, err := labelOf("web-0"); err != nil {
		t.Fatalf("the agent of a running compute was deregistered: %v", err)
	}

	// Root stops wanting the compute; its node's agent deletes it.
	e.sync()
	e.report(node, &unyov1.AssignmentState{Compute: "web-0", State: "deleted"})
	if _, err := e.c.store.GetCompute(ctx, "web-0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the compute is still there: %v", err)
	}
	select {
	case <-e.c.computeGone:
	default:
		t.Error("dropping the compute did not wake the sweep")
	}
	sweep()
	if _, err := labelOf("web-0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the agent of the deleted compute is still registered: %v", err)
	}
	if _, err := labelOf("n2"); err != nil {
		t.Errorf("an ordinary node went with the compute: %v", err)
	}
	if _, err := labelOf(node); err != nil {
		t.Errorf("the compute's node went with it: %v", err)
	}
}
