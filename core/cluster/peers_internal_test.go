package cluster

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// fakePeer answers GetStatus as a healthy cluster of its name.
type fakePeer struct {
	unyov1connect.UnimplementedStatusServiceHandler
	name string
}

func (f fakePeer) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	return connect.NewResponse(&unyov1.GetStatusResponse{Role: "cluster", Cluster: f.name, Health: &unyov1.ClusterHealth{LeaseHolder: f.name + "-1"}}), nil
}

// TestPeerWatcherRounds drives the controller's peer watch with its own
// clock: a peer that answers is ok, one that does not is a warning, then
// critical past the threshold; a peer root no longer assigns gets a last
// OK event; every replica reads the observations back from the events.
func TestPeerWatcherRounds(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewStatusServiceHandler(fakePeer{name: "b"}))
	b := httptest.NewServer(mux)
	t.Cleanup(b.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now

	c := New(st, Options{Name: "a", Replica: "a-1", Logger: log, PeerWatch: PeerWatchOptions{Interval: time.Second, Thresholds: peerwatch.Thresholds{Unreachable: 30 * time.Second}}})
	c.peers.assigned = []*unyov1.PeerAssignment{{Name: "b", Url: b.URL}, {Name: "x", Url: dead.URL}}
	w := newPeerWatcher(c)
	now := time.Now()
	w.now = func() time.Time { return now }

	// latest returns "level output" of the latest cluster-peer event per peer.
	latest := func() map[string]*unyov1.Event {
		events, err := st.ListEvents(t.Context(), store.EventFilter{Check: ingest.PeerCheck})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*unyov1.Event{}
		for _, e := range events {
			out[e.GetNode()] = e
		}
		return out
	}
	expect := func(when, peer string, level unyov1.Level, output string) {
		t.Helper()
		e := latest()[peer]
		if e.GetLevel() != level || !strings.Contains(e.GetOutput(), output) || e.GetLabels()[peerwatch.LabelWatcher] != "a" {
			t.Errorf("%s: %s's event %v %q (labels %v), want %v with %q", when, peer, e.GetLevel(), e.GetOutput(), e.GetLabels(), level, output)
		}
	}
	w.round(t.Context())
	expect("first round", "b", unyov1.Level_LEVEL_SUCCESS, "cluster b answers: controller b-1")
	expect("first round", "x", unyov1.Level_LEVEL_WARNING, "cluster x has not answered for 0s (down after 30s)")
	h := c.health(t.Context())
	if len(h.GetPeers()) != 2 || h.GetPeers()[0].GetStatus() != peerwatch.StatusOK || h.GetPeers()[1].GetStatus() != peerwatch.StatusUnreachable || h.GetPeers()[0].GetLastSeen() == nil {
		t.Errorf("health's peers = %v, want b ok (seen) and x unreachable", h.GetPeers())
	}

	now = now.Add(31 * time.Second)
	w.round(t.Context())
	expect("31s later", "x", unyov1.Level_LEVEL_CRITICAL, "cluster x has not answered for 31s (down after 30s)")
	if p := c.health(t.Context()).GetPeers(); p[1].GetStatus() != peerwatch.StatusDown {
		t.Errorf("x seen as %v, want down", p[1])
	}

	c.peers.assigned = c.peers.assigned[:1]
	now = now.Add(time.Second)
	w.round(t.Context())
	expect("x unassigned", "x", unyov1.Level_LEVEL_SUCCESS, "cluster x is no longer watched by cluster a")
	if p := c.health(t.Context()).GetPeers(); len(p) != 1 || p[0].GetCluster() != "b" {
		t.Errorf("health's peers after x left: %v, want b alone", p)
	}
}
