package root

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/identity"
)

// TestRegistrationAssignsPeers: every registration answers with the ring
// as it is now: the peers the cluster watches, with its own peer
// credential, and its watchers' credential hashes; a deleted cluster
// leaves the ring and its credential with it.
func TestRegistrationAssignsPeers(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := serve(t, log, New(openStore(t, "root.db"), Options{Logger: log}).Register, func(ctx context.Context) { <-ctx.Done() })
	register := func(name string) *unyov1.RegisterClusterResponse {
		t.Helper()
		resp, err := rc.Cluster.RegisterCluster(t.Context(), connect.NewRequest(&unyov1.RegisterClusterRequest{Name: name, Url: "http://" + name + ".example:7401"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	names := func(resp *unyov1.RegisterClusterResponse) (peers, watchers []string) {
		for _, p := range resp.GetPeers() {
			peers = append(peers, p.GetName())
		}
		for _, w := range resp.GetWatchers() {
			watchers = append(watchers, w.GetName())
		}
		return peers, watchers
	}
	if p, w := names(register("a")); len(p)+len(w) != 0 {
		t.Errorf("a alone: peers %v, watchers %v; want none", p, w)
	}
	register("b")
	register("c")
	a, b, c := register("a"), register("b"), register("c")
	for _, tc := range []struct {
		resp           *unyov1.RegisterClusterResponse
		peers, watched []string
	}{{a, []string{"b", "c"}, []string{"b", "c"}}, {b, []string{"c", "a"}, []string{"a", "c"}}, {c, []string{"a", "b"}, []string{"a", "b"}}} {
		if p, w := names(tc.resp); !slices.Equal(p, tc.peers) || !slices.Equal(w, tc.watched) {
			t.Errorf("peers %v, watchers %v; want %v and %v", p, w, tc.peers, tc.watched)
		}
	}
	// a presents one credential to its peers; they accept exactly its hash.
	tokA := a.GetPeers()[0].GetToken()
	if tokA == "" || a.GetPeers()[1].GetToken() != tokA || a.GetPeers()[0].GetUrl() != "http://b.example:7401" {
		t.Fatalf("a's peers: %v", a.GetPeers())
	}
	for _, other := range []*unyov1.RegisterClusterResponse{b, c} {
		i := slices.IndexFunc(other.GetWatchers(), func(w *unyov1.PeerWatcher) bool { return w.GetName() == "a" })
		if other.GetWatchers()[i].GetTokenHash() != identity.Hash(tokA) {
			t.Errorf("a's hash as a watcher differs from its credential's")
		}
	}
	if _, err := rc.Cluster.DeleteCluster(t.Context(), connect.NewRequest(&unyov1.DeleteClusterRequest{Name: "b"})); err != nil {
		t.Fatal(err)
	}
	if p, w := names(register("a")); !slices.Equal(p, []string{"c"}) || !slices.Equal(w, []string{"c"}) {
		t.Errorf("after b's deletion a watches %v and is watched by %v; want c and c", p, w)
	}
	if b2 := register("b"); b2.GetPeers()[0].GetToken() == b.GetPeers()[0].GetToken() {
		t.Errorf("b, registered again after its deletion, got its old peer credential")
	}
}
