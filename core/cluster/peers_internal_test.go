package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestPeerCredentials: a cluster accepts exactly the watchers root last
// listed, for StatusService only, and answers them with its health.
func TestPeerCredentials(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := New(st, Options{Name: "b", Replica: "b-1", Logger: log})
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: log, Auth: server.Auth{AdminTokens: []string{"admin"}}})
	c.Register(srv)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	tok, err := identity.NewToken("unyo-peer-")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := client.New(client.Options{URL: "http://" + ln.Addr().String(), Token: tok, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	keep := func(watchers ...*unyov1.PeerWatcher) {
		t.Helper()
		if err := c.keepPeers(t.Context(), &unyov1.RegisterClusterResponse{Watchers: watchers}, client.TLSOptions{}); err != nil {
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
