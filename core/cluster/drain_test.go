package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
)

// fleet is a cluster in-process whose agents the test plays: each round
// reports every assignment as done (running, or deleted).
type fleet struct {
	t  *testing.T
	c  *client.Clients
	cs []*unyov1.Compute
}

func newFleet(t *testing.T, o cluster.Options) *fleet {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fleet{t: t, c: startCluster(t, st, o)}
}

func (f *fleet) join(name string, cpus int32) {
	f.t.Helper()
	ctx := context.Background()
	n := &unyov1.Node{Name: name, Capacity: &unyov1.Capacity{Cpus: cpus, MemoryBytes: int64(cpus) << 30, DiskBytes: 10 << 30}}
	if _, err := f.c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
		f.t.Fatal(err)
	}
	testutil.Eventually(f.t, 10*time.Second, name+" ready", func() error {
		if _, err := f.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: name})); err != nil {
			return err
		}
		if n := f.node(name); n.GetState() != unyov1.NodeState_NODE_STATE_READY {
			return fmt.Errorf("state %s", n.GetState())
		}
		return nil
	})
}

func (f *fleet) node(name string) *unyov1.Node {
	f.t.Helper()
	resp, err := f.c.Nodes.GetNode(context.Background(), connect.NewRequest(&unyov1.GetNodeRequest{Name: name}))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Msg.GetNodes()[0]
}

func (f *fleet) sync() map[string]*unyov1.Compute {
	f.t.Helper()
	resp, err := f.c.Provision.SyncComputes(context.Background(), connect.NewRequest(&unyov1.SyncComputesRequest{Computes: f.cs}))
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*unyov1.Compute{}
	for _, c := range resp.Msg.GetComputes() {
		out[c.GetName()] = c
	}
	return out
}

// assignments is node's assignments as "compute/desired".
func (f *fleet) assignments(node string) ([]*unyov1.Assignment, string) {
	f.t.Helper()
	resp, err := f.c.Provision.GetAssignments(context.Background(), connect.NewRequest(&unyov1.GetAssignmentsRequest{Node: node}))
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, a := range resp.Msg.GetAssignments() {
		out = append(out, a.GetCompute()+"/"+a.GetDesired())
	}
	return resp.Msg.GetAssignments(), strings.Join(out, " ")
}

// act plays node's agent once: everything assigned runs, everything to
// delete is deleted.
func (f *fleet) act(node string) {
	f.t.Helper()
	as, _ := f.assignments(node)
	var states []*unyov1.AssignmentState
	for _, a := range as {
		state := "running"
		if a.GetDesired() == "deleted" {
			state = "deleted"
		}
		states = append(states, &unyov1.AssignmentState{Compute: a.GetCompute(), Generation: a.GetGeneration(), State: state})
	}
	if _, err := f.c.Provision.ReportAssignments(context.Background(), connect.NewRequest(&unyov1.ReportAssignmentsRequest{Node: node, States: states})); err != nil {
		f.t.Fatal(err)
	}
}

// where is each compute's "node[>next] phase[/replacement phase]".
func where(got map[string]*unyov1.Compute) string {
	var out []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range got {
			if !yield(n) {
				return
			}
		}
	}) {
		st := got[name].GetStatus()
		s := name + "@" + st.GetNode()
		if st.GetReplacingNode() != "" {
			s += ">" + st.GetReplacingNode()
		}
		s += " " + st.GetPhase()
		if st.GetReplacementPhase() != "" {
			s += "/" + st.GetReplacementPhase()
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// settle plays every agent until the computes are as want says.
func (f *fleet) settle(nodes []string, want string) map[string]*unyov1.Compute {
	f.t.Helper()
	var got map[string]*unyov1.Compute
	testutil.Eventually(f.t, 15*time.Second, want, func() error {
		for _, n := range nodes {
			f.act(n)
		}
		got = f.sync()
		if w := where(got); w != want {
			return fmt.Errorf("computes: %s", w)
		}
		return nil
	})
	return got
}

func (f *fleet) drain(node string, req *unyov1.DrainNodeRequest) {
	f.t.Helper()
	req.Name = node
	if _, err := f.c.Nodes.DrainNode(context.Background(), connect.NewRequest(req)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) waitDrain(node, phase string) *unyov1.Node {
	f.t.Helper()
	var n *unyov1.Node
	testutil.Eventually(f.t, 15*time.Second, node+" drain "+phase, func() error {
		if n = f.node(node); n.GetDrain().GetPhase() != phase {
			return fmt.Errorf("drain %v", n.GetDrain())
		}
		return nil
	})
	return n
}

func (f *fleet) maintenance(name string) *unyov1.Maintenance {
	f.t.Helper()
	resp, err := f.c.Objects.Get(context.Background(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Maintenance", Name: name}}))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Msg.GetObjects()[0].GetMaintenance()
}

// TestDrain: a drained node's computes get replacements on other nodes
// first; each original goes only once its replacement runs; the node ends
// empty with nothing reserved, its maintenance opened and ended. A drain
// whose replacements cannot be placed stops at its deadline and says why;
// with --force the rest are removed without replacements; uncordon cancels
// a drain and removes its replacements not yet Active.
func TestDrain(t *testing.T) {
	f := newFleet(t, cluster.Options{})
	f.join("n1", 4)
	f.cs = []*unyov1.Compute{replica("web", 0, 2), replica("web", 1, 2)}
	all := []string{"n1", "n2", "n3"}
	f.settle(all[:1], "web-0@n1 Active, web-1@n1 Active")
	f.join("n2", 2)
	f.join("n3", 2)

	f.drain("n1", &unyov1.DrainNodeRequest{})
	n1 := f.node("n1")
	if !n1.GetCordoned() || !n1.GetDraining() || n1.GetDrain().GetMaintenance() != "drain-n1" {
		t.Fatalf("n1 after the drain began: cordoned %v draining %v drain %v", n1.GetCordoned(), n1.GetDraining(), n1.GetDrain())
	}
	if m := f.maintenance("drain-n1"); m.GetEndedAt() != nil || !slices.Contains(m.GetSpec().GetNodes(), "n1") {
		t.Fatalf("the drain's maintenance: %v", m)
	}
	// Replacements placed, originals still running until they run.
	testutil.Eventually(t, 10*time.Second, "replacements placed", func() error {
		if w := where(f.sync()); w != "web-0@n1>n2 Active/Creating:Scheduled, web-1@n1>n3 Active/Creating:Scheduled" &&
			w != "web-0@n1>n3 Active/Creating:Scheduled, web-1@n1>n2 Active/Creating:Scheduled" {
			return fmt.Errorf("computes: %s", w)
		}
		return nil
	})
	if _, a := f.assignments("n1"); a != "web-0/running web-1/running" {
		t.Errorf("n1's assignments while replacements start: %s", a)
	}
	if r := f.node("n2").GetReserved().GetCpus() + f.node("n3").GetReserved().GetCpus() + f.node("n1").GetReserved().GetCpus(); r != 8 {
		t.Errorf("%d vCPUs reserved in all with both instances, want 8", r)
	}
	// The new ones run (n2, n3 act first); the originals are retired, then
	// deleted; the replacements take over.
	f.act("n2")
	f.act("n3")
	if _, a := f.assignments("n1"); a != "web-0/deleted web-1/deleted" {
		t.Errorf("n1's assignments once the replacements run: %s", a)
	}
	f.settle(all, "web-0@n2 Active, web-1@n3 Active")
	n1 = f.waitDrain("n1", "Drained")
	if n1.GetReserved().GetCpus() != 0 || n1.GetDraining() || !n1.GetCordoned() {
		t.Errorf("n1 after the drain: reserved %v draining %v cordoned %v", n1.GetReserved(), n1.GetDraining(), n1.GetCordoned())
	}
	if m := f.maintenance("drain-n1"); m.GetEndedAt() == nil {
		t.Errorf("the drain's maintenance did not end: %v", m)
	}

	// n2 cannot be emptied: the only other room is n1, cordoned. Its
	// replacement is Blocked with the reason; the drain stops at the
	// deadline and says what is left.
	f.drain("n2", &unyov1.DrainNodeRequest{Deadline: "2s"})
	testutil.Eventually(t, 10*time.Second, "web-0's replacement Blocked", func() error {
		st := f.sync()["web-0"].GetStatus()
		if st.GetReplacementPhase() != "Blocked" || !strings.Contains(st.GetReplacementMessage(), "cordoned") || st.GetReplacementReason() != "Drain" {
			return fmt.Errorf("web-0: %v", st)
		}
		return nil
	})
	n2 := f.waitDrain("n2", "Stopped")
	if m := n2.GetDrain().GetMessage(); !strings.Contains(m, "1 computes left") || !strings.Contains(m, "web-0") {
		t.Errorf("the stopped drain says %q", m)
	}
	if m := f.maintenance("drain-n2"); m.GetEndedAt() == nil {
		t.Errorf("the stopped drain's maintenance did not end")
	}
	f.settle(all, "web-0@n2 Active, web-1@n3 Active")

	// Again with --force: web-0 goes without a replacement and waits,
	// Blocked, for room.
	f.drain("n2", &unyov1.DrainNodeRequest{Deadline: "1s", Force: true})
	f.settle(all, "web-0@ Blocked, web-1@n3 Active")
	f.waitDrain("n2", "Drained")
	if r := f.node("n2").GetReserved().GetCpus(); r != 0 {
		t.Errorf("n2 has %d vCPUs reserved after a forced drain", r)
	}
	// Uncordoning n1 forgets its drain and lets web-0 in.
	if _, err := f.c.Nodes.CordonNode(context.Background(), connect.NewRequest(&unyov1.CordonNodeRequest{Name: "n1"})); err != nil {
		t.Fatal(err)
	}
	f.settle(all, "web-0@n1 Active, web-1@n3 Active")
	if d := f.node("n1").GetDrain(); d != nil {
		t.Errorf("n1 keeps its drain after uncordon: %v", d)
	}

	// Uncordon cancels a drain: the replacement not yet Active goes, the
	// original stays.
	if _, err := f.c.Nodes.CordonNode(context.Background(), connect.NewRequest(&unyov1.CordonNodeRequest{Name: "n2"})); err != nil {
		t.Fatal(err)
	}
	f.drain("n3", &unyov1.DrainNodeRequest{})
	var next string
	testutil.Eventually(t, 10*time.Second, "web-1's replacement placed", func() error {
		got := f.sync()
		next = got["web-1"].GetStatus().GetReplacingNode()
		if w := where(got); w != "web-0@n1 Active, web-1@n3>"+next+" Active/Creating:Scheduled" || next == "" {
			return fmt.Errorf("computes: %s", w)
		}
		return nil
	})
	if _, err := f.c.Nodes.CordonNode(context.Background(), connect.NewRequest(&unyov1.CordonNodeRequest{Name: "n3"})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the replacement removed", func() error {
		if _, a := f.assignments(next); !strings.Contains(a, "web-1/deleted") {
			return fmt.Errorf("%s's assignments: %s", next, a)
		}
		return nil
	})
	f.settle([]string{next}, "web-0@n1 Active, web-1@n3 Active")
	for _, n := range all {
		want := map[string]int32{"n1": 2, "n2": 0, "n3": 2}[n]
		if r := f.node(n).GetReserved().GetCpus(); r != want {
			t.Errorf("%s has %d vCPUs reserved, want %d", n, r, want)
		}
	}
}

// TestSurgeUpdate: a new spec revision with surge places a next instance
// running the new spec on another node; once it runs, the old one goes
// and the status's spec revision is the new one.
func TestSurgeUpdate(t *testing.T) {
	f := newFleet(t, cluster.Options{})
	f.join("n1", 2)
	c := replica("api", 0, 2)
	c.SpecRevision = 1
	f.cs = []*unyov1.Compute{c}
	got := f.settle([]string{"n1"}, "api-0@n1 Active")
	if r := got["api-0"].GetStatus().GetSpecRevision(); r != 1 {
		t.Errorf("spec revision %d after placement, want 1", r)
	}
	f.join("n2", 2)
	c = replica("api", 0, 2)
	c.SpecRevision, c.Surge = 2, true
	c.Spec.Command = []string{"sleep", "700"}
	f.cs = []*unyov1.Compute{c}
	testutil.Eventually(t, 10*time.Second, "next instance placed", func() error {
		if w := where(f.sync()); w != "api-0@n1>n2 Active/Creating:Scheduled" {
			return fmt.Errorf("computes: %s", w)
		}
		return nil
	})
	as, _ := f.assignments("n2")
	if len(as) != 1 || strings.Join(as[0].GetCommand(), " ") != "sleep 700" {
		t.Errorf("the next instance's assignment: %v", as)
	}
	if as, _ := f.assignments("n1"); len(as) != 1 || strings.Join(as[0].GetCommand(), " ") != "sleep 600" {
		t.Errorf("the current instance's assignment changed: %v", as)
	}
	got = f.settle([]string{"n1", "n2"}, "api-0@n2 Active")
	if r := got["api-0"].GetStatus().GetSpecRevision(); r != 2 {
		t.Errorf("spec revision %d after the update, want 2", r)
	}
	if r := f.node("n1").GetReserved().GetCpus(); r != 0 {
		t.Errorf("n1 keeps %d vCPUs reserved", r)
	}
}

// TestAutoCordon: a node without heartbeats for the cordon interval is
// cordoned automatically (an event says so), and uncordoned once Ready
// again for as long; a node's own settings override the cluster's, and
// one not Ready for its drain interval is drained.
func TestAutoCordon(t *testing.T) {
	// The cluster's default is off; n1's own setting turns it on (set
	// after joining: a node exists first), so n2 can never be cordoned
	// however slowly the test runs.
	// stale_after well above the second the cluster takes to record a
	// heartbeat, so that a node that beats stays Ready.
	f := newFleet(t, cluster.Options{HeartbeatInterval: 200 * time.Millisecond, StaleAfter: 3 * time.Second, DownAfter: 10 * time.Second})
	f.join("n1", 2)
	f.join("n2", 2)
	if _, err := f.c.Nodes.SetNodeAuto(context.Background(), connect.NewRequest(&unyov1.SetNodeAutoRequest{Name: "n1", CordonAfter: "1s"})); err != nil {
		t.Fatal(err)
	}
	if a := f.node("n2").GetAuto(); a.GetEffectiveCordonAfter() != "off" || a.GetEffectiveDrainAfter() != "off" {
		t.Errorf("n2's settings: %v", a)
	}
	if a := f.node("n1").GetAuto(); a.GetEffectiveCordonAfter() != "1s" {
		t.Errorf("n1's settings: %v", a)
	}
	// Neither heartbeats: n1 is cordoned, n2 (off) is not.
	testutil.Eventually(t, 15*time.Second, "n1 auto-cordoned", func() error {
		if n := f.node("n1"); !n.GetCordoned() || !n.GetAuto().GetCordoned() {
			return fmt.Errorf("n1: state %s cordoned %v auto %v", n.GetState(), n.GetCordoned(), n.GetAuto())
		}
		return nil
	})
	if f.node("n2").GetCordoned() {
		t.Errorf("n2 cordoned though its auto-cordon is off")
	}
	testutil.Eventually(t, 10*time.Second, "auto-cordon event", func() error {
		resp, err := f.c.Events.ListEvents(context.Background(), connect.NewRequest(&unyov1.ListEventsRequest{Check: "node-auto"}))
		if err != nil {
			return err
		}
		for _, ev := range resp.Msg.GetEvents() {
			if ev.GetLabels()["node"] == "n1" && strings.Contains(ev.GetOutput(), "cordoned automatically") {
				return nil
			}
		}
		return fmt.Errorf("%d node-auto events, none about n1", len(resp.Msg.GetEvents()))
	})
	// n2's own drain interval: drained on its own, by "auto-drain".
	if _, err := f.c.Nodes.SetNodeAuto(context.Background(), connect.NewRequest(&unyov1.SetNodeAutoRequest{Name: "n2", DrainAfter: "1s"})); err != nil {
		t.Fatal(err)
	}
	n2 := f.waitDrain("n2", "Drained")
	if n2.GetDrain().GetBy() != "auto-drain" || !n2.GetCordoned() {
		t.Errorf("n2 after auto-drain: drain %v cordoned %v", n2.GetDrain(), n2.GetCordoned())
	}
	// n1 beats again, steadily (well inside stale_after however slowly the
	// test's polls run): uncordoned once Ready for the interval.
	ctx, stop := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for ctx.Err() == nil {
			_, _ = f.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n1"}))
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); <-beats }()
	testutil.Eventually(t, 30*time.Second, "n1 auto-uncordoned", func() error {
		if n := f.node("n1"); n.GetCordoned() || n.GetAuto().GetCordoned() {
			return fmt.Errorf("n1: state %s cordoned %v auto %v", n.GetState(), n.GetCordoned(), n.GetAuto())
		}
		return nil
	})
}

// TestDrainStaleNode: a drained node whose agent went silent (Stale, then
// Down) never reports its instances deleted; each is released as soon as
// its replacement is Active, not at the drain's deadline, and the drain
// ends with the node holding nothing.
func TestDrainStaleNode(t *testing.T) {
	f := newFleet(t, cluster.Options{HeartbeatInterval: 200 * time.Millisecond, StaleAfter: 2 * time.Second, DownAfter: 4 * time.Second})
	f.join("n1", 4)
	f.cs = []*unyov1.Compute{replica("web", 0, 2), replica("web", 1, 2)}
	f.settle([]string{"n1"}, "web-0@n1 Active, web-1@n1 Active")
	f.join("n2", 2)
	f.join("n3", 2)
	// n2 and n3 beat; n1 is silent from now on.
	ctx, stop := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for ctx.Err() == nil {
			for _, n := range []string{"n2", "n3"} {
				_, _ = f.c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: n}))
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); <-beats }()
	testutil.Eventually(t, 15*time.Second, "n1 not Ready", func() error {
		if s := f.node("n1").GetState(); s == unyov1.NodeState_NODE_STATE_READY {
			return fmt.Errorf("n1 is %s", s)
		}
		return nil
	})
	f.drain("n1", &unyov1.DrainNodeRequest{Deadline: "1h"})
	testutil.Eventually(t, 15*time.Second, "web on n2 and n3, n1 released", func() error {
		f.act("n2")
		f.act("n3")
		if w := where(f.sync()); w != "web-0@n2 Active, web-1@n3 Active" && w != "web-0@n3 Active, web-1@n2 Active" {
			return fmt.Errorf("computes: %s", w)
		}
		return nil
	})
	n1 := f.waitDrain("n1", "Drained")
	if n1.GetReserved().GetCpus() != 0 {
		t.Errorf("n1 still has %d vCPUs reserved", n1.GetReserved().GetCpus())
	}
	if as, a := f.assignments("n1"); len(as) != 0 {
		t.Errorf("n1 still has assignments: %s", a)
	}
}
