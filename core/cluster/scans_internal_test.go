package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// countingStore counts the nodes the cluster decodes through ListNodes.
type countingStore struct {
	store.Store
	listed atomic.Int64
}

func (s *countingStore) ListNodes(ctx context.Context) ([]*unyov1.Node, error) {
	nodes, err := s.Store.ListNodes(ctx)
	s.listed.Add(int64(len(nodes)))
	return nodes, err
}

// TestPerSecondLoopsReadOnlyNodesToActOn: the automatic cordon and the
// node stage's replacements run every second on the lease holder; on a
// fleet of Ready nodes without computes they read no Ready node (at
// 50,000 nodes, reading them all each second cost more than the
// heartbeats), and still cordon the node that stopped beating, drive a
// drain, and uncordon a node unyo cordoned once it is Ready again.
func TestPerSecondLoopsReadOnlyNodesToActOn(t *testing.T) {
	ctx := t.Context()
	sq, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &countingStore{Store: sq}
	now := time.Now()
	c := New(st, Options{Name: "c1", Replica: "r1", HeartbeatInterval: time.Second, AutoCordonAfter: time.Minute,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	put := func(name string, state unyov1.NodeState, beat time.Time) {
		t.Helper()
		if err := sq.UpsertNode(ctx, &unyov1.Node{Name: name, State: state, LastHeartbeat: timestamppb.New(beat)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		put(fmt.Sprintf("ready-%03d", i), unyov1.NodeState_NODE_STATE_READY, now)
	}
	put("silent", unyov1.NodeState_NODE_STATE_DOWN, now.Add(-time.Hour))
	put("back", unyov1.NodeState_NODE_STATE_READY, now)
	if _, err := sq.SetNodeCordoned(ctx, "back", true); err != nil {
		t.Fatal(err)
	}
	if err := sq.SetNodeAuto(ctx, "back", &unyov1.NodeAuto{Cordoned: true}); err != nil {
		t.Fatal(err)
	}
	put("emptied", unyov1.NodeState_NODE_STATE_READY, now)
	if err := sq.SetNodeDrain(ctx, "emptied", &unyov1.NodeDrain{Phase: store.DrainPhaseDraining, Deadline: timestamppb.New(now.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}

	auto, stage := newAutoNodes(c), newNodeStage(c)
	for range 2 { // "back" is Ready since the first pass; a minute later, uncordoned
		if err := auto.pass(ctx); err != nil {
			t.Fatal(err)
		}
		if err := stage.replacements(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Minute)
	}
	if n := st.listed.Load(); n != 0 {
		t.Errorf("the loops decoded %d nodes through ListNodes, want none", n)
	}
	get := func(name string) *unyov1.Node {
		n, err := sq.GetNode(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := get("silent"); !n.GetCordoned() || !n.GetAuto().GetCordoned() {
		t.Errorf("silent: cordoned %v, auto %v; want cordoned automatically", n.GetCordoned(), n.GetAuto())
	}
	if n := get("back"); n.GetCordoned() || n.GetAuto().GetCordoned() {
		t.Errorf("back: cordoned %v, auto %v; want uncordoned", n.GetCordoned(), n.GetAuto())
	}
	if n := get("emptied"); n.GetDrain().GetPhase() != drainDrained {
		t.Errorf("emptied: drain %v, want %s (it holds nothing)", n.GetDrain(), drainDrained)
	}
	if n := get("ready-000"); n.GetCordoned() {
		t.Errorf("ready-000 cordoned")
	}
}

// BenchmarkPerSecondLoops: one pass of the automatic cordon, of the node
// stage's replacements and of the liveness judge over 10,000 Ready nodes
// without computes (each runs every second on the lease holder), beside
// "every-node", the ListNodes each of them made before.
func BenchmarkPerSecondLoops(b *testing.B) {
	ctx := context.Background()
	sq, err := sqlstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer sq.Close()
	now := time.Now()
	for i := range 10000 {
		n := &unyov1.Node{Name: fmt.Sprintf("sim-%05d", i), State: unyov1.NodeState_NODE_STATE_READY, LastHeartbeat: timestamppb.New(now),
			Labels: map[string]string{"sim": "yes"}, Capacity: &unyov1.Capacity{Cpus: 8, MemoryBytes: 32 << 30}}
		if err := sq.UpsertNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	c := New(sq, Options{Name: "c1", Replica: "r1", HeartbeatInterval: time.Second, AutoCordonAfter: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	auto, stage := newAutoNodes(c), newNodeStage(c)
	b.Run("auto-nodes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := auto.pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replacements", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := stage.replacements(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("liveness", func(b *testing.B) {
		l := newLivenessMonitor(c)
		l.judge(ctx) // the first judgement reads every node
		b.ReportAllocs()
		for b.Loop() {
			l.judge(ctx)
		}
	})
	b.Run("every-node", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sq.ListNodes(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
