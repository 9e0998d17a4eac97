package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// TestTopologyRefreshReadsNodesOnlyOnChange: a replica checks every
// topologyRefresh whether root recorded a node's topology through another
// replica; it reads the nodes only when the store's topology generation
// moved (and every topologyFullRefresh passes in any case), and then the
// node it remembers gets the new topology, which its heartbeats' checks
// revision and its results' labels come from.
func TestTopologyRefreshReadsNodesOnlyOnChange(t *testing.T) {
	ctx := t.Context()
	sq, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &countingStore{Store: sq}
	c := New(st, Options{Name: "c1", Replica: "r1", HeartbeatInterval: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, name := range []string{"web-1", "web-2"} {
		n := &unyov1.Node{Name: name}
		if err := sq.UpsertNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		c.remember(n)
	}
	r := &topologyRefresher{c: c}
	refresh := func(wantRead bool) {
		t.Helper()
		before := st.listed.Load()
		r.refresh(ctx)
		if read := st.listed.Load() != before; read != wantRead {
			t.Errorf("refresh read the nodes: %v, want %v", read, wantRead)
		}
	}
	refresh(true) // the first refresh reads them
	refresh(false)
	refresh(false)
	// Root records a rack through another replica.
	if _, err := sq.SetNodeTopology(ctx, "web-1", &unyov1.NodeTopology{Node: "web-1", Resource: "srv-1", Labels: map[string]string{"topology.unyo.dev/rack": "r1"}}); err != nil {
		t.Fatal(err)
	}
	refresh(true)
	c.knownMu.Lock()
	got := c.known["web-1"].GetTopologyLabels()["topology.unyo.dev/rack"]
	c.knownMu.Unlock()
	if got != "r1" {
		t.Errorf("the remembered web-1 has rack %q, want r1", got)
	}
	refresh(false)
	// The same topology again changes nothing, and moves nothing.
	if _, err := sq.SetNodeTopology(ctx, "web-1", &unyov1.NodeTopology{Node: "web-1", Resource: "srv-1", Labels: map[string]string{"topology.unyo.dev/rack": "r1"}}); err != nil {
		t.Fatal(err)
	}
	refresh(false)
	for range topologyFullRefresh - 3 {
		refresh(false)
	}
	refresh(true) // topologyFullRefresh passes since the last read
}
