package sqlstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestRecentEvents(t *testing.T) {
	t.Parallel()
	ev := func(seqs ...int64) []recentEvent {
		out := make([]recentEvent, len(seqs))
		for i, s := range seqs {
			out[i] = recentEvent{seq: s, body: []byte{byte(s)}}
		}
		return out
	}
	type span struct {
		from, to int64
		seqs     []int64
	}
	for _, tc := range []struct {
		name   string
		spans  []span
		after  int64
		limit  int
		want   []int64
		wantOK bool
	}{
		{"nothing held", nil, 0, 10, nil, false},
		{"one span", []span{{0, 3, []int64{3, 1, 2}}}, 0, 10, []int64{1, 2, 3}, true},
		{"from inside a span", []span{{0, 3, []int64{1, 2, 3}}}, 1, 10, []int64{2, 3}, true},
		{"adjacent spans", []span{{0, 2, []int64{1, 2}}, {2, 4, []int64{3, 4}}}, 1, 10, []int64{2, 3, 4}, true},
		{"limit", []span{{0, 2, []int64{1, 2}}, {2, 4, []int64{3, 4}}}, 0, 3, []int64{1, 2, 3}, true},
		{"duplicates leave seqs empty", []span{{0, 4, []int64{1, 4}}}, 0, 10, []int64{1, 4}, true},
		{"all consumed", []span{{0, 2, []int64{1, 2}}}, 2, 10, nil, false},
		{"before the first span", []span{{5, 7, []int64{6, 7}}}, 3, 10, nil, false},
		// Another writer took 3..4: the store reads the database from then on.
		{"another writer", []span{{0, 2, []int64{1, 2}}, {4, 6, []int64{5, 6}}}, 0, 10, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recentEvents
			for _, s := range tc.spans {
				r.add(s.from, s.to, ev(s.seqs...))
			}
			got, ok := r.next(tc.after, tc.limit)
			var seqs []int64
			for _, e := range got {
				seqs = append(seqs, e.seq)
			}
			if ok != tc.wantOK || fmt.Sprint(seqs) != fmt.Sprint(tc.want) {
				t.Errorf("next(%d, %d) = %v, %v; want %v, %v", tc.after, tc.limit, seqs, ok, tc.want, tc.wantOK)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var r recentEvents
		for i := range int64(3) {
			seqs := make([]int64, recentMax/2)
			for j := range seqs {
				seqs[j] = i*recentMax/2 + int64(j) + 1
			}
			r.add(i*recentMax/2, (i+1)*recentMax/2, ev(seqs...))
		}
		if r.held > recentMax {
			t.Errorf("holds %d events, more than %d", r.held, recentMax)
		}
		if _, ok := r.next(0, 10); ok {
			t.Error("served seqs it dropped")
		}
		if got, ok := r.next(recentMax/2, 1); !ok || got[0].seq != recentMax/2+1 {
			t.Errorf("next after the dropped span = %v, %v", got, ok)
		}
	})
}

// TestNextEventsFromMemory: the events NextEvents hands the pipeline from
// memory are those a store reading the database finds, duplicates and
// replayed ids included.
func TestNextEventsFromMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "unyo.db")
	s := openSQLite(t, path)
	t.Cleanup(func() { s.Close() })
	ev := func(id string) *unyov1.Event {
		return &unyov1.Event{Id: id, Node: "web1", Check: "disk", Output: "out " + id, StartedAt: timestamppb.New(time.Unix(1, 0))}
	}
	for _, batch := range [][]*unyov1.Event{
		{ev("a"), ev("b"), ev("a")},
		{ev("b"), ev("c")},
		{ev("d")},
	} {
		if _, err := s.AppendEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	fromMemory, err := s.NextEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.recent.next(0, 100); !ok {
		t.Fatal("the store does not hold the events it committed")
	}
	other := openSQLite(t, path)
	t.Cleanup(func() { other.Close() })
	fromDB, err := other.NextEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromMemory) != 4 || len(fromDB) != len(fromMemory) {
		t.Fatalf("%d events from memory, %d from the database; want 4", len(fromMemory), len(fromDB))
	}
	for i := range fromDB {
		if fromMemory[i].Seq != fromDB[i].Seq || !proto.Equal(fromMemory[i].Event, fromDB[i].Event) {
			t.Errorf("event %d: %d %v from memory, %d %v from the database", i, fromMemory[i].Seq, fromMemory[i].Event, fromDB[i].Seq, fromDB[i].Event)
		}
	}
	// The other store's commit takes seqs this one did not: it reads the
	// database from then on, and finds the other's event.
	if _, err := other.AppendEvents(ctx, []*unyov1.Event{ev("e")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvents(ctx, []*unyov1.Event{ev("f")}); err != nil {
		t.Fatal(err)
	}
	rest, err := s.NextEvents(ctx, fromDB[len(fromDB)-1].Seq, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 2 || rest[0].Event.GetId() != "e" || rest[1].Event.GetId() != "f" {
		t.Errorf("after another writer's commit: %v, want e and f", rest)
	}
}

// BenchmarkNextEvents reads a pipeline batch (1,000 events) the way the
// pipeline does right after they were committed: from the store that
// committed them (memory), and from a second store on the same database,
// which reads them back (database).
func BenchmarkNextEvents(b *testing.B) {
	ctx := b.Context()
	path := filepath.Join(b.TempDir(), "unyo.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	other, err := OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	const batch = 1000
	events := make([]*unyov1.Event, batch)
	for i := range events {
		events[i] = &unyov1.Event{Id: fmt.Sprintf("ev-%d", i), Node: fmt.Sprintf("node-%d", i%8), Check: fmt.Sprintf("check-%d", i%40),
			Level: unyov1.Level(i % 3), Output: "result", StartedAt: timestamppb.Now(), ReceivedAt: timestamppb.Now()}
	}
	if _, err := s.AppendEvents(ctx, events); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		s    *Store
	}{{"memory", s}, {"database", other}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := bc.s.NextEvents(ctx, 0, batch)
				if err != nil || len(got) != batch {
					b.Fatalf("%d events, %v", len(got), err)
				}
			}
		})
	}
}
