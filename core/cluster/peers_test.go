package cluster_test

import (
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestPeerCredentials: a cluster accepts exactly the watchers root last
// listed, for StatusService only, and answers them with its health.
func TestPeerCredentials(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := cluster.New(st, cluster.Options{Name: "b", Replica: "b-1"})
	tok, err := identity.NewToken("unyo-peer-")
	if err != nil {
		t.Fatal(err)
	}
	peer := serveWith(t, c, server.Auth{AdminTokens: []string{"admin"}}, tok)
	keep := func(watchers ...*unyov1.PeerWatcher) {
		t.Helper()
		if err := cluster.KeepPeers(c, t.Context(), &unyov1.RegisterClusterResponse{Watchers: watchers}); err != nil {
			t.Fatal(err)
		}
	}
	status := func() (*unyov1.GetStatusResponse, error) {
		resp, err := peer.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	if _, err := status(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("before root lists the watcher: %v, want Unauthenticated", err)
	}
	keep(&unyov1.PeerWatcher{Name: "a", TokenHash: identity.Hash(tok)})
	got, err := status()
	if err != nil {
		t.Fatalf("a listed watcher: %v", err)
	}
	if got.GetCluster() != "b" || got.GetHealth() == nil || got.GetHealth().GetError() != "" {
		t.Errorf("status = %v, want b's health", got)
	}
	if _, err := peer.Nodes.ListNodes(t.Context(), connect.NewRequest(&unyov1.ListNodesRequest{})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a watcher listing nodes: %v, want PermissionDenied", err)
	}
	keep() // root no longer lists it
	if _, err := status(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("after root dropped the watcher: %v, want Unauthenticated", err)
	}
}
