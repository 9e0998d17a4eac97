package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// recorder is a fake cluster that records every request's Authorization
// header: root must never send it a credential.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path+" Authorization="+req.Header.Get("Authorization"))
	r.mu.Unlock()
	http.Error(w, "not a cluster", http.StatusNotFound)
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Errorf("%s: got %v (code %v), want %v", what, err, connect.CodeOf(err), code)
	}
}

// Finding 1: a join token holder cannot register a cluster, cannot take
// over an existing cluster's name or URL, and root never sends any
// credential to a URL an attacker chose.
func TestCapturedJoinTokenChain(t *testing.T) {
	f := newFleet(t, "")
	fake := &recorder{}
	evil := httptest.NewServer(fake)
	t.Cleanup(evil.Close)
	ctx := context.Background()

	joinCl, err := client.New(client.Options{URL: f.rootURL, Token: joinToken, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"evil", "c1"} {
		_, err := joinCl.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: name, Url: evil.URL}))
		wantCode(t, "a join token registering cluster "+name, err, connect.CodePermissionDenied)
	}
	// A cluster's credential is bound to its name.
	otherTok := f.addCluster("c2")
	c2, err := client.New(client.Options{URL: f.rootURL, Token: otherTok, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c2.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: "c1", Url: evil.URL}))
	wantCode(t, "cluster c2's credential registering c1", err, connect.CodePermissionDenied)
	// c2's credential does not let it read as an operator.
	_, err = c2.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{}))
	wantCode(t, "cluster c2's credential listing nodes", err, connect.CodePermissionDenied)

	// Root's reads and writes still go to c1 where it registered; no
	// fan-out ever reached the attacker's URL.
	if _, err := f.cli("nodes", "ls"); err != nil {
		t.Errorf("nodes ls: %v", err)
	}
	checks := writeFile(t, f.dir, "chain.yaml", "kind: Check\nname: chain\nspec:\n  command: [\"true\"]\n  interval: 1m\n")
	if out, err := f.cli("apply", "-f", checks); err != nil {
		t.Errorf("apply: %v %s", err, out)
	}
	clusters, err := f.json("clusters", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		if strings.Contains(str(c, "url"), evil.URL) {
			t.Errorf("root took the attacker's URL for cluster %s", str(c, "name"))
		}
	}
	if got := fake.requests(); len(got) > 0 {
		t.Errorf("root sent requests to the attacker's URL: %v", got)
	}

	// Root calls c1 with a credential of its own for c1, not an admin
	// token: root has no cluster_token configured at all, and c1 still
	// answers root's fan-out (nodes ls above).

	// `unyo clusters delete` removes a cluster that never answers, so root
	// commands work again, and revokes its credential.
	if out, err := f.cli("clusters", "add", "junk", "--url", "http://"+freeAddr(t)); err != nil {
		t.Fatalf("clusters add junk: %v %s", err, out)
	}
	if _, err := f.cli("nodes", "ls"); err == nil {
		t.Errorf("nodes ls succeeded with a cluster that does not answer")
	}
	for _, name := range []string{"junk", "c2"} {
		if out, err := f.cli("clusters", "delete", name); err != nil {
			t.Errorf("clusters delete %s: %v %s", name, err, out)
		}
	}
	if _, err := f.cli("nodes", "ls"); err != nil {
		t.Errorf("nodes ls after deleting the junk cluster: %v", err)
	}
	_, err = c2.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: "c2", Url: evil.URL}))
	wantCode(t, "a deleted cluster's credential", err, connect.CodeUnauthenticated)
	if _, err := f.cli("clusters", "delete", "junk"); err == nil || !strings.Contains(err.Error(), "not known") {
		t.Errorf("deleting a deleted cluster: %v", err)
	}
	if got := fake.requests(); len(got) > 0 {
		t.Errorf("root sent requests to the attacker's URL: %v", got)
	}
	// Who added and deleted clusters is in root's audit log.
	recs, err := f.json("audit", "ls", "--kind", "Cluster")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[fmt.Sprint(r["procedure"], " ", r["name"])] = true
	}
	for _, want := range []string{"ClusterService/AddCluster junk", "ClusterService/DeleteCluster junk", "ClusterService/DeleteCluster c2"} {
		if !seen[want] {
			t.Errorf("audit ls --kind Cluster has no %q: %v", want, recs)
		}
	}
}

// agentCall is one agent procedure, called as node.
type agentCall struct {
	name string
	call func(ctx context.Context, c *client.Clients, node string) error
}

func agentCalls() []agentCall {
	return []agentCall{
		{"Register", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: node, Labels: map[string]string{"role": "db"}}}))
			return err
		}},
		{"Heartbeat", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: node}))
			return err
		}},
		{"ReportResults", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Agent.ReportResults(ctx, connect.NewRequest(&unyov1.ReportResultsRequest{Node: node, Results: []*unyov1.Event{{
				Id: fmt.Sprintf("matrix-%d", time.Now().UnixNano()), Node: node, Check: "matrix", Level: unyov1.Level_LEVEL_CRITICAL, Output: "forged", StartedAt: timestamppb.Now(),
			}}}))
			return err
		}},
		{"GetChecks", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Agent.GetChecks(ctx, connect.NewRequest(&unyov1.GetChecksRequest{Node: node}))
			return err
		}},
		{"WriteMetrics", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(&unyov1.WriteMetricsRequest{Node: node, Samples: []*unyov1.Sample{{Name: "forged", Value: 1, TimeMs: time.Now().UnixMilli()}}}))
			return err
		}},
		{"WriteLogs", func(ctx context.Context, c *client.Clients, node string) error {
			_, err := c.Logs.WriteLogs(ctx, connect.NewRequest(&unyov1.WriteLogsRequest{Node: node, Entries: []*unyov1.LogEntry{{Time: timestamppb.Now(), App: "forged", Message: "forged"}}}))
			return err
		}},
	}
}

// Finding 4: a join token only enrols; every agent call acts only as the
// node whose credential it presents.
func TestNodeIdentity(t *testing.T) {
	f := newFleet(t, "")
	ctx := context.Background()
	tokA, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "node-a", Labels: map[string]string{"role": "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "node-b", Labels: map[string]string{"role": "db"}}); err != nil {
		t.Fatal(err)
	}
	as := func(token string) *client.Clients {
		c, err := client.New(client.Options{URL: f.clURL, Token: token, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	nodeA := as(tokA)

	t.Run("matrix", func(t *testing.T) {
		ok := connect.Code(0)
		// Each agent procedure acting as node-a, by caller.
		callers := []struct {
			name string
			cl   *client.Clients
			want map[string]connect.Code // by procedure; default for the rest under "*"
		}{
			{"no token", as(""), map[string]connect.Code{"*": connect.CodeUnauthenticated}},
			{"wrong token", as("unyo-node-not-issued"), map[string]connect.Code{"*": connect.CodeUnauthenticated}},
			{"join token", as(joinToken), map[string]connect.Code{"*": connect.CodePermissionDenied}},
			{"node itself", nodeA, map[string]connect.Code{"*": ok}},
			{"admin", as(adminToken), map[string]connect.Code{"*": ok}},
		}
		for _, c := range callers {
			for _, p := range agentCalls() {
				want, found := c.want[p.name]
				if !found {
					want = c.want["*"]
				}
				err := p.call(ctx, c.cl, "node-a")
				if connect.CodeOf(err) != want && !(want == ok && err == nil) {
					t.Errorf("%s as node-a with %s: %v, want %v", p.name, c.name, err, want)
				} else if want == ok && err != nil {
					t.Errorf("%s as node-a with %s: %v, want success", p.name, c.name, err)
				}
			}
		}
		// Node A's credential acting as node B: refused for every procedure.
		for _, p := range agentCalls() {
			wantCode(t, p.name+" as node-b with node-a's credential", p.call(ctx, nodeA, "node-b"), connect.CodePermissionDenied)
		}
		// Nothing node-a forged for node-b was stored.
		if ev, err := f.json("events", "ls", "--node", "node-b"); err != nil || len(ev) != 0 {
			t.Errorf("events of node-b: %v %v", ev, err)
		}
	})

	t.Run("results", func(t *testing.T) {
		// A node may not report the cluster's liveness judgement, nor a
		// result naming another node inside its own report.
		resp, err := nodeA.Agent.ReportResults(ctx, connect.NewRequest(&unyov1.ReportResultsRequest{Node: "node-a", Results: []*unyov1.Event{
			{Id: "forged-liveness", Node: "node-a", Check: "node-liveness", Level: unyov1.Level_LEVEL_CRITICAL, Output: "forged", StartedAt: timestamppb.Now()},
			{Id: "forged-other", Node: "node-b", Check: "x", Level: unyov1.Level_LEVEL_CRITICAL, Output: "forged", StartedAt: timestamppb.Now()},
		}}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetAccepted() != 0 || len(resp.Msg.GetRejected()) != 2 || !strings.Contains(resp.Msg.GetRejected()[0], "node-liveness") {
			t.Errorf("forged results: accepted %d, rejected %v", resp.Msg.GetAccepted(), resp.Msg.GetRejected())
		}
	})

	t.Run("takeover", func(t *testing.T) {
		// A join token cannot re-register an enrolled node (its labels and
		// address), nor enrol it again.
		_, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "node-a", Labels: map[string]string{"role": "web"}, Address: "10.1.2.3:80"})
		wantCode(t, "a join token re-registering node-a", err, connect.CodePermissionDenied)
		if err != nil && !strings.Contains(err.Error(), "unyo nodes delete node-a") {
			t.Errorf("the refusal does not say what to do: %v", err)
		}
		nodes, err := f.json("nodes", "get", "node-a")
		if err != nil || len(nodes) != 1 || str(nodes[0], "address") == "10.1.2.3:80" {
			t.Errorf("node-a after the takeover attempt: %v %v", nodes, err)
		}
	})

	t.Run("address", func(t *testing.T) {
		// The liveness probe must not reach the cluster's own loopback or
		// a metadata service: such addresses become the node's own.
		for _, tc := range []struct{ addr, want, err string }{
			{"169.254.169.254:80", "127.0.0.1:80", ""},
			{"0.0.0.0:7402", "127.0.0.1:7402", ""},
			{"127.0.0.1:7402", "127.0.0.1:7402", ""},
			{"192.0.2.10:7402", "192.0.2.10:7402", ""},
			{"metadata.google.internal:80", "", "IP address"},
			{"127.0.0.1:80\r\nX: y", "", "port"},
			{"127.0.0.1", "", "host:port"},
		} {
			_, err := nodeA.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "node-a", Labels: map[string]string{"role": "db"}, Address: tc.addr}}))
			if tc.err != "" {
				if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("address %q: %v, want InvalidArgument naming %q", tc.addr, err, tc.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("address %q: %v", tc.addr, err)
				continue
			}
			nodes, err := f.json("nodes", "get", "node-a")
			if err != nil || len(nodes) != 1 || str(nodes[0], "address") != tc.want {
				t.Errorf("address %q stored as %v (%v), want %q", tc.addr, nodes, err, tc.want)
			}
		}
	})

	t.Run("delete", func(t *testing.T) {
		tok, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "gone"})
		if err != nil {
			t.Fatal(err)
		}
		gone := as(tok)
		if _, err := gone.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "gone"})); err != nil {
			t.Fatalf("heartbeat before the delete: %v", err)
		}
		if out, err := f.cli("nodes", "delete", "gone"); err != nil {
			t.Fatalf("nodes delete: %v %s", err, out)
		}
		_, err = gone.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "gone"}))
		wantCode(t, "the deleted node's credential", err, connect.CodeUnauthenticated)
		if _, err := f.json("nodes", "get", "gone"); err == nil {
			t.Errorf("the deleted node is still listed")
		}
		if _, err := f.cli("nodes", "delete", "gone"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("deleting a deleted node: %v", err)
		}
		recs, err := f.json("audit", "ls", "--kind", "Node")
		if err != nil || len(recs) != 1 || recs[0]["procedure"] != "NodeService/DeleteNode" || recs[0]["name"] != "gone" || recs[0]["outcome"] != "ok" {
			t.Errorf("audit ls --kind Node: want one record of deleting gone, got %v (%v)", recs, err)
		}
		// The machine may enrol again with the join token.
		if _, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "gone"}); err != nil {
			t.Errorf("enrolling again after the delete: %v", err)
		}
	})

	t.Run("agent", func(t *testing.T) {
		// A real agent enrols with the join token, keeps its credential
		// (0600) and uses it after a restart.
		p := f.agent("web1", "{role: web}", "")
		file := filepath.Join(f.dir, "web1", "agent", "node-token")
		testutil.Eventually(t, 30*time.Second, "web1 to keep its credential", func() error {
			_, err := os.Stat(file)
			return err
		})
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("credential file: %v %v, want mode 0600", fi.Mode(), err)
		}
		p.stop(syscall.SIGTERM, 10*time.Second)
		p.restart()
		testutil.Eventually(t, 30*time.Second, "web1 registered again after its restart", func() error {
			st, err := f.agentStatus("web1")
			if err != nil {
				return err
			}
			if st["registered"] != true {
				return fmt.Errorf("status: %v", st)
			}
			return nil
		})
	})
}
