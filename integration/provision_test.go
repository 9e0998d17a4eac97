package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// provisionFleet is a cluster process (SQLite, no root: the test calls
// SyncComputes as root would) and agents running provider-exec.
type provisionFleet struct {
	t       *testing.T
	dir     string
	url     string
	cluster *proc
	cl      *client.Clients
	plugin  string // unyo-provider-exec
	sum     string
	agents  map[string]*proc
}

func newProvisionFleet(t *testing.T) *provisionFleet {
	t.Helper()
	return newProvisionFleetWith(t, "")
}

// newProvisionFleetWith starts the fleet's cluster with extra lines of its
// cluster: section (indented two spaces).
func newProvisionFleetWith(t *testing.T, extra string) *provisionFleet {
	t.Helper()
	f := &provisionFleet{t: t, dir: t.TempDir(), agents: map[string]*proc{}}
	f.plugin = buildPlugin(t, "../plugins/provider-exec", "unyo-provider-exec")
	f.sum = sha256File(t, f.plugin)
	addr := freeAddr(t)
	f.url = "http://" + addr
	cfg := writeFile(t, f.dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c1
  default_rules: false
  heartbeat_interval: 1s
  stale_after: 5s
  lease_ttl: 3s
%s`, f.dir, addr, adminToken, joinToken, extra))
	f.cluster = startUnyo(t, "cluster", nil, "server", "--config", cfg)
	cl, err := client.New(client.Options{URL: f.url, Token: adminToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.cl = cl
	// The commands outlive their agents by design: end them with the test.
	t.Cleanup(func() { killMarked(t) })
	return f
}

func (f *provisionFleet) agent(name string) *proc {
	f.t.Helper()
	cfg := writeFile(f.t, f.dir, name+".yaml", fmt.Sprintf(`
role: agent
data_dir: %[1]s/%[2]s
agent:
  node_name: %[2]s
  cluster_url: %[3]s
  token: %[4]s
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
  plugins:
    dirs: [%[5]s]
    enabled:
      - {kind: provider, name: exec, sha256: %[6]s, config: {state_dir: %[1]s/%[2]s-exec}}
`, f.dir, name, f.url, joinToken, filepath.Dir(f.plugin), f.sum))
	p := startUnyo(f.t, name, nil, "agent", "--config", cfg)
	f.agents[name] = p
	testutil.Eventually(f.t, 30*time.Second, name+" Ready", func() error {
		n, err := f.node(name)
		if err != nil {
			return err
		}
		if n.GetState() != unyov1.NodeState_NODE_STATE_READY {
			return fmt.Errorf("%s is %s", name, n.GetState())
		}
		return nil
	})
	return p
}

func (f *provisionFleet) node(name string) (*unyov1.Node, error) {
	resp, err := f.cl.Nodes.GetNode(f.t.Context(), connect.NewRequest(&unyov1.GetNodeRequest{Name: name}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetNodes()[0], nil
}

func (f *provisionFleet) sync(cs []*unyov1.Compute) map[string]*unyov1.Compute {
	f.t.Helper()
	out, err := f.trySync(cs)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// trySync is sync returning the error (the cluster may be restarting).
func (f *provisionFleet) trySync(cs []*unyov1.Compute) (map[string]*unyov1.Compute, error) {
	resp, err := f.cl.Provision.SyncComputes(f.t.Context(), connect.NewRequest(&unyov1.SyncComputesRequest{Computes: cs}))
	if err != nil {
		return nil, err
	}
	out := map[string]*unyov1.Compute{}
	for _, c := range resp.Msg.GetComputes() {
		out[c.GetName()] = c
	}
	return out, nil
}

// waitPhases syncs cs until every compute is in the phase want gives it
// (and none else is held), and returns the computes.
func (f *provisionFleet) waitPhases(cs []*unyov1.Compute, want map[string]string) map[string]*unyov1.Compute {
	f.t.Helper()
	var got map[string]*unyov1.Compute
	testutil.Eventually(f.t, 60*time.Second, fmt.Sprintf("phases %v", want), func() error {
		got = f.sync(cs)
		have := map[string]string{}
		for n, c := range got {
			have[n] = c.GetStatus().GetPhase()
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			return fmt.Errorf("phases %v", have)
		}
		return nil
	})
	return got
}

// marker is the argument that tells this test's commands apart from every
// other process: sleep MARKER.
const marker = "31536017"

// killMarked ends the commands the test started.
func killMarked(t *testing.T) {
	for pid := range marked(t) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// marked returns the pids of the test's commands by their env's
// UNYO_TEST_SERVICE.
func marked(t *testing.T) map[int]string { return markedWith(marker) }

// markedWith is marked for the commands `sleep m`: tests whose commands
// other tests' cleanups must not end use a marker of their own.
func markedWith(m string) map[int]string {
	out := map[int]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.Equal(cmd, []byte("sleep\x00"+m+"\x00")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(p, "environ"))
		var pid int
		fmt.Sscanf(filepath.Base(p), "%d", &pid)
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "UNYO_TEST_SERVICE="); ok {
				out[pid] = v
			}
		}
	}
	return out
}

// running counts the test's commands per service.
func running(t *testing.T) map[string]int {
	out := map[string]int{}
	for _, svc := range marked(t) {
		out[svc]++
	}
	return out
}

// TestProvisionAssignments: a cluster and two agents running provider-exec.
// Three computes become Active on the nodes without overcommit; one that
// fits nowhere is Blocked with its reason and placed once a third agent
// joins; a removed compute is deleted on its agent and its reservation
// released; an agent killed and restarted recovers its resources without
// making them twice.
func TestProvisionAssignments(t *testing.T) {
	f := newProvisionFleet(t)
	f.agent("a1")
	f.agent("a2")
	n1, err := f.node("a1")
	if err != nil {
		t.Fatal(err)
	}
	// Memory is the dimension that binds, whatever this machine's size:
	// two web replicas fill a node, and zz needs more than one node has
	// left after web.
	mem := n1.GetCapacity().GetMemoryBytes()
	replica := func(service string, i int, memory int64) *unyov1.Compute {
		return &unyov1.Compute{
			Name: fmt.Sprintf("%s-%d", service, i), Service: service, Index: int32(i), Cluster: "c1",
			Spec: &unyov1.ComputeSpec{Provider: "exec", Command: []string{"sleep", marker},
				Env: map[string]string{"UNYO_TEST_SERVICE": service}},
			Resources: &unyov1.ComputeResources{MemoryBytes: memory},
		}
	}
	web := []*unyov1.Compute{replica("web", 0, mem*2/5), replica("web", 1, mem*2/5), replica("web", 2, mem*2/5)}
	big := replica("zz", 0, mem*7/10)
	all := append(append([]*unyov1.Compute{}, web...), big)
	got := f.waitPhases(all, map[string]string{"web-0": "Active", "web-1": "Active", "web-2": "Active", "zz-0": "Blocked"})
	if st := got["zz-0"].GetStatus(); st.GetReason() != "NoCapacity" || !strings.Contains(st.GetMessage(), "0/2 nodes fit") || !strings.Contains(st.GetMessage(), "insufficient memory") {
		t.Errorf("zz-0's status: %v", st)
	}
	checkNoOvercommit(t, f, got)
	testutil.Eventually(t, 10*time.Second, "3 web commands", func() error {
		if r := running(t); r["web"] != 3 {
			return fmt.Errorf("running: %v", r)
		}
		return nil
	})

	// A third agent joins: zz-0 is placed there and runs.
	f.agent("a3")
	got = f.waitPhases(all, map[string]string{"web-0": "Active", "web-1": "Active", "web-2": "Active", "zz-0": "Active"})
	if n := got["zz-0"].GetStatus().GetNode(); n != "a3" {
		t.Errorf("zz-0 runs on %q, want a3", n)
	}
	checkNoOvercommit(t, f, got)

	// Root drops web-2: its agent deletes it and the reservation goes.
	gone := got["web-2"].GetStatus().GetNode()
	all = []*unyov1.Compute{web[0], web[1], big}
	got = f.waitPhases(all, map[string]string{"web-0": "Active", "web-1": "Active", "zz-0": "Active"})
	checkNoOvercommit(t, f, got)
	testutil.Eventually(t, 10*time.Second, "2 web commands", func() error {
		if r := running(t); r["web"] != 2 || r["zz"] != 1 {
			return fmt.Errorf("running: %v", r)
		}
		return nil
	})
	t.Logf("web-2 was on %s", gone)

	// The agent of web-0 is killed and restarted: it recovers its
	// resources and makes none twice.
	victim := got["web-0"].GetStatus().GetNode()
	p := f.agents[victim]
	p.kill()
	p.restart()
	time.Sleep(3 * time.Second) // a reconcile pass of the restarted agent
	got = f.waitPhases(all, map[string]string{"web-0": "Active", "web-1": "Active", "zz-0": "Active"})
	if r := running(t); r["web"] != 2 || r["zz"] != 1 {
		t.Errorf("after %s restarted: running %v, want 2 web and 1 zz", victim, r)
	}
	checkNoOvercommit(t, f, got)

	// `unyo nodes cordon` and `nodes ls` (SCHED, reserved/capacity).
	if out, err := cli(t, f.url, "--token", adminToken, "nodes", "cordon", victim); err != nil || !strings.Contains(out, "node "+victim+" cordoned") {
		t.Fatalf("nodes cordon: %v\n%s", err, out)
	}
	out, err := cli(t, f.url, "--token", adminToken, "nodes", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == victim && (f[3] != "cordoned" || !strings.Contains(line, "/")) {
			t.Errorf("nodes ls shows %s as: %s", victim, line)
		}
	}
	if out, err := cli(t, f.url, "--token", adminToken, "nodes", "uncordon", victim); err != nil || !strings.Contains(out, "node "+victim+" uncordoned") {
		t.Fatalf("nodes uncordon: %v\n%s", err, out)
	}

	// Everything removed: nothing runs, nothing is reserved.
	f.waitPhases(nil, map[string]string{})
	testutil.Eventually(t, 20*time.Second, "no command left", func() error {
		if r := running(t); len(r) != 0 {
			return fmt.Errorf("running: %v", r)
		}
		for _, n := range []string{"a1", "a2", "a3"} {
			node, err := f.node(n)
			if err != nil {
				return err
			}
			if r := node.GetReserved(); r.GetMemoryBytes() != 0 {
				return fmt.Errorf("%s still has %v reserved", n, r)
			}
		}
		return nil
	})
}

// checkNoOvercommit checks that each node's reservations are what its
// computes hold, and within its capacity.
func checkNoOvercommit(t *testing.T, f *provisionFleet, got map[string]*unyov1.Compute) {
	t.Helper()
	held := map[string]int64{}
	for _, c := range got {
		if n := c.GetStatus().GetNode(); n != "" {
			held[n] += c.GetResources().GetMemoryBytes()
		}
	}
	for name := range f.agents {
		n, err := f.node(name)
		if err != nil {
			t.Fatal(err)
		}
		r := n.GetReserved().GetMemoryBytes()
		if r != held[name] || r > n.GetCapacity().GetMemoryBytes() {
			t.Errorf("node %s: %d bytes reserved, its computes hold %d, capacity %d", name, r, held[name], n.GetCapacity().GetMemoryBytes())
		}
	}
}
