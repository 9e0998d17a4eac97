package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// generation returns n checks named prefix-0.. that all carry gen in their
// command, so a reader can tell which apply each one came from.
func generation(prefix string, n, gen int) []*unyov1.Object {
	objs := make([]*unyov1.Object, n)
	for i := range objs {
		c := check(fmt.Sprintf("%s-%d", prefix, i))
		c.Spec.Command = []string{"check_gen", fmt.Sprint(gen)}
		objs[i] = &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}}
	}
	return objs
}

func rulesRevision(t *testing.T, s store.Store) int64 {
	t.Helper()
	rev, err := s.RulesRevision(ctx(t))
	must(t, err)
	return rev
}

func wantResults(t *testing.T, got []store.PutResult, want ...store.PutResult) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PutObjects results = %v, want %v", got, want)
	}
}

// wantNothingStored checks that a refused apply left no check behind and
// moved no revision.
func wantNothingStored(t *testing.T, s store.Store, checksRev, rulesRev int64) {
	t.Helper()
	cs, err := s.ListChecks(ctx(t))
	must(t, err)
	if len(cs) != 0 {
		t.Errorf("%d checks stored by a refused apply, want none", len(cs))
	}
	rs, err := s.ListEventRules(ctx(t))
	must(t, err)
	if len(rs) != 0 {
		t.Errorf("%d event rules stored by a refused apply, want none", len(rs))
	}
	if got := revision(t, s); got != checksRev {
		t.Errorf("checks revision %d after a refused apply, want %d", got, checksRev)
	}
	if got := rulesRevision(t, s); got != rulesRev {
		t.Errorf("rules revision %d after a refused apply, want %d", got, rulesRev)
	}
}

// cancelAfter is a context that cancels itself the n-th time anyone asks
// whether it is done: a client giving up at a point of the apply the test
// chooses, without depending on the clock.
type cancelAfter struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int64
}

func newCancelAfter(parent context.Context, n int64) *cancelAfter {
	ctx, cancel := context.WithCancel(parent)
	c := &cancelAfter{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *cancelAfter) Err() error {
	if c.left.Add(-1) == 0 {
		c.cancel()
	}
	return c.Context.Err()
}

func objectsRevision(t *testing.T, s store.Store, kinds ...string) int64 {
	t.Helper()
	rev, err := s.ObjectsRevision(ctx(t), kinds...)
	must(t, err)
	return rev
}

func objectTests() []contractTest {
	return []contractTest{
		{"GenericReadsAndDeletes", func(t *testing.T, s store.Store) {
			rule := func(name string) *unyov1.Object {
				return &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{Name: name, Labels: map[string]string{"team": "db"}}}}
			}
			_, err := s.PutObjects(ctx(t), append(generation("disk", 1, 0), rule("b"), rule("a")))
			must(t, err)
			rs, err := s.ListObjects(ctx(t), "EventRule")
			must(t, err)
			if len(rs) != 2 || rs[0].GetEventRule().GetName() != "a" || rs[1].GetEventRule().GetName() != "b" {
				t.Errorf("ListObjects(EventRule) = %v, want rules a and b in that order", rs)
			}
			got, err := s.GetObject(ctx(t), "EventRule", "a")
			must(t, err)
			if r := got.GetEventRule(); r.GetLabels()["team"] != "db" || r.GetCreatedAt() == nil || r.GetRevision() == 0 {
				t.Errorf("GetObject(EventRule a) = %v; want its labels, created_at and revision", r)
			}
			_, err = s.GetObject(ctx(t), "EventRule", "zzz")
			wantNotFound(t, err, `"zzz"`)
			if ms, err := s.ListObjects(ctx(t), "Maintenance"); err != nil || len(ms) != 0 {
				t.Errorf("ListObjects(Maintenance) = %v, %v; want none", ms, err)
			}

			must(t, s.CountMatches(ctx(t), map[string]int64{"a": 2, "b": 1}, nil))
			must(t, s.CountMatches(ctx(t), map[string]int64{"a": 3}, nil))
			counts, err := s.ObjectCounts(ctx(t), "EventRule")
			must(t, err)
			if counts["a"] != 5 || counts["b"] != 1 {
				t.Errorf("ObjectCounts(EventRule) = %v, want a=5 b=1", counts)
			}

			checksRev, rulesRev := objectsRevision(t, s, "Check"), objectsRevision(t, s, "EventRule")
			must(t, s.DeleteObject(ctx(t), "EventRule", "a"))
			wantNotFound(t, s.DeleteObject(ctx(t), "EventRule", "a"), `"a"`)
			if got := objectsRevision(t, s, "EventRule"); got <= rulesRev {
				t.Errorf("EventRule revision %d after a delete, want past %d", got, rulesRev)
			}
			if got := objectsRevision(t, s, "Check"); got != checksRev {
				t.Errorf("Check revision moved from %d to %d by deleting a rule", checksRev, got)
			}
			if got, want := objectsRevision(t, s, "Check", "EventRule"), objectsRevision(t, s, "EventRule"); got != want {
				t.Errorf("revision of Check and EventRule = %d, want the newer, %d", got, want)
			}
			// A rule applied again under a deleted one's name starts counting
			// from nothing.
			_, err = s.PutObjects(ctx(t), []*unyov1.Object{rule("a")})
			must(t, err)
			counts, err = s.ObjectCounts(ctx(t), "EventRule")
			must(t, err)
			if counts["a"] != 0 || counts["b"] != 1 {
				t.Errorf("ObjectCounts(EventRule) after deleting and re-creating a = %v, want b=1 only", counts)
			}
			if got := objectsRevision(t, s); got != 0 {
				t.Errorf("revision of no kinds = %d, want 0", got)
			}
		}},
		{"EveryKindOneRevisionEach", func(t *testing.T, s store.Store) {
			checksRev, rulesRev := revision(t, s), rulesRevision(t, s)
			objs := append(generation("disk", 3, 0),
				&unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{Name: "page"}}},
				&unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: &unyov1.Maintenance{Name: "patch", Labels: map[string]string{"why": "kernel"}}}},
			)
			got, err := s.PutObjects(ctx(t), objs)
			must(t, err)
			wantResults(t, got, store.Created, store.Created, store.Created, store.Created, store.Created)
			if got := revision(t, s); got != checksRev+1 {
				t.Errorf("checks revision %d after one apply of 3 checks, want %d", got, checksRev+1)
			}
			if got := rulesRevision(t, s); got != rulesRev+1 {
				t.Errorf("rules revision %d after one apply of a rule and a maintenance, want %d", got, rulesRev+1)
			}
			for i := range 3 {
				if c := getCheck(t, s, fmt.Sprintf("disk-%d", i)); c.GetRevision() != checksRev+1 {
					t.Errorf("check disk-%d has revision %d, want the apply's %d", i, c.GetRevision(), checksRev+1)
				}
			}
			if _, err := s.GetEventRule(ctx(t), "page"); err != nil {
				t.Error(err)
			}
			if m, err := s.GetMaintenance(ctx(t), "patch"); err != nil || m.GetLabels()["why"] != "kernel" {
				t.Errorf("maintenance patch = %v, %v", m, err)
			}

			// Again: nothing changes, no revision moves.
			got, err = s.PutObjects(ctx(t), objs)
			must(t, err)
			wantResults(t, got, store.Unchanged, store.Unchanged, store.Unchanged, store.Unchanged, store.Unchanged)
			if got := revision(t, s); got != checksRev+1 {
				t.Errorf("checks revision moved to %d on an unchanged apply", got)
			}
			if got := rulesRevision(t, s); got != rulesRev+1 {
				t.Errorf("rules revision moved to %d on an unchanged apply", got)
			}

			// One check changed: only the checks revision moves.
			objs = generation("disk", 3, 0)
			objs[1] = generation("disk", 3, 1)[1]
			got, err = s.PutObjects(ctx(t), objs)
			must(t, err)
			wantResults(t, got, store.Unchanged, store.Configured, store.Unchanged)
			if got := revision(t, s); got != checksRev+2 {
				t.Errorf("checks revision %d after changing one check, want %d", got, checksRev+2)
			}
			if got := rulesRevision(t, s); got != rulesRev+1 {
				t.Errorf("rules revision moved to %d by an apply of checks only", got)
			}
		}},
		{"InvalidObjectStoresNothing", func(t *testing.T, s store.Store) {
			checksRev, rulesRev := revision(t, s), rulesRevision(t, s)
			for name, bad := range map[string]*unyov1.Object{
				"no kind":      {},
				"nameless":     {Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{}}},
				"nil check":    {Kind: &unyov1.Object_Check{}},
				"nameless chk": {Kind: &unyov1.Object_Check{Check: &unyov1.Check{}}},
			} {
				objs := append(generation("disk", 100, 0), bad)
				if _, err := s.PutObjects(ctx(t), objs); err == nil {
					t.Errorf("%s: PutObjects accepted an object it cannot store", name)
				} else if want := "objects[100]"; !containsAll(err.Error(), want) {
					t.Errorf("%s: error %q does not name %s", name, err, want)
				}
				wantNothingStored(t, s, checksRev, rulesRev)
			}
		}},
		{"CancelledMidwayStoresNothing", func(t *testing.T, s store.Store) {
			checksRev, rulesRev := revision(t, s), rulesRevision(t, s)
			const n = 20_000
			objs := generation("big", n, 0)
			objs = append(objs, &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{Name: "page"}}})
			cctx := newCancelAfter(ctx(t), n/2)
			_, err := s.PutObjects(cctx, objs)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("PutObjects with a context cancelled mid-way = %v, want an error wrapping context.Canceled", err)
			}
			wantNothingStored(t, s, checksRev, rulesRev)
			// The store is still usable afterwards.
			got, err := s.PutObjects(ctx(t), generation("big", 2, 0))
			must(t, err)
			wantResults(t, got, store.Created, store.Created)
		}},
		{"ConcurrentAppliesAllSucceed", func(t *testing.T, s store.Store) {
			// Overlapping applies of checks and rules at once: on PostgreSQL
			// they must queue on the revision counters, not deadlock.
			const writers, n = 4, 50
			rules := func(gen int) []*unyov1.Object {
				objs := generation("shared", n, gen)
				for i := range 5 {
					objs = append(objs, &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: &unyov1.EventRule{
						Name: fmt.Sprintf("rule-%d", i), Labels: map[string]string{"gen": fmt.Sprint(gen)},
					}}})
				}
				return objs
			}
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 5 {
						if _, err := s.PutObjects(ctx(t), rules(w*10+round)); err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			cs, err := s.ListChecks(ctx(t))
			must(t, err)
			gens := map[string]bool{}
			for _, c := range cs {
				gens[c.GetSpec().GetCommand()[1]] = true
			}
			if len(cs) != n || len(gens) != 1 {
				t.Errorf("after concurrent applies: %d checks from applies %v; want %d from one apply", len(cs), gens, n)
			}
		}},
		{"ReadersSeeWholeApplies", func(t *testing.T, s store.Store) {
			const n, applies = 200, 3
			var wg sync.WaitGroup
			done := make(chan struct{})
			var reads atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					cs, err := s.ListChecks(ctx(t))
					if err != nil {
						t.Error(err)
						return
					}
					reads.Add(1)
					if len(cs) != 0 && len(cs) != n {
						t.Errorf("a reader saw %d checks, want 0 or %d: half an apply", len(cs), n)
						return
					}
					gens := map[string]bool{}
					for _, c := range cs {
						gens[c.GetSpec().GetCommand()[1]] = true
					}
					if len(gens) > 1 {
						t.Errorf("a reader saw checks of applies %v at once: half an apply", gens)
						return
					}
				}
			}()
			for gen := range applies {
				if _, err := s.PutObjects(ctx(t), generation("web", n, gen)); err != nil {
					t.Error(err)
				}
			}
			close(done)
			wg.Wait()
			if reads.Load() == 0 {
				t.Error("the reader never read")
			}
		}},
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
