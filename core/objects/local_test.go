package objects_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/objects"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/integration/testpg"
	"github.com/unyo-ops/unyo/provision/inventory/layout"
)

func rootLocal(st store.Store) *objects.Local {
	return &objects.Local{Kinds: builtin.Kinds(), Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tier: kinds.RootTier}
}

func openSQLite(t testing.TB) store.Store {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "root.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// backends runs fn on a root store of each backend.
func backends(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, openSQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		srv := testpg.New(t)
		st, err := sqlstore.OpenPostgres(t.Context(), srv.CreateDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// small is a region, a datacenter, a floor, a 42-unit rack r1 and two
// servers, a cabled to b.
func small() []*unyov1.Object {
	return []*unyov1.Object{
		kinds.Wrap(&unyov1.Region{Name: "reg", Spec: &unyov1.RegionSpec{Zones: []string{"az1", "az2", "az3"}}}),
		kinds.Wrap(&unyov1.Datacenter{Name: "dc1", Spec: &unyov1.DatacenterSpec{Region: "reg"}}),
		kinds.Wrap(&unyov1.Floor{Name: "f1", Spec: &unyov1.FloorSpec{Datacenter: "dc1", Building: 1, Level: 1, Number: 1}}),
		kinds.Wrap(&unyov1.Rack{Name: "r1", Spec: &unyov1.RackSpec{Floor: "f1", Zone: "az1"}}),
		server("a", 1, &unyov1.Port{Name: "eth0", Link: &unyov1.PortLink{Resource: "b", Port: "eth0"}}),
		server("b", 3, &unyov1.Port{Name: "eth0"}, &unyov1.Port{Name: "eth1"}),
	}
}

func server(name string, unit int32, ports ...*unyov1.Port) *unyov1.Object {
	return kinds.Wrap(&unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{
		Kind: "server", Rack: "r1", Unit: unit, Height: 2, Ports: ports}})
}

func TestApplyChecksReferencesAndRules(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		l := rootLocal(st)
		if _, err := l.Apply(t.Context(), small()); err != nil {
			t.Fatalf("apply the small inventory: %v", err)
		}
		rack, err := st.GetObject(t.Context(), "Rack", "r1")
		if err != nil || rack.GetRack().GetSpec().GetUnits() != 42 {
			t.Fatalf("rack r1 = %v, %v; want 42 units by default", rack, err)
		}
		bad := []struct {
			name string
			objs []*unyov1.Object
			want string
		}{
			{"unknown floor", []*unyov1.Object{kinds.Wrap(&unyov1.Rack{Name: "r2", Spec: &unyov1.RackSpec{Floor: "f9"}})},
				`Rack "r2": spec.floor: no Floor "f9"`},
			{"unit beyond the rack", []*unyov1.Object{server("c", 42)},
				`PhysicalResource "c": spec.unit: units 42-43 go beyond rack "r1", which has 42 units`},
			{"overlapping units", []*unyov1.Object{server("c", 4)},
				`PhysicalResource "c": spec.unit: units 4-5 overlap PhysicalResource "b" (units 3-4) in rack "r1"`},
			{"unknown port", []*unyov1.Object{server("c", 10, &unyov1.Port{Name: "eth0", Link: &unyov1.PortLink{Resource: "b", Port: "eth9"}})},
				`PhysicalResource "c": spec.ports[0].link: no port "eth9" on PhysicalResource "b"`},
			{"port linked twice", []*unyov1.Object{server("c", 10, &unyov1.Port{Name: "eth0", Link: &unyov1.PortLink{Resource: "b", Port: "eth0"}})},
				`PhysicalResource "c": spec.ports[0].link: port b/eth0 is linked twice: from c/eth0 and from a/eth0`},
			{"cycle", []*unyov1.Object{
				server("c", 10, &unyov1.Port{Name: "p", Link: &unyov1.PortLink{Resource: "d", Port: "p"}}),
				server("d", 12, &unyov1.Port{Name: "p", Link: &unyov1.PortLink{Resource: "e", Port: "p"}}),
				server("e", 14, &unyov1.Port{Name: "p", Link: &unyov1.PortLink{Resource: "c", Port: "p"}}),
			}, "a cycle of links: c/p → d/p → e/p → c/p"},
			{"a good object beside a bad one", []*unyov1.Object{server("c", 10), server("d", 42)}, `"d": spec.unit`},
		}
		for _, tt := range bad {
			_, err := l.Apply(t.Context(), tt.objs)
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Apply = %v, want InvalidArgument with %q", tt.name, err, tt.want)
			}
			if !strings.Contains(err.Error(), "nothing was stored") {
				t.Errorf("%s: %v does not say nothing was stored", tt.name, err)
			}
			for _, o := range tt.objs {
				if _, err := st.GetObject(t.Context(), kinds.KindOf(o), kinds.Name(o)); err == nil {
					t.Errorf("%s: %s %q was stored by a refused apply", tt.name, kinds.KindOf(o), kinds.Name(o))
				}
			}
		}
		_, err = l.Delete(t.Context(), mustKind(t, "Floor"), "f1")
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), `Floor "f1" is used by Rack "r1"`) {
			t.Errorf("delete of a referenced floor = %v, want FailedPrecondition naming rack r1", err)
		}
		_, err = l.Delete(t.Context(), mustKind(t, "PhysicalResource"), "b")
		if !strings.Contains(err.Error(), `PhysicalResource "b" is used by PhysicalResource "a"`) {
			t.Errorf("delete of a cabled resource = %v, want it refused naming a", err)
		}
		if _, err := l.Delete(t.Context(), mustKind(t, "PhysicalResource"), "a"); err != nil {
			t.Errorf("delete of an unreferenced resource: %v", err)
		}
	})
}

func mustKind(t testing.TB, name string) kinds.Kind {
	k, ok := builtin.Kinds().Lookup(name)
	if !ok {
		t.Fatalf("no kind %s", name)
	}
	return k
}

func TestApplyExampleInventory(t *testing.T) {
	st := openSQLite(t)
	objs := layout.Generate(layout.Example)
	if _, err := rootLocal(st).Apply(t.Context(), objs); err != nil {
		t.Fatalf("apply the example inventory: %v", err)
	}
	got, err := st.ListObjects(t.Context(), "PhysicalResource")
	if want, _ := layout.Count(objs); err != nil || len(got) != want {
		t.Fatalf("%d resources stored (%v), want %d", len(got), err, want)
	}
}

// BenchmarkApplyInventory applies about 10,000 physical resources with
// 40,000 links, and their racks, floors, datacenters and region, in one
// apply on SQLite (issue 13: under 10 s).
func BenchmarkApplyInventory(b *testing.B) {
	objs := layout.Generate(layout.Bench)
	resources, links := layout.Count(objs)
	b.ReportMetric(float64(resources), "resources")
	b.ReportMetric(float64(links), "links")
	for b.Loop() {
		b.StopTimer()
		st := openSQLite(b)
		l := rootLocal(st)
		b.StartTimer()
		if _, err := l.Apply(b.Context(), objs); err != nil {
			b.Fatal(err)
		}
	}
}
