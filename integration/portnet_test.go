package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/vishvananda/netns"

	"github.com/unyo-ops/unyo/core/agent/portnet"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/provider-docker/dockertest"
)

// nodeNS is a network namespace standing in for one node's host.
type nodeNS struct {
	name, path string
	// resource is the node's PhysicalResource (startNodeFleet); empty:
	// srv-X for node-X.
	resource string
}

// newNodeNS creates a namespace with lo up and forwarding on (a node
// routes to its ports), deleted at the test's end.
func newNodeNS(t *testing.T, name string) nodeNS {
	t.Helper()
	ipCmd(t, "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ipCmd(t, "-n", name, "link", "set", "lo", "up")
	// sysctl through nsenter: `ip netns exec` would remount /sys.
	if out, err := exec.Command("nsenter", "--net=/run/netns/"+name, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("forwarding in %s: %v: %s", name, err, out)
	}
	return nodeNS{name: name, path: "/run/netns/" + name}
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// inNetns runs fn on a thread in the namespace at path: a socket made
// there stays in that namespace.
func inNetns(t *testing.T, path string, fn func() error) error {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	err = fn()
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr)
	}
	runtime.UnlockOSThread()
	return err
}

// relayInto listens on 127.0.0.1 inside the namespace at path and relays
// each connection to target in the test's namespace: how an agent in a
// node namespace reaches the cluster (its cluster_url is the returned
// address).
func relayInto(t *testing.T, path, target string) string {
	t.Helper()
	var l net.Listener
	if err := inNetns(t, path, func() (err error) {
		l, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().String()
}

// getIn does an HTTP GET from inside the namespace at path.
func getIn(t *testing.T, path, url string) (int, string, error) {
	t.Helper()
	var conn net.Conn
	host := strings.TrimPrefix(url, "http://")
	host = host[:strings.IndexByte(host, '/')]
	if !strings.Contains(host, ":") {
		host += ":80"
	}
	if err := inNetns(t, path, func() (err error) {
		conn, err = net.DialTimeout("tcp4", host, 3*time.Second)
		return err
	}); err != nil {
		return 0, "", err
	}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, DisableKeepAlives: true}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Per-port network namespaces end to end (issue 15, items 3 and 4): a
// RegionService of 3 busybox httpd containers (provider docker) on 2
// agents, each agent in a network namespace of its own as its own host;
// each container answers HTTP on its /32 from the other node's namespace.
// The two node namespaces are linked by a veth with static routes to each
// other's computes: they stand in for the L3 advertisement. Each
// container reaches its metadata endpoint on 169.254.1.2 (from its own
// address; the node's namespace cannot), an agent inside a container
// registers through its node's proxy and is deregistered with its compute,
// and the service deleted leaves no port namespace.
func TestPortNetworkEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "per-port network namespaces need root")
	}
	testutil.NeedTool(t, "nsenter", "apt-get install util-linux", "/usr/bin/nsenter")
	d := dockertest.Start(t)
	d.BusyboxImage("unyo-test/busybox:web")
	dir := t.TempDir()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)

	// Two nodes, linked, named with the test's own suffix: port
	// namespaces are named after their node, and another test's node-a
	// would share them.
	na, nb := "pa-"+sfx, "pb-"+sfx
	nodes := map[string]nodeNS{na: newNodeNS(t, "unyo-e2e-a-"+sfx), nb: newNodeNS(t, "unyo-e2e-b-"+sfx)}
	for n, res := range map[string]string{na: "srv-a", nb: "srv-b"} {
		ns := nodes[n]
		ns.resource = res
		nodes[n] = ns
	}
	la, lb := "ea"+sfx, "eb"+sfx
	ipCmd(t, "link", "add", la, "netns", nodes[na].name, "type", "veth", "peer", "name", lb, "netns", nodes[nb].name)
	nodeAddr := map[string]string{na: "198.18.0.1", nb: "198.18.0.2"}
	link := map[string]string{na: la, nb: lb}
	for n, peer := range map[string]string{na: nb, nb: na} {
		ns := nodes[n].name
		ipCmd(t, "-n", ns, "addr", "add", nodeAddr[n]+"/32", "dev", link[n])
		ipCmd(t, "-n", ns, "link", "set", link[n], "up")
		ipCmd(t, "-n", ns, "route", "add", nodeAddr[peer]+"/32", "dev", link[n], "scope", "link")
	}
	rootURL, clusterURL := startPortFleet(t, dir, nodes, "docker", func(string) string { return fmt.Sprintf(`{host: "%s"}`, d.Host) })
	a := adminCLI{t, rootURL}
	a.must("apply", "-f", writeFile(t, dir, "catalog.yaml", busyboxCatalog("unyo-test/busybox:web", "portnet", "10.231.0.0/24")+`
---
kind: RegionService
name: web
spec:
  region: tokyo
  compute:
    flavor: small
    image: busybox
    network: portnet
    provider: docker
    replicas: 3
    command: [sh, -c, "echo hello from $(hostname) > /tmp/index.html && exec httpd -f -p 80 -h /tmp"]
`))
	testutil.Eventually(t, 120*time.Second, "web Active 3/3", func() error {
		out, err := a.run("services", "get", "web")
		if err == nil && (!strings.Contains(out, "Active") || !strings.Contains(out, "3/3")) {
			err = fmt.Errorf("services get web:\n%s", out)
		}
		return err
	})
	items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
	if err != nil || len(items) != 3 {
		t.Fatalf("computes: %v, %v", items, err)
	}
	type placed struct{ name, node, addr string }
	var computes []placed
	for _, it := range items {
		st, _ := it["status"].(map[string]any)
		addr := fmt.Sprint(st["address"])
		if addr == "" || addr == "<nil>" {
			addr = fmt.Sprint(it["address"])
		}
		computes = append(computes, placed{fmt.Sprint(it["name"]), fmt.Sprint(st["node"]), strings.Split(addr, "/")[0]})
	}
	// The L3 advertisement's stand-in: each node routes the other's
	// computes through the link between them.
	for _, c := range computes {
		other := map[string]string{na: nb, nb: na}[c.node]
		if other == "" {
			t.Fatalf("compute %s on node %q", c.name, c.node)
		}
		ipCmd(t, "-n", nodes[other].name, "route", "add", c.addr+"/32", "via", nodeAddr[c.node], "dev", link[other], "onlink")
	}
	for _, c := range computes {
		other := map[string]string{na: nb, nb: na}[c.node]
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s answering on %s from %s", c.name, c.addr, other), func() error {
			code, body, err := getIn(t, nodes[other].path, "http://"+c.addr+"/index.html")
			if err == nil && (code != 200 || !strings.HasPrefix(body, "hello from")) {
				err = fmt.Errorf("status %d: %q", code, body)
			}
			return err
		})
	}

	// The metadata endpoint, from inside a container (its own address).
	cli := d.Client()
	defer cli.Close()
	for _, c := range computes[:1] {
		ins, err := cli.ContainerInspect(context.Background(), containerOf(t, d, c.name))
		if err != nil {
			t.Fatal(err)
		}
		ctrNS := fmt.Sprintf("/proc/%d/ns/net", ins.State.Pid)
		var md struct {
			Compute   string   `json:"compute"`
			Node      string   `json:"node"`
			Addresses []string `json:"addresses"`
		}
		testutil.Eventually(t, 30*time.Second, "the metadata endpoint answering "+c.name, func() error {
			code, body, err := getIn(t, ctrNS, "http://169.254.1.2/v1/metadata")
			if err != nil {
				return err
			}
			if code != 200 {
				return fmt.Errorf("status %d: %s", code, body)
			}
			return json.Unmarshal([]byte(body), &md)
		})
		if md.Compute != c.name || md.Node != c.node || len(md.Addresses) != 1 || md.Addresses[0] != c.addr {
			t.Errorf("metadata of %s: %+v, want it on %s with %s", c.name, md, c.node, c.addr)
		}
		// The node's own namespace does not reach it.
		if code, body, err := getIn(t, nodes[c.node].path, "http://169.254.1.2/v1/metadata"); err == nil {
			t.Errorf("the node reached a port's metadata endpoint: %d %s", code, body)
		}
	}

	// An agent inside a container of a service reports through its node's
	// proxy: it registers as its own node-like entity, named as its
	// compute, and its check result shows up at the cluster under that
	// name.
	agentImage(t, d, "unyo-test/agent:1")
	a.must("apply", "-f", writeFile(t, dir, "probe.yaml", `
kind: Flavor
name: agentsize
spec: {kind: container, vcpus: 1, memory: 256Mi, disk: 100Mi}
---
kind: Image
name: agent
spec: {kind: container, source: unyo-test/agent:1}
---
kind: RegionService
name: probe
spec:
  region: tokyo
  compute:
    flavor: agentsize
    image: agent
    network: portnet
    provider: docker
    replicas: 1
    command: [sh, -c, `+strconv.Quote(inComputeAgent)+`]
`))
	testutil.Eventually(t, 120*time.Second, "the in-compute agent's result at the cluster under probe-0", func() error {
		ev, err := cliJSON(t, clusterURL, "--token", adminToken, "events", "ls", "--node", "probe-0")
		if err != nil {
			return err
		}
		for _, e := range ev {
			if strings.Contains(fmt.Sprint(e), "hello from inside probe-0") {
				return nil
			}
		}
		return fmt.Errorf("events of probe-0: %v", ev)
	})
	// The compute's agent is no place for replicas: it is cordoned.
	nodesAt, err := cliJSON(t, clusterURL, "--token", adminToken, "nodes", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodesAt {
		if n["name"] == "probe-0" && n["cordoned"] != true {
			t.Errorf("the compute agent's node is not cordoned: %v", n)
		}
	}

	// A container restarted gets a new namespace; the agent wires it again.
	first := computes[0]
	if err := cli.ContainerRestart(context.Background(), containerOf(t, d, first.name), container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, first.name+" answering again after a restart", func() error {
		other := map[string]string{na: nb, nb: na}[first.node]
		code, body, err := getIn(t, nodes[other].path, "http://"+first.addr+"/index.html")
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d: %q", code, body)
		}
		return err
	})

	// The cluster refuses a node's agent speaking for a compute not
	// assigned to it, and takes one for a compute that is.
	for _, c := range computes {
		other := map[string]string{na: nb, nb: na}[c.node]
		for _, tc := range []struct {
			node string
			want bool
		}{{other, false}, {c.node, true}} {
			code, body := callFor(t, clusterURL, filepath.Join(dir, tc.node, "agent", "node-token"), c.name)
			if refused := code == http.StatusForbidden && strings.Contains(body, "is not assigned to node"); refused == tc.want {
				t.Errorf("%s speaking for %s (on %s): %d %s", tc.node, c.name, c.node, code, body)
			}
		}
	}

	a.must("services", "delete", "web")
	a.must("services", "delete", "probe")
	// The compute's agent goes with its compute: its node record is
	// deregistered.
	testutil.Eventually(t, 90*time.Second, "probe-0's agent deregistered with its compute", func() error {
		nodesAt, err := cliJSON(t, clusterURL, "--token", adminToken, "nodes", "ls")
		if err != nil {
			return err
		}
		for _, n := range nodesAt {
			if n["name"] == "probe-0" {
				return fmt.Errorf("node probe-0 is still registered: %v", n)
			}
		}
		return nil
	})
	testutil.Eventually(t, 90*time.Second, "the ports gone with the service", func() error {
		for n, ns := range nodes {
			h, err := netns.GetFromPath(ns.path)
			if err != nil {
				return err
			}
			m, err := portnet.New(n, h)
			h.Close()
			if err != nil {
				return err
			}
			left, err := m.List()
			m.Close()
			if err != nil || len(left) > 0 {
				return fmt.Errorf("%s still has ports %v (%v)", n, left, err)
			}
		}
		return nil
	})
}

// startPortFleet starts root, cluster c1 and one agent per node namespace
// (nodes maps node-a, node-b to theirs; srv-a, srv-b of the inventory),
// each inside its namespace with agent.ports on and the provider plugin
// named (its config from config(node)); it waits until the nodes are
// Ready. The nodes' ports are checked gone at the end.
func startPortFleet(t *testing.T, dir string, nodes map[string]nodeNS, provider string, config func(node string) string) (rootURL, clusterURL string) {
	t.Helper()
	p := buildNodePlugin(t, provider)
	return startNodeFleet(t, dir, nodes, func(node string) (string, []nodePlugin) {
		p.config = config(node)
		return "", []nodePlugin{p}
	})
}

// nodePlugin is a provider plugin an agent of a node fleet enables.
type nodePlugin struct {
	name, bin, sha256, config string
}

// buildNodePlugin builds plugins/provider-NAME (its config left to set).
func buildNodePlugin(t *testing.T, provider string) nodePlugin {
	t.Helper()
	bin := buildPlugin(t, "../plugins/provider-"+provider, "unyo-provider-"+provider)
	return nodePlugin{name: provider, bin: bin, sha256: sha256File(t, bin)}
}

// startNodeFleet starts root, cluster c1 and one agent per node namespace
// (nodes maps node names to theirs; each on its resource, srv-a or srv-b
// of the inventory),
// each inside its namespace with agent.ports on, the provider plugins
// node(name) lists and its extra agent configuration (lines indented
// under agent:); it waits until the nodes are Ready. The nodes' ports are
// checked gone at the end (and removed): port namespaces are named after
// their node, in the machine's one /run/netns, so a test running beside
// others names its nodes with a suffix of its own.
func startNodeFleet(t *testing.T, dir string, nodes map[string]nodeNS, node func(name string) (extra string, plugins []nodePlugin)) (rootURL, clusterURL string) {
	t.Helper()
	// Whatever an agent left (it is stopped before this runs: cleanups
	// run last-added first), the ports go.
	t.Cleanup(func() {
		for n, ns := range nodes {
			h, err := netns.GetFromPath(ns.path)
			if err != nil {
				continue
			}
			if m, err := portnet.New(n, h); err == nil {
				if removed, _ := m.Prune(nil); len(removed) > 0 {
					t.Errorf("ports of %s left after the test: %v", n, removed)
				}
				m.Close()
			}
			h.Close()
		}
	})
	_, rootURL = startRootProc(t, dir, "")
	a := adminCLI{t, rootURL}
	clusterURL = startLoneCluster(t, dir, fmt.Sprintf("  root_url: %s\n  root_token: %s\n  heartbeat_interval: 1s\n%s",
		rootURL, addClusterAt(t, rootURL, "c1"), lightCluster))
	a.must("apply", "-f", writeFile(t, dir, "inventory.yaml", topologyInventory("r2")+`
---
kind: Cluster
name: c1
spec: {region: tokyo, weight: 1}
`))
	nsenter, _ := exec.LookPath("nsenter")
	for name, ns := range nodes {
		extra, plugins := node(name)
		var dirs []string
		var enabled strings.Builder
		for _, p := range plugins {
			dirs = append(dirs, filepath.Dir(p.bin))
			fmt.Fprintf(&enabled, "      - {kind: provider, name: %s, sha256: %s, config: %s}\n", p.name, p.sha256, p.config)
		}
		resource := ns.resource
		if resource == "" {
			resource = "srv-" + strings.TrimPrefix(name, "node-")
		}
		relay := relayInto(t, ns.path, strings.TrimPrefix(clusterURL, "http://"))
		startUnyoBin(t, nsenter, name, nil, "--net="+ns.path, unyoBin, "agent", "--config", writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: http://%s
  token: %s
  resource: %s
  flush_interval: 100ms
  ports: {enabled: true}
%s  plugins:
    dirs: [%s]
    enabled:
%s`, dir, name, name, relay, joinToken, resource, extra, strings.Join(dirs, ", "), enabled.String())))
	}
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d Ready nodes", len(nodes)), func() error {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "nodes", "ls")
		if err != nil || len(items) != len(nodes) {
			return fmt.Errorf("nodes: %d, %v", len(items), err)
		}
		return nil
	})
	return rootURL, clusterURL
}

// A process port (provider exec): the command runs in its port namespace,
// answers on its /32 from the node, and reaches its metadata from there.
// (It shares the namespace with the metadata endpoint, so it listens on
// another port than 80.)
func TestPortNetworkExec(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "per-port network namespaces need root")
	}
	testutil.NeedTool(t, "nsenter", "apt-get install util-linux", "/usr/bin/nsenter")
	bb := testutil.NeedTool(t, "busybox (static)", "apt-get install busybox-static", "/bin/busybox", "/usr/bin/busybox")
	dir := t.TempDir()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)
	www := filepath.Join(dir, "www-"+sfx)
	if err := os.Mkdir(www, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, www, "index.html", "hello from a process port\n")
	// The replica outlives a killed agent; not the test.
	t.Cleanup(func() {
		stopServiceProcs(t, dir)
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if cmd, err := os.ReadFile(p); err == nil && strings.Contains(string(cmd), www) {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
	// The node's name is the test's own: port namespaces are named after
	// their node, and another test's node-a would share them.
	node := "pe-" + sfx
	ns := newNodeNS(t, "unyo-e2e-x-"+sfx)
	ns.resource = "srv-a"
	nodes := map[string]nodeNS{node: ns}
	rootURL, _ := startPortFleet(t, dir, nodes, "exec", func(node string) string { return fmt.Sprintf(`{state_dir: %s/%s-exec}`, dir, node) })
	a := adminCLI{t, rootURL}
	a.must("apply", "-f", writeFile(t, dir, "catalog.yaml", busyboxCatalog(bb, "portnet", "10.232.0.0/24")+fmt.Sprintf(`
---
kind: RegionService
name: web
spec:
  region: tokyo
  compute:
    flavor: small
    image: busybox
    network: portnet
    provider: exec
    replicas: 1
    command: [%s, httpd, -f, -p, "8080", -h, %s]
`, bb, www)))
	testutil.Eventually(t, 90*time.Second, "web Active 1/1", func() error {
		out, err := a.run("services", "get", "web")
		if err == nil && (!strings.Contains(out, "Active") || !strings.Contains(out, "1/1")) {
			err = fmt.Errorf("services get web:\n%s", out)
		}
		return err
	})
	items, err := cliJSON(t, rootURL, "--token", adminToken, "computes", "ls")
	if err != nil || len(items) != 1 {
		t.Fatalf("computes: %v, %v", items, err)
	}
	st, _ := items[0]["status"].(map[string]any)
	addr := strings.Split(fmt.Sprint(st["address"]), "/")[0]
	testutil.Eventually(t, 30*time.Second, "the process answering on "+addr+" from its node", func() error {
		code, body, err := getIn(t, ns.path, "http://"+addr+":8080/index.html")
		if err == nil && (code != 200 || !strings.HasPrefix(body, "hello from a process port")) {
			err = fmt.Errorf("status %d: %q", code, body)
		}
		return err
	})
	// Its metadata, from inside its port namespace.
	h, err := netns.GetFromPath(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := portnet.New(node, h)
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	testutil.Eventually(t, 30*time.Second, "the metadata endpoint answering web-0", func() error {
		code, body, err := getIn(t, m.Path("web-0"), "http://169.254.1.2/v1/metadata")
		if err == nil && (code != 200 || !strings.Contains(body, `"compute": "web-0"`)) {
			err = fmt.Errorf("status %d: %s", code, body)
		}
		return err
	})
	a.must("services", "delete", "web")
	testutil.Eventually(t, 60*time.Second, "the port gone with the service", func() error {
		if left, err := m.List(); err != nil || len(left) > 0 {
			return fmt.Errorf("ports %v (%v)", left, err)
		}
		return nil
	})
}

// busyboxCatalog is the catalog of a busybox service: Flavor small, Image
// busybox (from source: the busybox binary for provider exec, an image
// for docker) and Network network of cidr (its gateway the first address).
func busyboxCatalog(source, network, cidr string) string {
	gw := netip.MustParsePrefix(cidr).Addr().Next()
	return fmt.Sprintf(`
kind: Flavor
name: small
spec: {kind: container, vcpus: 1, memory: 64Mi, disk: 100Mi}
---
kind: Image
name: busybox
spec: {kind: container, source: %s}
---
kind: Network
name: %s
spec: {cidr: %s, gateway: %s, scope: region, region: tokyo}
`, source, network, cidr, gw)
}

// inComputeAgent is the command of the probe service's container: it reads
// its metadata (name, the cluster's URL through the proxy, its token) and
// runs `unyo agent` with a check.
const inComputeAgent = `until wget -qO /tmp/md http://169.254.1.2/v1/metadata; do sleep 0.2; done
field() { sed -n "s/.*\"$1\": \"\([^\"]*\)\".*/\1/p" /tmp/md; }
cat > /tmp/agent.yaml <<EOF
role: agent
data_dir: /tmp/unyo
agent:
  node_name: $(field compute)
  cluster_url: $(field cluster_url)
  token: $(field join_token)
  status_listen: ""
  flush_interval: 100ms
  checks:
    - name: incompute
      spec: {command: [sh, -c, "echo hello from inside $(field compute); exit 2"], interval: 1s}
EOF
exec /bin/unyo agent --config /tmp/agent.yaml`

// agentImage imports an image of busybox with the unyo binary at /bin/unyo
// and the shared libraries it links (the host's, per ldd).
func agentImage(t *testing.T, d *dockertest.Daemon, ref string) {
	t.Helper()
	bb := testutil.NeedTool(t, "busybox (static)", "apt-get install busybox-static", "/bin/busybox", "/usr/bin/busybox")
	base, err := dockertest.BusyboxTar(bb)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tr := tar.NewReader(bytes.NewReader(base))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"bin/unyo": unyoBin}
	out, err := exec.Command("ldd", unyoBin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", unyoBin, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files[strings.TrimPrefix(f, "/")] = f
		}
	}
	dirs := map[string]bool{"bin": true}
	for name, src := range files {
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cli := d.Client()
	defer cli.Close()
	rd, err := cli.ImageImport(context.Background(), image.ImportSource{Source: &buf, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`CMD ["sh"]`, `ENV PATH=/bin`}})
	if err != nil {
		t.Fatalf("importing %s: %v", ref, err)
	}
	_, _ = io.Copy(io.Discard, rd)
	rd.Close()
}

// callFor makes a Heartbeat at the cluster with the node credential in
// tokenFile, naming compute as the node agent's proxy does.
func callFor(t *testing.T, clusterURL, tokenFile, compute string) (int, string) {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", clusterURL+"/unyo.v1.AgentService/Heartbeat", strings.NewReader(`{"node":"`+compute+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Unyo-Compute", compute)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// containerOf returns the id of the docker container of compute.
func containerOf(t *testing.T, d *dockertest.Daemon, compute string) string {
	t.Helper()
	cli := d.Client()
	defer cli.Close()
	l, err := cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "unyo.dev/compute="+compute))})
	if err != nil || len(l) != 1 {
		t.Fatalf("the container of %s: %v, %v", compute, l, err)
	}
	return l[0].ID
}
