package cluster_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestHeartbeatPluginsUnchanged: a heartbeat that says its plugins are
// unchanged keeps those the cluster has; one that carries a list replaces
// them, an empty one included.
func TestHeartbeatPluginsUnchanged(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "web-1")
	beat := func(req *unyov1.HeartbeatRequest) {
		t.Helper()
		req.Node = "web-1"
		if _, err := e.c.Agent.Heartbeat(ctx, connect.NewRequest(req)); err != nil {
			t.Fatal(err)
		}
	}
	plugins := func() []*unyov1.PluginStatus {
		t.Helper()
		resp, err := e.c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: "web-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetNodes()[0].GetPlugins()
	}
	running := []*unyov1.PluginStatus{{Kind: "check", Name: "http", Version: "1.0.0", State: "running"}}
	beat(&unyov1.HeartbeatRequest{Plugins: running})
	if got := plugins(); len(got) != 1 || got[0].GetState() != "running" {
		t.Fatalf("plugins after a full heartbeat: %v", got)
	}
	beat(&unyov1.HeartbeatRequest{PluginsUnchanged: true})
	if got := plugins(); len(got) != 1 || got[0].GetState() != "running" {
		t.Errorf("plugins after an unchanged heartbeat: %v, want http running kept", got)
	}
	beat(&unyov1.HeartbeatRequest{})
	if got := plugins(); len(got) != 0 {
		t.Errorf("plugins after a heartbeat with none: %v, want none", got)
	}
}
