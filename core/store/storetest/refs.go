package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
)

// refsOpts records the reference every Rack makes to its Floor, as the
// inventory kinds declare it.
var refsOpts = store.ApplyOptions{Refs: func(o *unyov1.Object) []store.Ref {
	if r := o.GetRack(); r != nil {
		return []store.Ref{{Field: "spec.floor", Kind: "Floor", Name: r.GetSpec().GetFloor()}}
	}
	return nil
}}

func floorObj(name string) *unyov1.Object {
	return kinds.Wrap(&unyov1.Floor{Name: name, Spec: &unyov1.FloorSpec{Datacenter: "dc1", Building: 1, Level: 1, Number: 1}})
}

func rackObj(name, floor string) *unyov1.Object {
	return kinds.Wrap(&unyov1.Rack{Name: name, Spec: &unyov1.RackSpec{Floor: floor}})
}

func wantReferrers(t *testing.T, s store.Store, kind, name string, want string) {
	t.Helper()
	got, err := s.Referrers(ctx(t), kind, name)
	must(t, err)
	if fmt.Sprint(got) != want {
		t.Errorf("Referrers(%s %q) = %v, want %v", kind, name, got, want)
	}
}

func refTests() []contractTest {
	return []contractTest{
		{"a batch may refer to its own objects in any order", func(t *testing.T, s store.Store) {
			_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{rackObj("r2", "f1"), rackObj("r1", "f1"), floorObj("f1")}, refsOpts)
			must(t, err)
			wantReferrers(t, s, "Floor", "f1", "[{Rack r1 spec.floor} {Rack r2 spec.floor}]")
		}},
		{"a dry run says what it would do and stores nothing", func(t *testing.T, s store.Store) {
			_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj("f1")}, refsOpts)
			must(t, err)
			dry := refsOpts
			dry.DryRun = true
			res, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj("f1"), rackObj("r1", "f1")}, dry)
			must(t, err)
			if fmt.Sprint(res) != "[unchanged created]" {
				t.Errorf("dry run results %v, want [unchanged created]", res)
			}
			if objs, _ := s.ListObjects(ctx(t), "Rack"); len(objs) != 0 {
				t.Errorf("a dry run stored %d racks", len(objs))
			}
			wantReferrers(t, s, "Floor", "f1", "[]")
			if _, err := s.ApplyObjects(ctx(t), []*unyov1.Object{rackObj("r1", "f9")}, dry); err == nil {
				t.Error("a dry run with a dangling reference is not refused")
			}
		}},
		{"a reference to nothing stores nothing", func(t *testing.T, s store.Store) {
			_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj("f1"), rackObj("r1", "f9")}, refsOpts)
			var re *store.RefError
			if !errors.As(err, &re) || err.Error() != `Rack "r1": spec.floor: no Floor "f9"` {
				t.Fatalf("ApplyObjects = %v, want a *RefError naming the rack and field", err)
			}
			if objs, _ := s.ListObjects(ctx(t), "Floor"); len(objs) != 0 {
				t.Errorf("a refused batch stored %d floors", len(objs))
			}
			wantReferrers(t, s, "Floor", "f9", "[]")
		}},
		{"delete is refused while referred to, naming the referrers", func(t *testing.T, s store.Store) {
			_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj("f1"), floorObj("f2"), rackObj("r1", "f1"), rackObj("r2", "f1")}, refsOpts)
			must(t, err)
			err = s.DeleteObject(ctx(t), "Floor", "f1")
			if !errors.Is(err, store.ErrReferenced) || err.Error() != `Floor "f1" is used by Rack "r1", Rack "r2"` {
				t.Fatalf("DeleteObject = %v, want ErrReferenced naming both racks", err)
			}
			if _, err := s.GetObject(ctx(t), "Floor", "f1"); err != nil {
				t.Fatalf("the refused delete removed the floor: %v", err)
			}
			// Moving one rack and deleting the other frees the floor.
			_, err = s.ApplyObjects(ctx(t), []*unyov1.Object{rackObj("r1", "f2")}, refsOpts)
			must(t, err)
			must(t, s.DeleteObject(ctx(t), "Rack", "r2"))
			wantReferrers(t, s, "Floor", "f2", "[{Rack r1 spec.floor}]")
			must(t, s.DeleteObject(ctx(t), "Floor", "f1"))
		}},
		{"a failed check stores nothing", func(t *testing.T, s store.Store) {
			opts := refsOpts
			opts.Check = func(ctx context.Context, r store.ObjectReader) error {
				// The check sees the batch, and its references.
				if _, err := r.GetObject(ctx, "Rack", "r1"); err != nil {
					return err
				}
				refs, err := r.Referrers(ctx, "Floor", "f1")
				if err != nil || len(refs) != 1 {
					return fmt.Errorf("referrers in the transaction = %v, %v", refs, err)
				}
				return errors.New("refused")
			}
			_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj("f1"), rackObj("r1", "f1")}, opts)
			if err == nil || err.Error() != "refused" {
				t.Fatalf("ApplyObjects = %v, want the check's error as it is", err)
			}
			if objs, _ := s.ListObjects(ctx(t), "Rack"); len(objs) != 0 {
				t.Errorf("a refused batch stored %d racks", len(objs))
			}
			wantReferrers(t, s, "Floor", "f1", "[]")
		}},
		{"an apply racing a delete never leaves a dangling reference", func(t *testing.T, s store.Store) {
			for round := range 10 {
				f := fmt.Sprintf("f%d", round)
				_, err := s.ApplyObjects(ctx(t), []*unyov1.Object{floorObj(f)}, refsOpts)
				must(t, err)
				var wg sync.WaitGroup
				var applyErr, deleteErr error
				wg.Go(func() { _, applyErr = s.ApplyObjects(ctx(t), []*unyov1.Object{rackObj("r"+f, f)}, refsOpts) })
				wg.Go(func() { deleteErr = s.DeleteObject(ctx(t), "Floor", f) })
				wg.Wait()
				_, floorErr := s.GetObject(ctx(t), "Floor", f)
				_, rackErr := s.GetObject(ctx(t), "Rack", "r"+f)
				switch {
				case applyErr == nil && deleteErr == nil:
					t.Fatalf("round %d: both the rack's apply and its floor's delete succeeded", round)
				case rackErr == nil && floorErr != nil:
					t.Fatalf("round %d: rack stored on a deleted floor (apply %v, delete %v)", round, applyErr, deleteErr)
				}
			}
		}},
	}
}
