// Package storetest is the contract every store.Store backend passes. A
// backend's tests call Run with a function that opens a new, empty store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/testutil"
)

// Run runs the contract suite. open must return a new, empty store each time
// it is called; Run closes the store when the subtest that opened it ends.
// Subtests run in parallel, each with its own store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		tests []contractTest
	}{
		{"Nodes", nodeTests()},
		{"Checks", checkTests()},
		{"Objects", objectTests()},
		{"Refs", refTests()},
		{"Events", eventTests()},
		{"Clusters", clusterTests()},
		{"Leases", leaseTests()},
		{"LogPositions", logPositionTests()},
		{"Stats", statsTests()},
		{"Credentials", credentialTests()},
		{"Tokens", tokenTests()},
		{"Audit", auditTests()},
		{"Pipeline", pipelineTests()},
		{"Watched", watchedTests()},
		{"Addresses", addressTests()},
		{"Computes", computeTests()},
		{"Replacement", replaceTests()},
		{"PortLinks", portLinkTests()},
		{"Loadbalancers", loadbalancerTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					s := open(t)
					t.Cleanup(func() {
						if err := s.Close(); err != nil {
							t.Errorf("close store: %v", err)
						}
					})
					tc.fn(t, s)
				})
			}
		})
	}
}

type contractTest struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// at is a fixed time plus sec seconds, so that no test depends on the clock
// except where the store sets a time itself.
func at(sec int) *timestamppb.Timestamp {
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return timestamppb.New(base.Add(time.Duration(sec) * time.Second))
}

func ctx(t *testing.T) context.Context { return t.Context() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantNotFound checks that err wraps store.ErrNotFound and names the object.
func wantNotFound(t *testing.T, err error, name string) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got error %v, want one wrapping store.ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name %q", err, name)
	}
}

func wantEqual(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\ngot  %v\nwant %v", what, prototext.Format(got), prototext.Format(want))
	}
}

func wantTime(t *testing.T, what string, got *timestamppb.Timestamp, want time.Time) {
	t.Helper()
	if got == nil || !got.AsTime().Equal(want) {
		t.Errorf("%s = %v, want %v", what, got.AsTime(), want)
	}
}

// wantRecent checks that a time the store set itself lies in [from, now].
func wantRecent(t *testing.T, what string, got *timestamppb.Timestamp, from time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s is unset, want about now", what)
		return
	}
	if tm := got.AsTime(); tm.Before(from) || tm.After(time.Now()) {
		t.Errorf("%s = %v, want between %v and now", what, tm, from)
	}
}

// ----- nodes

func node(name string) *unyov1.Node {
	return &unyov1.Node{
		Name:         name,
		Cluster:      "c1",
		Labels:       map[string]string{"role": "web", "zone": "a"},
		Capacity:     &unyov1.Capacity{Cpus: 4, MemoryBytes: 8 << 30, DiskBytes: 100 << 30},
		Address:      name + ":7070",
		AgentVersion: "1.0.0",
		Os:           "linux",
		Kernel:       "6.1.0",
	}
}

func getNode(t *testing.T, s store.Store, name string) *unyov1.Node {
	t.Helper()
	n, err := s.GetNode(ctx(t), name)
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func nodeTests() []contractTest {
	return []contractTest{
		{"UpsertSetsRegisteredAtWhenUnset", func(t *testing.T, s store.Store) {
			before := time.Now()
			in := node("web1")
			must(t, s.UpsertNode(ctx(t), in))
			got := getNode(t, s, "web1")
			wantRecent(t, "registered_at", got.GetRegisteredAt(), before)
			want := proto.Clone(in).(*unyov1.Node)
			want.RegisteredAt = got.GetRegisteredAt()
			wantEqual(t, "stored node", got, want)
		}},
		{"UpsertKeepsFirstRegistrationAndUpdatesTheRest", func(t *testing.T, s store.Store) {
			first := node("web1")
			first.RegisteredAt = at(0)
			must(t, s.UpsertNode(ctx(t), first))
			second := node("web1")
			second.RegisteredAt = at(100)
			second.Address = "10.0.0.9:7070"
			second.Labels = map[string]string{"role": "db"}
			second.AgentVersion = "1.1.0"
			second.State = unyov1.NodeState_NODE_STATE_STALE
			must(t, s.UpsertNode(ctx(t), second))
			got := getNode(t, s, "web1")
			want := proto.Clone(second).(*unyov1.Node)
			want.RegisteredAt = at(0)
			wantEqual(t, "re-registered node", got, want)

			// Unset registered_at on re-registration keeps the first one too.
			third := node("web1")
			must(t, s.UpsertNode(ctx(t), third))
			wantTime(t, "registered_at", getNode(t, s, "web1").GetRegisteredAt(), at(0).AsTime())
		}},
		{"UpsertWithoutHeartbeatKeepsLastHeartbeat", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), node("web1")))
			must(t, s.TouchNodes(ctx(t), map[string]time.Time{"web1": at(50).AsTime()}))
			must(t, s.UpsertNode(ctx(t), node("web1")))
			wantTime(t, "last_heartbeat", getNode(t, s, "web1").GetLastHeartbeat(), at(50).AsTime())
		}},
		{"UpsertRejectsUnnamedNode", func(t *testing.T, s store.Store) {
			if err := s.UpsertNode(ctx(t), &unyov1.Node{}); err == nil {
				t.Fatal("UpsertNode accepted a node without a name")
			}
		}},
		{"GetMissingNode", func(t *testing.T, s store.Store) {
			_, err := s.GetNode(ctx(t), "web1")
			wantNotFound(t, err, `"web1"`)
		}},
		{"ListNodesSortedByName", func(t *testing.T, s store.Store) {
			nodes, err := s.ListNodes(ctx(t))
			must(t, err)
			if len(nodes) != 0 {
				t.Fatalf("empty store lists %d nodes", len(nodes))
			}
			for _, name := range []string{"web2", "db1", "web10", "Web3"} {
				must(t, s.UpsertNode(ctx(t), node(name)))
			}
			nodes, err = s.ListNodes(ctx(t))
			must(t, err)
			var names []string
			for _, n := range nodes {
				names = append(names, n.GetName())
			}
			// Bytewise order, the same on every backend.
			if got, want := strings.Join(names, " "), "Web3 db1 web10 web2"; got != want {
				t.Errorf("ListNodes order = %s, want %s", got, want)
			}
		}},
		{"ListNodesMatching", func(t *testing.T, s store.Store) {
			ready := func(name string) {
				n := node(name)
				n.State = unyov1.NodeState_NODE_STATE_READY
				must(t, s.UpsertNode(ctx(t), n))
			}
			for _, name := range []string{"ready", "auto", "draining", "drained"} {
				ready(name)
			}
			must(t, s.UpsertNode(ctx(t), node("new"))) // no state yet: not Ready
			down := node("down")
			down.State = unyov1.NodeState_NODE_STATE_DOWN
			must(t, s.UpsertNode(ctx(t), down))
			must(t, s.SetNodeAuto(ctx(t), "auto", &unyov1.NodeAuto{Cordoned: true}))
			must(t, s.SetNodeDrain(ctx(t), "draining", &unyov1.NodeDrain{Phase: store.DrainPhaseDraining}))
			must(t, s.SetNodeDrain(ctx(t), "drained", &unyov1.NodeDrain{Phase: "Drained"}))
			for _, tc := range []struct {
				f    store.NodeFilter
				want string
			}{
				{store.NodeFilter{}, ""},
				{store.NodeFilter{NotReady: true}, "down new"},
				{store.NodeFilter{Auto: true}, "auto"},
				{store.NodeFilter{Draining: true}, "draining"},
				{store.NodeFilter{NotReady: true, Auto: true}, "auto down new"},
				{store.NodeFilter{NotReady: true, Auto: true, Draining: true}, "auto down draining new"},
			} {
				nodes, err := s.ListNodesMatching(ctx(t), tc.f)
				must(t, err)
				var names []string
				for _, n := range nodes {
					names = append(names, n.GetName())
					if !proto.Equal(n, getNode(t, s, n.GetName())) {
						t.Errorf("ListNodesMatching(%+v): node %s differs from GetNode's", tc.f, n.GetName())
					}
				}
				if got := strings.Join(names, " "); got != tc.want {
					t.Errorf("ListNodesMatching(%+v) = %q, want %q", tc.f, got, tc.want)
				}
			}
		}},
		{"TouchNodes", func(t *testing.T, s store.Store) {
			for name, state := range map[string]unyov1.NodeState{
				"new":   unyov1.NodeState_NODE_STATE_UNSPECIFIED,
				"stale": unyov1.NodeState_NODE_STATE_STALE,
				"down":  unyov1.NodeState_NODE_STATE_DOWN,
				"ready": unyov1.NodeState_NODE_STATE_READY,
			} {
				n := node(name)
				n.State = state
				must(t, s.UpsertNode(ctx(t), n))
			}
			seen := map[string]time.Time{
				"new": at(10).AsTime(), "stale": at(11).AsTime(), "down": at(12).AsTime(),
				"ready": at(13).AsTime(), "ghost": at(14).AsTime(),
			}
			must(t, s.TouchNodes(ctx(t), seen))
			for name, want := range map[string]unyov1.NodeState{
				// Only a node that has no state yet becomes READY: whether a
				// STALE or DOWN node is back is the liveness logic's decision.
				"new":   unyov1.NodeState_NODE_STATE_READY,
				"stale": unyov1.NodeState_NODE_STATE_STALE,
				"down":  unyov1.NodeState_NODE_STATE_DOWN,
				"ready": unyov1.NodeState_NODE_STATE_READY,
			} {
				n := getNode(t, s, name)
				if n.GetState() != want {
					t.Errorf("node %s: state %v after touch, want %v", name, n.GetState(), want)
				}
				wantTime(t, "last_heartbeat of "+name, n.GetLastHeartbeat(), seen[name])
			}
			_, err := s.GetNode(ctx(t), "ghost")
			wantNotFound(t, err, "ghost")
			// ListNodeBeats: the same liveness columns as the nodes, sorted,
			// zero for a node never heard from.
			must(t, s.UpsertNode(ctx(t), node("silent")))
			beats, err := s.ListNodeBeats(ctx(t), time.Time{})
			must(t, err)
			var names []string
			for _, b := range beats {
				names = append(names, b.Name)
				if b.Name == "silent" {
					if !b.LastHeartbeat.IsZero() {
						t.Errorf("ListNodeBeats: node silent heard from at %v, want never", b.LastHeartbeat)
					}
					continue
				}
				n := getNode(t, s, b.Name)
				if b.State != n.GetState() || !b.LastHeartbeat.Equal(n.GetLastHeartbeat().AsTime()) {
					t.Errorf("ListNodeBeats: %+v, want state %v and last heartbeat %v as ListNodes", b, n.GetState(), n.GetLastHeartbeat().AsTime())
				}
			}
			if want := []string{"down", "new", "ready", "silent", "stale"}; !slices.Equal(names, want) {
				t.Errorf("ListNodeBeats names = %v, want %v", names, want)
			}
			// Only those that may change state: not Ready, or Ready and
			// silent since before lateBefore ("new", Ready at 10; not
			// "ready", heard from at 13).
			late, err := s.ListNodeBeats(ctx(t), at(13).AsTime())
			must(t, err)
			names = names[:0]
			for _, b := range late {
				names = append(names, b.Name)
			}
			if want := []string{"down", "new", "silent", "stale"}; !slices.Equal(names, want) {
				t.Errorf("ListNodeBeats(late before 13) names = %v, want %v", names, want)
			}

			// A late, older heartbeat does not move last_heartbeat back.
			must(t, s.TouchNodes(ctx(t), map[string]time.Time{"new": at(5).AsTime()}))
			wantTime(t, "last_heartbeat after an older touch", getNode(t, s, "new").GetLastHeartbeat(), at(10).AsTime())
			must(t, s.TouchNodes(ctx(t), nil))
		}},
		{"TouchManyNodes", func(t *testing.T, s store.Store) {
			seen := map[string]time.Time{}
			// Not a multiple of the statement's rows: the last is padded.
			for i := range 2550 {
				name := fmt.Sprintf("n%04d", i)
				if i%2 == 0 {
					must(t, s.UpsertNode(ctx(t), node(name)))
				}
				seen[name] = at(i).AsTime()
			}
			must(t, s.TouchNodes(ctx(t), seen))
			nodes, err := s.ListNodes(ctx(t))
			must(t, err)
			if len(nodes) != 1275 {
				t.Fatalf("%d nodes after touching, want the 1275 registered", len(nodes))
			}
			for _, n := range nodes {
				wantTime(t, "last_heartbeat of "+n.GetName(), n.GetLastHeartbeat(), seen[n.GetName()])
			}
		}},
		{"SetNodeState", func(t *testing.T, s store.Store) {
			must(t, s.UpsertNode(ctx(t), node("web1")))
			must(t, s.SetNodeState(ctx(t), "web1", unyov1.NodeState_NODE_STATE_DOWN))
			if got := getNode(t, s, "web1").GetState(); got != unyov1.NodeState_NODE_STATE_DOWN {
				t.Errorf("state = %v, want DOWN", got)
			}
			// A touch does not revive a DOWN node.
			must(t, s.TouchNodes(ctx(t), map[string]time.Time{"web1": at(1).AsTime()}))
			if got := getNode(t, s, "web1").GetState(); got != unyov1.NodeState_NODE_STATE_DOWN {
				t.Errorf("state after touch = %v, want DOWN", got)
			}
			wantNotFound(t, s.SetNodeState(ctx(t), "ghost", unyov1.NodeState_NODE_STATE_READY), `"ghost"`)
		}},
		{"SetNodePlugins", func(t *testing.T, s store.Store) {
			n := node("web1")
			n.Labels = map[string]string{"role": "web"}
			must(t, s.UpsertNode(ctx(t), n))
			must(t, s.SetNodeState(ctx(t), "web1", unyov1.NodeState_NODE_STATE_DOWN))
			plugins := []*unyov1.PluginStatus{{Kind: "check", Name: "tcp", Version: "1.2.3", State: "running", Restarts: 2, LastError: "boom", Since: at(3)}}
			must(t, s.SetNodePlugins(ctx(t), "web1", plugins))
			got := getNode(t, s, "web1")
			if !proto.Equal(got.GetPlugins()[0], plugins[0]) || len(got.GetPlugins()) != 1 {
				t.Errorf("plugins = %v, want %v", got.GetPlugins(), plugins)
			}
			if got.GetState() != unyov1.NodeState_NODE_STATE_DOWN || got.GetLabels()["role"] != "web" {
				t.Errorf("state %v, labels %v: want DOWN and the labels kept", got.GetState(), got.GetLabels())
			}
			must(t, s.SetNodePlugins(ctx(t), "web1", nil))
			if got := getNode(t, s, "web1").GetPlugins(); len(got) != 0 {
				t.Errorf("plugins after clearing = %v", got)
			}
			wantNotFound(t, s.SetNodePlugins(ctx(t), "ghost", plugins), `"ghost"`)
		}},
		{"SetNodeProviders", func(t *testing.T, s store.Store) {
			n := node("web1")
			n.Labels = map[string]string{"role": "web"}
			must(t, s.UpsertNode(ctx(t), n))
			gen := getNode(t, s, "web1").GetGeneration()
			steps := []struct {
				name  string
				set   []*unyov1.ProviderStatus
				moves bool
			}{
				{"first report", []*unyov1.ProviderStatus{{Name: "docker", Reason: "dockerd down", Since: at(1)}}, true},
				{"other words, same health", []*unyov1.ProviderStatus{{Name: "docker", Reason: "dockerd gone", Since: at(1)}}, false},
				{"healthy", []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 2}, Attributes: map[string]string{"docker.version": "20.10"}, Since: at(2)}}, true},
				{"attributes only", []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 2}, Attributes: map[string]string{"docker.version": "20.11"}, Since: at(2)}}, false},
				{"capacity", []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 4}, Since: at(2)}}, true},
				{"none", nil, true},
			}
			for _, st := range steps {
				must(t, s.SetNodeProviders(ctx(t), "web1", st.set))
				got := getNode(t, s, "web1")
				if len(got.GetProviders()) != len(st.set) || (len(st.set) > 0 && !proto.Equal(got.GetProviders()[0], st.set[0])) {
					t.Errorf("%s: providers = %v, want %v", st.name, got.GetProviders(), st.set)
				}
				if moved := got.GetGeneration() != gen; moved != st.moves {
					t.Errorf("%s: generation %d -> %d, want moved %v", st.name, gen, got.GetGeneration(), st.moves)
				}
				gen = got.GetGeneration()
				if got.GetLabels()["role"] != "web" {
					t.Errorf("%s: labels %v, want them kept", st.name, got.GetLabels())
				}
			}
			wantNotFound(t, s.SetNodeProviders(ctx(t), "ghost", nil), `"ghost"`)
		}},
		{"SetNodeTopology", func(t *testing.T, s store.Store) {
			n := node("web1")
			n.Labels = map[string]string{"role": "web"}
			must(t, s.UpsertNode(ctx(t), n))
			top := &unyov1.NodeTopology{Resource: "srv-1", Labels: map[string]string{"topology.unyo.dev/rack": "r1"}}
			gen := func() int64 {
				t.Helper()
				g, err := s.NodeTopologyGeneration(ctx(t))
				must(t, err)
				return g
			}
			g0 := gen()
			if changed, err := s.SetNodeTopology(ctx(t), "web1", top); err != nil || !changed {
				t.Fatalf("first set: changed %v, err %v; want a change", changed, err)
			}
			if g1 := gen(); g1 == g0 {
				t.Errorf("a change left the topology generation at %d", g1)
			}
			g0 = gen()
			must(t, s.UpsertNode(ctx(t), node("web2"))) // not a topology change
			if _, err := s.SetNodeTopology(ctx(t), "web1", top); err != nil {
				t.Fatal(err)
			}
			if g1 := gen(); g1 != g0 {
				t.Errorf("no change moved the topology generation from %d to %d", g0, g1)
			}
			got := getNode(t, s, "web1")
			if got.GetResource() != "srv-1" || got.GetTopologyLabels()["topology.unyo.dev/rack"] != "r1" || got.GetLabels()["role"] != "web" {
				t.Errorf("node = %v: want the resource and topology beside the agent's labels", got)
			}
			if changed, err := s.SetNodeTopology(ctx(t), "web1", top); err != nil || changed {
				t.Errorf("same again: changed %v, err %v; want no change", changed, err)
			}
			if changed, err := s.SetNodeTopology(ctx(t), "web1", &unyov1.NodeTopology{Reason: "gone"}); err != nil || !changed {
				t.Errorf("resource gone: changed %v, err %v; want a change", changed, err)
			}
			if got := getNode(t, s, "web1"); got.GetResource() != "" || len(got.GetTopologyLabels()) != 0 || got.GetTopologyReason() != "gone" {
				t.Errorf("node after its resource went = %v", got)
			}
			_, err := s.SetNodeTopology(ctx(t), "ghost", top)
			wantNotFound(t, err, `"ghost"`)
		}},
	}
}

// ----- checks

func check(name string) *unyov1.Check {
	return &unyov1.Check{
		Name:    name,
		Cluster: "c1",
		Labels:  map[string]string{"team": "ops"},
		Source:  "central",
		Spec: &unyov1.CheckSpec{
			Command:      []string{"check_disk", "-w", "20%", "-c", "10%"},
			Interval:     "30s",
			Timeout:      "10s",
			Occurrences:  2,
			NodeSelector: map[string]string{"role": "web"},
			Env:          map[string]string{"LANG": "C"},
		},
	}
}

func put(t *testing.T, s store.Store, c *unyov1.Check, want store.PutResult) {
	t.Helper()
	got, err := s.PutCheck(ctx(t), c)
	if err != nil {
		t.Fatalf("put check %s: %v", c.GetName(), err)
	}
	if got != want {
		t.Fatalf("put check %s: %s, want %s", c.GetName(), got, want)
	}
}

func revision(t *testing.T, s store.Store) int64 {
	t.Helper()
	rev, err := s.ChecksRevision(ctx(t))
	must(t, err)
	return rev
}

func getCheck(t *testing.T, s store.Store, name string) *unyov1.Check {
	t.Helper()
	c, err := s.GetCheck(ctx(t), name)
	if err != nil {
		t.Fatalf("get check %s: %v", name, err)
	}
	return c
}

func checkTests() []contractTest {
	return []contractTest{
		{"Create", func(t *testing.T, s store.Store) {
			rev0 := revision(t, s)
			before := time.Now()
			in := check("disk")
			put(t, s, in, store.Created)
			if !proto.Equal(in, check("disk")) {
				t.Errorf("PutCheck changed its argument: %v", in)
			}
			rev1 := revision(t, s)
			if rev1 <= rev0 {
				t.Fatalf("revision %d after create, want more than %d", rev1, rev0)
			}
			got := getCheck(t, s, "disk")
			if got.GetRevision() != rev1 {
				t.Errorf("check revision %d, want the checks revision %d", got.GetRevision(), rev1)
			}
			wantRecent(t, "created_at", got.GetCreatedAt(), before)
			if !proto.Equal(got.GetCreatedAt(), got.GetUpdatedAt()) {
				t.Errorf("new check: updated_at %v != created_at %v", got.GetUpdatedAt().AsTime(), got.GetCreatedAt().AsTime())
			}
			want := check("disk")
			want.Revision, want.CreatedAt, want.UpdatedAt = got.Revision, got.CreatedAt, got.UpdatedAt
			wantEqual(t, "stored check", got, want)
		}},
		{"UnchangedPutDoesNotBumpRevision", func(t *testing.T, s store.Store) {
			put(t, s, check("disk"), store.Created)
			stored := getCheck(t, s, "disk")
			rev := revision(t, s)
			put(t, s, check("disk"), store.Unchanged)
			// What the store maintains is not part of the comparison.
			again := check("disk")
			again.Revision = 99
			again.CreatedAt, again.UpdatedAt = at(1), at(2)
			put(t, s, again, store.Unchanged)
			if got := revision(t, s); got != rev {
				t.Errorf("revision %d after unchanged puts, want %d", got, rev)
			}
			wantEqual(t, "check after unchanged puts", getCheck(t, s, "disk"), stored)
		}},
		{"ChangesConfigure", func(t *testing.T, s store.Store) {
			put(t, s, check("disk"), store.Created)
			changes := map[string]func(c *unyov1.Check){
				"spec":    func(c *unyov1.Check) { c.Spec.Interval = "1m" },
				"command": func(c *unyov1.Check) { c.Spec.Command = append(c.Spec.Command, "-p", "/") },
				"labels":  func(c *unyov1.Check) { c.Labels["team"] = "dba" },
				"cluster": func(c *unyov1.Check) { c.Cluster = "c2" },
			}
			for what, change := range changes {
				prev := getCheck(t, s, "disk")
				c := proto.Clone(prev).(*unyov1.Check)
				change(c)
				put(t, s, c, store.Configured)
				got := getCheck(t, s, "disk")
				if got.GetRevision() <= prev.GetRevision() {
					t.Errorf("%s change: revision %d, want more than %d", what, got.GetRevision(), prev.GetRevision())
				}
				if rev := revision(t, s); got.GetRevision() != rev {
					t.Errorf("%s change: check revision %d, want the checks revision %d", what, got.GetRevision(), rev)
				}
				if !proto.Equal(got.GetCreatedAt(), prev.GetCreatedAt()) {
					t.Errorf("%s change moved created_at from %v to %v", what, prev.GetCreatedAt().AsTime(), got.GetCreatedAt().AsTime())
				}
				if got.GetUpdatedAt().AsTime().Before(prev.GetUpdatedAt().AsTime()) {
					t.Errorf("%s change moved updated_at back", what)
				}
				want := proto.Clone(c).(*unyov1.Check)
				want.Revision, want.CreatedAt, want.UpdatedAt = got.Revision, got.CreatedAt, got.UpdatedAt
				wantEqual(t, what+" change stored", got, want)
				// And the same again is unchanged.
				put(t, s, c, store.Unchanged)
			}
		}},
		{"Delete", func(t *testing.T, s store.Store) {
			put(t, s, check("disk"), store.Created)
			put(t, s, check("load"), store.Created)
			rev := revision(t, s)
			must(t, s.DeleteCheck(ctx(t), "disk"))
			afterDelete := revision(t, s)
			if afterDelete <= rev {
				t.Errorf("revision %d after delete, want more than %d", afterDelete, rev)
			}
			_, err := s.GetCheck(ctx(t), "disk")
			wantNotFound(t, err, `"disk"`)
			wantNotFound(t, s.DeleteCheck(ctx(t), "disk"), `"disk"`)
			if got := revision(t, s); got != afterDelete {
				t.Errorf("deleting an absent check moved the revision from %d to %d", afterDelete, got)
			}
			// Re-creating it later is a create, with a newer revision.
			put(t, s, check("disk"), store.Created)
			if got := getCheck(t, s, "disk").GetRevision(); got <= afterDelete {
				t.Errorf("re-created check revision %d, want more than %d", got, afterDelete)
			}
		}},
		{"DeletedChecksAreRemembered", func(t *testing.T, s store.Store) {
			before := time.Now().Add(-time.Second)
			put(t, s, check("disk"), store.Created)
			put(t, s, check("load"), store.Created)
			must(t, s.DeleteCheck(ctx(t), "disk"))
			deleted, err := s.DeletedChecks(ctx(t))
			must(t, err)
			if at, ok := deleted["disk"]; len(deleted) != 1 || !ok || at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("deleted checks %v, want disk deleted about now", deleted)
			}
			// Applied again, it is no longer deleted.
			put(t, s, check("disk"), store.Created)
			deleted, err = s.DeletedChecks(ctx(t))
			must(t, err)
			if len(deleted) != 0 {
				t.Errorf("deleted checks %v after disk was applied again, want none", deleted)
			}
		}},
		{"RevisionIsMonotonic", func(t *testing.T, s store.Store) {
			last := revision(t, s)
			step := func(what string) {
				t.Helper()
				rev := revision(t, s)
				if rev <= last {
					t.Fatalf("after %s: revision %d, want more than %d", what, rev, last)
				}
				last = rev
			}
			for i := range 5 {
				put(t, s, check(fmt.Sprintf("c%d", i)), store.Created)
				step("create")
			}
			c := check("c1")
			c.Spec.Timeout = "5s"
			put(t, s, c, store.Configured)
			step("configure")
			must(t, s.DeleteCheck(ctx(t), "c3"))
			step("delete")
		}},
		{"GetMissingCheck", func(t *testing.T, s store.Store) {
			_, err := s.GetCheck(ctx(t), "disk")
			wantNotFound(t, err, `"disk"`)
		}},
		{"ListChecksSortedByName", func(t *testing.T, s store.Store) {
			for _, name := range []string{"load", "disk", "ntp"} {
				put(t, s, check(name), store.Created)
			}
			checks, err := s.ListChecks(ctx(t))
			must(t, err)
			var names []string
			for _, c := range checks {
				names = append(names, c.GetName())
				if c.GetRevision() == 0 || c.GetCreatedAt() == nil {
					t.Errorf("listed check %s lacks revision or created_at", c.GetName())
				}
			}
			if got, want := strings.Join(names, " "), "disk load ntp"; got != want {
				t.Errorf("ListChecks order = %s, want %s", got, want)
			}
		}},
		{"PutRejectsUnnamedCheck", func(t *testing.T, s store.Store) {
			if _, err := s.PutCheck(ctx(t), &unyov1.Check{}); err == nil {
				t.Fatal("PutCheck accepted a check without a name")
			}
		}},
	}
}

// ----- events

func event(id, node, check string, level unyov1.Level, startedSec int) *unyov1.Event {
	return &unyov1.Event{
		Id:         id,
		Cluster:    "c1",
		Node:       node,
		Check:      check,
		Level:      level,
		Status:     unyov1.CheckStatus(level - 1),
		Output:     fmt.Sprintf("%s on %s at %d", check, node, startedSec),
		LongOutput: "line 1\nline 2",
		Perfdata: []*unyov1.PerfData{
			{Label: "used", Value: 42.5, Uom: "%", Warn: "80", Crit: "90", Min: proto.Float64(0), Max: proto.Float64(100)},
		},
		StartedAt:  at(startedSec),
		Duration:   durationpb.New(150 * time.Millisecond),
		ReceivedAt: at(startedSec + 1),
		Sequence:   uint64(startedSec),
	}
}

const (
	success  = unyov1.Level_LEVEL_SUCCESS
	warning  = unyov1.Level_LEVEL_WARNING
	critical = unyov1.Level_LEVEL_CRITICAL
)

func appendEvents(t *testing.T, s store.Store, wantInserted int, events ...*unyov1.Event) {
	t.Helper()
	n, err := s.AppendEvents(ctx(t), events)
	if err != nil {
		t.Fatalf("append %d events: %v", len(events), err)
	}
	if n != wantInserted {
		t.Fatalf("append %d events: %d inserted, want %d", len(events), n, wantInserted)
	}
}

func listEvents(t *testing.T, s store.Store, f store.EventFilter) []*unyov1.Event {
	t.Helper()
	events, err := s.ListEvents(ctx(t), f)
	if err != nil {
		t.Fatalf("list events %+v: %v", f, err)
	}
	return events
}

func ids(events []*unyov1.Event) string {
	var s []string
	for _, e := range events {
		s = append(s, e.GetId())
	}
	return strings.Join(s, " ")
}

func wantIDs(t *testing.T, s store.Store, f store.EventFilter, want string) {
	t.Helper()
	if got := ids(listEvents(t, s, f)); got != want {
		t.Errorf("list events %+v = [%s], want [%s]", f, got, want)
	}
}

func latestID(t *testing.T, s store.Store, node, check string) string {
	t.Helper()
	events := listEvents(t, s, store.EventFilter{Node: node, Check: check})
	if len(events) != 1 {
		t.Fatalf("%d latest events for %s/%s, want 1", len(events), node, check)
	}
	return events[0].GetId()
}

// manyEvents makes n events of one node/check, started a second apart.
func manyEvents(prefix string, n int) []*unyov1.Event {
	events := make([]*unyov1.Event, n)
	for i := range events {
		events[i] = event(fmt.Sprintf("%s-%05d", prefix, i), "web1", "disk", success, i)
	}
	return events
}

func eventTests() []contractTest {
	return []contractTest{
		{"AppendAndGet", func(t *testing.T, s store.Store) {
			in := []*unyov1.Event{
				event("e1", "web1", "disk", success, 1),
				event("e2", "web1", "load", warning, 2),
				event("e3", "web2", "disk", critical, 3),
			}
			appendEvents(t, s, 3, in...)
			for _, e := range in {
				got, err := s.GetEvent(ctx(t), e.GetId())
				must(t, err)
				wantEqual(t, "event "+e.GetId(), got, e)
			}
			appendEvents(t, s, 0)
		}},
		{"ReplayInsertsNothing", func(t *testing.T, s store.Store) {
			batch := []*unyov1.Event{
				event("e1", "web1", "disk", success, 1),
				event("e2", "web1", "disk", warning, 2),
			}
			appendEvents(t, s, 2, batch...)
			appendEvents(t, s, 0, batch...)
			// A replayed result whose body differs keeps the first one.
			changed := event("e2", "web1", "disk", critical, 2)
			appendEvents(t, s, 0, changed)
			got, err := s.GetEvent(ctx(t), "e2")
			must(t, err)
			wantEqual(t, "replayed event", got, batch[1])
			// Partly new batches count only the new ones.
			appendEvents(t, s, 1, batch[0], event("e3", "web1", "disk", success, 3), batch[1])
			// Repeated ids within one call count once.
			e4 := event("e4", "web1", "disk", success, 4)
			appendEvents(t, s, 1, e4, e4, e4)
			wantIDs(t, s, store.EventFilter{History: true}, "e4 e3 e2 e1")
			if got := latestID(t, s, "web1", "disk"); got != "e4" {
				t.Errorf("latest = %s, want e4", got)
			}
		}},
		{"LatestOnlyMovesForward", func(t *testing.T, s store.Store) {
			appendEvents(t, s, 1, event("t10", "web1", "disk", success, 10))
			appendEvents(t, s, 1, event("t20", "web1", "disk", critical, 20))
			if got := latestID(t, s, "web1", "disk"); got != "t20" {
				t.Fatalf("latest = %s, want t20", got)
			}
			// An older result arriving late goes to history only.
			appendEvents(t, s, 1, event("t15", "web1", "disk", success, 15))
			if got := latestID(t, s, "web1", "disk"); got != "t20" {
				t.Errorf("latest after an older result = %s, want t20", got)
			}
			wantIDs(t, s, store.EventFilter{History: true}, "t20 t15 t10")
			// The same start time replaces it: the later report wins.
			appendEvents(t, s, 1, event("t20b", "web1", "disk", warning, 20))
			if got := latestID(t, s, "web1", "disk"); got != "t20b" {
				t.Errorf("latest after an equally old result = %s, want t20b", got)
			}
			// Within one call, the newest wins whatever the order.
			appendEvents(t, s, 3,
				event("t40", "web1", "disk", success, 40),
				event("t30", "web1", "disk", critical, 30),
				event("t35", "web1", "disk", warning, 35))
			if got := latestID(t, s, "web1", "disk"); got != "t40" {
				t.Errorf("latest after a mixed batch = %s, want t40", got)
			}
			got, err := s.GetEvent(ctx(t), "t40")
			must(t, err)
			wantEqual(t, "latest event", listEvents(t, s, store.EventFilter{})[0], got)
		}},
		{"ListLatestSortedAndFiltered", func(t *testing.T, s store.Store) {
			appendEvents(t, s, 7,
				event("b-disk-1", "web2", "disk", success, 1),
				event("a-load", "web1", "load", critical, 2),
				event("a-disk", "web1", "disk", warning, 3),
				event("b-disk-2", "web2", "disk", critical, 4),
				event("c-ntp", "db1", "ntp", success, 5),
				event("b-load", "web2", "load", success, 6),
				event("a-load-old", "web1", "load", success, 1),
			)
			wantIDs(t, s, store.EventFilter{}, "c-ntp a-disk a-load b-disk-2 b-load")
			wantIDs(t, s, store.EventFilter{Node: "web2"}, "b-disk-2 b-load")
			wantIDs(t, s, store.EventFilter{Check: "disk"}, "a-disk b-disk-2")
			wantIDs(t, s, store.EventFilter{Node: "web1", Check: "load"}, "a-load")
			wantIDs(t, s, store.EventFilter{Levels: []unyov1.Level{critical}}, "a-load b-disk-2")
			wantIDs(t, s, store.EventFilter{Levels: []unyov1.Level{critical, warning}}, "a-disk a-load b-disk-2")
			wantIDs(t, s, store.EventFilter{Node: "web2", Levels: []unyov1.Level{success}}, "b-load")
			wantIDs(t, s, store.EventFilter{Node: "nosuch"}, "")
			wantIDs(t, s, store.EventFilter{Limit: 2}, "c-ntp a-disk")
		}},
		{"ListHistoryNewestFirst", func(t *testing.T, s store.Store) {
			appendEvents(t, s, 6,
				event("x1", "web1", "disk", success, 1),
				event("x3", "web1", "disk", critical, 3),
				event("y3", "web2", "disk", warning, 3),
				event("x2", "web1", "load", success, 2),
				event("z5", "web2", "load", critical, 5),
				event("a3", "web1", "ntp", success, 3),
			)
			// Equal start times order by id, descending.
			wantIDs(t, s, store.EventFilter{History: true}, "z5 y3 x3 a3 x2 x1")
			wantIDs(t, s, store.EventFilter{History: true, Node: "web1"}, "x3 a3 x2 x1")
			wantIDs(t, s, store.EventFilter{History: true, Check: "disk"}, "y3 x3 x1")
			wantIDs(t, s, store.EventFilter{History: true, Node: "web1", Check: "disk"}, "x3 x1")
			wantIDs(t, s, store.EventFilter{History: true, Levels: []unyov1.Level{critical, warning}}, "z5 y3 x3")
			wantIDs(t, s, store.EventFilter{History: true, Limit: 3}, "z5 y3 x3")
		}},
		{"ListLimits", func(t *testing.T, s store.Store) {
			const (
				defaultLimit = 1000
				maxLimit     = 10000
			)
			events := manyEvents("e", maxLimit+1)
			for i := 0; i < len(events); i += 1000 {
				n, err := s.AppendEvents(ctx(t), events[i:min(i+1000, len(events))])
				must(t, err)
				if n != min(1000, len(events)-i) {
					t.Fatalf("appended %d of a batch of %d", n, min(1000, len(events)-i))
				}
			}
			for _, tc := range []struct{ limit, want int }{
				{0, defaultLimit}, {-1, defaultLimit}, {7, 7}, {maxLimit + 5, maxLimit},
			} {
				got := listEvents(t, s, store.EventFilter{History: true, Limit: tc.limit})
				if len(got) != tc.want {
					t.Errorf("history with limit %d: %d events, want %d", tc.limit, len(got), tc.want)
				}
			}
			// The newest come first.
			if got := listEvents(t, s, store.EventFilter{History: true, Limit: 1}); got[0].GetId() != events[len(events)-1].GetId() {
				t.Errorf("newest event = %s, want %s", got[0].GetId(), events[len(events)-1].GetId())
			}
		}},
		{"PipelineOrder", func(t *testing.T, s store.Store) {
			// Every new event gets a sequence number in arrival order;
			// duplicates get none.
			appendEvents(t, s, 2, event("p-1", "web1", "disk", success, 1), event("p-0", "web1", "disk", success, 0))
			appendEvents(t, s, 1, event("p-1", "web1", "disk", success, 1), event("p-2", "web1", "disk", success, 2))
			next, err := s.NextEvents(ctx(t), 0, 100)
			must(t, err)
			var got []string
			for i, se := range next {
				got = append(got, se.Event.GetId())
				if i > 0 && se.Seq <= next[i-1].Seq {
					t.Errorf("sequence not increasing: %d after %d", se.Seq, next[i-1].Seq)
				}
			}
			if strings.Join(got, " ") != "p-1 p-0 p-2" {
				t.Errorf("NextEvents order = %v, want arrival order [p-1 p-0 p-2]", got)
			}
			after, err := s.NextEvents(ctx(t), next[0].Seq, 100)
			must(t, err)
			if len(after) != 2 {
				t.Errorf("NextEvents after the first = %d events, want 2", len(after))
			}
			// A commit with a stale cursor is refused.
			must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: 0, Cursor: next[0].Seq}))
			if err := s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: 0, Cursor: next[1].Seq}); !errors.Is(err, store.ErrConflict) {
				t.Errorf("commit from a stale cursor: %v, want ErrConflict", err)
			}
			st, err := s.LoadPipeline(ctx(t))
			must(t, err)
			if st.Cursor != next[0].Seq {
				t.Errorf("cursor = %d, want %d", st.Cursor, next[0].Seq)
			}
		}},
		{"GetMissingEvent", func(t *testing.T, s store.Store) {
			_, err := s.GetEvent(ctx(t), "nosuch")
			wantNotFound(t, err, `"nosuch"`)
		}},
		{"Prune", func(t *testing.T, s store.Store) {
			var events []*unyov1.Event
			for i := range 5 {
				events = append(events, event(fmt.Sprintf("a-disk-%d", i), "web1", "disk", success, i))
			}
			events = append(events,
				event("a-load-0", "web1", "load", success, 0),
				event("a-load-1", "web1", "load", success, 1),
				event("b-disk-0", "web2", "disk", success, 0),
				event("b-disk-1", "web2", "disk", success, 1),
				event("b-disk-2", "web2", "disk", success, 2),
			)
			appendEvents(t, s, len(events), events...)
			latest := listEvents(t, s, store.EventFilter{})

			// Events the pipeline has not processed are never pruned.
			removed, _, err := s.PruneEvents(ctx(t), 0, 0)
			must(t, err)
			if removed != 0 {
				t.Errorf("prune before the pipeline processed anything: removed %d, want 0", removed)
			}
			processAll(t, s)

			removed, _, err = s.PruneEvents(ctx(t), 2, 0)
			must(t, err)
			if removed != 4 {
				t.Errorf("prune to 2: removed %d, want 4", removed)
			}
			wantIDs(t, s, store.EventFilter{History: true, Node: "web1", Check: "disk"}, "a-disk-4 a-disk-3")
			wantIDs(t, s, store.EventFilter{History: true, Node: "web1", Check: "load"}, "a-load-1 a-load-0")
			wantIDs(t, s, store.EventFilter{History: true, Node: "web2"}, "b-disk-2 b-disk-1")
			removed, _, err = s.PruneEvents(ctx(t), 2, 0)
			must(t, err)
			if removed != 0 {
				t.Errorf("second prune to 2: removed %d, want 0", removed)
			}

			removed, _, err = s.PruneEvents(ctx(t), 0, 0)
			must(t, err)
			if removed != 6 {
				t.Errorf("prune to 0: removed %d, want 6", removed)
			}
			wantIDs(t, s, store.EventFilter{History: true}, "")
			// The latest state is never pruned, and GetEvent still finds it.
			if got := ids(listEvents(t, s, store.EventFilter{})); got != ids(latest) {
				t.Errorf("latest after pruning = [%s], want [%s]", got, ids(latest))
			}
			got, err := s.GetEvent(ctx(t), "a-disk-4")
			must(t, err)
			wantEqual(t, "pruned latest event", got, events[4])
			if _, _, err := s.PruneEvents(ctx(t), -1, 0); err == nil {
				t.Error("PruneEvents accepted a negative keep")
			}
		}},
		{"PruneIncremental", func(t *testing.T, s store.Store) {
			var events []*unyov1.Event
			for i := range 5 {
				events = append(events, event(fmt.Sprintf("a-disk-%d", i), "web1", "disk", success, i))
			}
			for i := range 3 {
				events = append(events, event(fmt.Sprintf("b-disk-%d", i), "web2", "disk", success, i))
			}
			appendEvents(t, s, len(events), events...)
			processAll(t, s)
			removed, through, err := s.PruneEvents(ctx(t), 2, 0)
			must(t, err)
			if removed != 4 || through == 0 {
				t.Fatalf("full prune to 2: removed %d through %d, want 4 through the cursor", removed, through)
			}
			// Newer events of web1 only, not processed yet: they count in
			// the ranking but stay; the older ones past keep go, and the
			// cursor has not moved.
			appendEvents(t, s, 2, event("a-disk-5", "web1", "disk", success, 5), event("a-disk-6", "web1", "disk", success, 6))
			removed, through2, err := s.PruneEvents(ctx(t), 2, through)
			must(t, err)
			if removed != 2 || through2 != through {
				t.Errorf("prune before the pipeline processed the new events: removed %d through %d, want 2 through %d", removed, through2, through)
			}
			// Once processed, a pass after through looks at web1 only: web2
			// keeps two although keep is now 1.
			processAll(t, s)
			removed, through3, err := s.PruneEvents(ctx(t), 1, through2)
			must(t, err)
			if removed != 1 || through3 <= through2 {
				t.Errorf("incremental prune to 1: removed %d through %d, want 1 through past %d", removed, through3, through2)
			}
			wantIDs(t, s, store.EventFilter{History: true, Node: "web1"}, "a-disk-6")
			wantIDs(t, s, store.EventFilter{History: true, Node: "web2"}, "b-disk-2 b-disk-1")
			// Nothing new: an incremental pass removes nothing; a full one
			// catches web2 up.
			if removed, _, err := s.PruneEvents(ctx(t), 1, through3); err != nil || removed != 0 {
				t.Errorf("incremental prune with nothing new: removed %d, err %v; want 0", removed, err)
			}
			if removed, _, err := s.PruneEvents(ctx(t), 1, 0); err != nil || removed != 1 {
				t.Errorf("full prune to 1: removed %d, err %v; want 1", removed, err)
			}
			wantIDs(t, s, store.EventFilter{History: true, Node: "web2"}, "b-disk-2")
		}},
		{"ConcurrentAppendsLoseNothing", func(t *testing.T, s store.Store) {
			const (
				writers   = 8
				batches   = 10
				batchSize = 50
			)
			nodes := []string{"n1", "n2", "n3", "n4"}
			checks := []string{"c1", "c2", "c3", "c4", "c5"}
			// Unique start times in random order, so latest is well defined
			// and arrives out of order.
			starts := rand.Perm(writers * batches * batchSize)
			all := make([][][]*unyov1.Event, writers)
			newest := map[string]*unyov1.Event{}
			for w := range all {
				all[w] = make([][]*unyov1.Event, batches)
				for b := range all[w] {
					for i := range batchSize {
						k := (w*batches+b)*batchSize + i
						e := event(fmt.Sprintf("w%d-b%d-%d", w, b, i), nodes[k%len(nodes)], checks[k/len(nodes)%len(checks)], success, starts[k])
						all[w][b] = append(all[w][b], e)
						key := e.GetNode() + "/" + e.GetCheck()
						if old := newest[key]; old == nil || e.GetStartedAt().AsTime().After(old.GetStartedAt().AsTime()) {
							newest[key] = e
						}
					}
				}
			}
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				inserted int
				errs     []error
			)
			for w := range writers {
				wg.Go(func() {
					for b := range batches {
						// Also replay a batch of another writer, which may be
						// in flight right now: it must not count twice.
						for _, batch := range [][]*unyov1.Event{all[w][b], all[(w+1)%writers][b]} {
							n, err := s.AppendEvents(ctx(t), batch)
							mu.Lock()
							inserted += n
							if err != nil {
								errs = append(errs, err)
							}
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			total := writers * batches * batchSize
			if inserted != total {
				t.Errorf("inserted %d in total, want %d", inserted, total)
			}
			if got := len(listEvents(t, s, store.EventFilter{History: true, Limit: 10000})); got != total {
				t.Errorf("history holds %d events, want %d", got, total)
			}
			latest := listEvents(t, s, store.EventFilter{})
			if len(latest) != len(newest) {
				t.Errorf("%d latest events, want %d", len(latest), len(newest))
			}
			for _, e := range latest {
				if want := newest[e.GetNode()+"/"+e.GetCheck()]; e.GetId() != want.GetId() {
					t.Errorf("latest %s/%s = %s, want %s", e.GetNode(), e.GetCheck(), e.GetId(), want.GetId())
				}
			}
		}},
		{"AppendRejectsInvalidEvents", func(t *testing.T, s store.Store) {
			good := event("ok", "web1", "disk", success, 1)
			for what, bad := range map[string]*unyov1.Event{
				"nil":      nil,
				"no id":    event("", "web1", "disk", success, 1),
				"no node":  event("x", "", "disk", success, 1),
				"no check": event("x", "web1", "", success, 1),
			} {
				if _, err := s.AppendEvents(ctx(t), []*unyov1.Event{good, bad}); err == nil {
					t.Errorf("AppendEvents accepted an event with %s", what)
				}
			}
			// A refused call stores nothing, not even its valid events.
			wantIDs(t, s, store.EventFilter{History: true}, "")
			wantIDs(t, s, store.EventFilter{}, "")
		}},
	}
}

// ----- clusters

func clusterTests() []contractTest {
	return []contractTest{
		{"UpsertAndGet", func(t *testing.T, s store.Store) {
			before := time.Now()
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "eu", Url: "https://eu.example:7443"}))
			got, err := s.GetCluster(ctx(t), "eu")
			must(t, err)
			if got.GetUrl() != "https://eu.example:7443" {
				t.Errorf("url = %q", got.GetUrl())
			}
			wantRecent(t, "registered_at", got.GetRegisteredAt(), before)
			wantRecent(t, "last_seen", got.GetLastSeen(), before)
		}},
		{"UpsertKeepsRegistration", func(t *testing.T, s store.Store) {
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "eu", Url: "https://old", RegisteredAt: at(0), LastSeen: at(0)}))
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "eu", Url: "https://new", RegisteredAt: at(50), LastSeen: at(60)}))
			got, err := s.GetCluster(ctx(t), "eu")
			must(t, err)
			wantEqual(t, "cluster", got, &unyov1.ClusterInfo{Name: "eu", Url: "https://new", RegisteredAt: at(0), LastSeen: at(60)})
			before := time.Now()
			must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: "eu", Url: "https://new"}))
			got, err = s.GetCluster(ctx(t), "eu")
			must(t, err)
			wantTime(t, "registered_at", got.GetRegisteredAt(), at(0).AsTime())
			wantRecent(t, "last_seen", got.GetLastSeen(), before)
		}},
		{"ListSortedAndGetMissing", func(t *testing.T, s store.Store) {
			for _, name := range []string{"us", "eu", "ap"} {
				must(t, s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{Name: name, Url: "https://" + name}))
			}
			clusters, err := s.ListClusters(ctx(t))
			must(t, err)
			var names []string
			for _, c := range clusters {
				names = append(names, c.GetName())
			}
			if got, want := strings.Join(names, " "), "ap eu us"; got != want {
				t.Errorf("ListClusters order = %s, want %s", got, want)
			}
			_, err = s.GetCluster(ctx(t), "mars")
			wantNotFound(t, err, `"mars"`)
			if err := s.UpsertCluster(ctx(t), &unyov1.ClusterInfo{}); err == nil {
				t.Error("UpsertCluster accepted a cluster without a name")
			}
		}},
	}
}

// ----- log positions

func logPositionTests() []contractTest {
	return []contractTest{
		{"PutGetPrune", func(t *testing.T, s store.Store) {
			got, err := s.GetLogPositions(ctx(t), "web1")
			must(t, err)
			if len(got) != 0 {
				t.Fatalf("positions of an unknown node = %v, want none", got)
			}
			big := uint64(time.Now().UnixNano()) // agents seed sequences so
			must(t, s.PutLogPositions(ctx(t), "web1", map[string]store.LogPosition{
				"8:1": {Sequence: big, Offset: 10}, "8:2": {Sequence: big + 1, Offset: 0},
			}))
			must(t, s.PutLogPositions(ctx(t), "web2", map[string]store.LogPosition{"8:1": {Sequence: 7, Offset: 99}}))
			must(t, s.PutLogPositions(ctx(t), "web1", map[string]store.LogPosition{"8:1": {Sequence: big + 5, Offset: 42}}))
			got, err = s.GetLogPositions(ctx(t), "web1")
			must(t, err)
			want := map[string]store.LogPosition{"8:1": {Sequence: big + 5, Offset: 42}, "8:2": {Sequence: big + 1, Offset: 0}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("positions = %v, want %v", got, want)
			}
			n, err := s.PruneLogPositions(ctx(t), time.Now().Add(-time.Hour))
			must(t, err)
			if n != 0 {
				t.Errorf("pruned %d recent positions, want 0", n)
			}
			n, err = s.PruneLogPositions(ctx(t), time.Now().Add(time.Second))
			must(t, err)
			if n != 3 {
				t.Errorf("pruned %d positions, want 3", n)
			}
		}},
	}
}

// ----- leases

func acquire(t *testing.T, s store.Store, name, holder string, ttl time.Duration) bool {
	t.Helper()
	ok, err := s.TryAcquireLease(ctx(t), name, holder, ttl)
	if err != nil {
		t.Fatalf("acquire lease %s for %s: %v", name, holder, err)
	}
	return ok
}

func leaseTests() []contractTest {
	return []contractTest{
		{"OnlyOneHolder", func(t *testing.T, s store.Store) {
			if !acquire(t, s, "ctl", "a", time.Minute) {
				t.Fatal("a could not take a free lease")
			}
			if acquire(t, s, "ctl", "b", time.Minute) {
				t.Fatal("b took a lease a holds")
			}
			if !acquire(t, s, "ctl", "a", time.Minute) {
				t.Fatal("a could not renew its lease")
			}
			// Leases are independent of each other.
			if !acquire(t, s, "other", "b", time.Minute) {
				t.Fatal("b could not take another, free lease")
			}
		}},
		{"ConcurrentAcquireHasOneWinner", func(t *testing.T, s store.Store) {
			const contenders = 8
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []string
				errs    []error
			)
			for i := range contenders {
				wg.Go(func() {
					holder := fmt.Sprintf("r%d", i)
					ok, err := s.TryAcquireLease(ctx(t), "ctl", holder, time.Minute)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
					}
					if ok {
						winners = append(winners, holder)
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if len(winners) != 1 {
				t.Fatalf("winners %v, want exactly one", winners)
			}
		}},
		{"ExpiryLetsAnotherTakeOver", func(t *testing.T, s store.Store) {
			const ttl = time.Second
			// a's lease expires no earlier than start+ttl, whatever delays
			// the calls suffer: b must not get it before then.
			start := time.Now()
			if !acquire(t, s, "ctl", "a", ttl) {
				t.Fatal("a could not take a free lease")
			}
			if acquire(t, s, "ctl", "b", ttl) && time.Since(start) < ttl {
				t.Fatal("b took a's lease before it expired")
			}
			testutil.Until(t, 15*time.Second, "b takes the expired lease", func() bool { return acquire(t, s, "ctl", "b", time.Minute) })
			if acquire(t, s, "ctl", "a", time.Minute) {
				t.Fatal("a took the lease back from b")
			}
		}},
		{"RenewExtends", func(t *testing.T, s store.Store) {
			if !acquire(t, s, "ctl", "a", 200*time.Millisecond) {
				t.Fatal("a could not take a free lease")
			}
			// Renewing sets a new expiry from now, whether or not the first
			// one has passed meanwhile.
			if !acquire(t, s, "ctl", "a", time.Minute) {
				t.Fatal("a could not renew its lease")
			}
			time.Sleep(400 * time.Millisecond)
			if acquire(t, s, "ctl", "b", time.Minute) {
				t.Fatal("b took a lease that a renewed for a minute")
			}
		}},
		{"Release", func(t *testing.T, s store.Store) {
			if !acquire(t, s, "ctl", "a", time.Minute) {
				t.Fatal("a could not take a free lease")
			}
			// Only the holder can release.
			must(t, s.ReleaseLease(ctx(t), "ctl", "b"))
			if acquire(t, s, "ctl", "b", time.Minute) {
				t.Fatal("b took the lease after releasing a lease it did not hold")
			}
			must(t, s.ReleaseLease(ctx(t), "ctl", "a"))
			if !acquire(t, s, "ctl", "b", time.Minute) {
				t.Fatal("b could not take a released lease")
			}
			must(t, s.ReleaseLease(ctx(t), "nosuch", "a"))
		}},
		{"RejectsBadArguments", func(t *testing.T, s store.Store) {
			if _, err := s.TryAcquireLease(ctx(t), "ctl", "a", 0); err == nil {
				t.Error("TryAcquireLease accepted a zero ttl")
			}
			if _, err := s.TryAcquireLease(ctx(t), "ctl", "", time.Minute); err == nil {
				t.Error("TryAcquireLease accepted an empty holder")
			}
		}},
	}
}

// processAll moves the pipeline cursor past every stored event, as the
// cluster's event pipeline does once it has processed them.
func processAll(t *testing.T, s store.Store) {
	t.Helper()
	st, err := s.LoadPipeline(ctx(t))
	must(t, err)
	next, err := s.NextEvents(ctx(t), st.Cursor, 100000)
	must(t, err)
	if len(next) == 0 {
		return
	}
	must(t, s.CommitPipeline(ctx(t), &store.PipelineCommit{ExpectCursor: st.Cursor, Cursor: next[len(next)-1].Seq}))
}
