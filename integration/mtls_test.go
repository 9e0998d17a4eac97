package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/testutil"
)

// readNodeCert reads the certificate and key an agent keeps.
func readNodeCert(path string) (*tls.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// certClient calls url presenting only cert: no token.
func certClient(t *testing.T, url, caFile string, cert *tls.Certificate) *client.Clients {
	t.Helper()
	cl, err := client.New(client.Options{URL: url, TLS: client.TLSOptions{CAFile: caFile}, Timeout: 10 * time.Second,
		ClientCertificate: func() (*tls.Certificate, error) { return cert, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Issue 9, Identity: a node enrols over TLS with the join token once and
// gets a client certificate from the cluster's node CA; from then on it
// authenticates with the certificate alone, renews it before it expires
// without losing a call, and `unyo nodes delete` revokes it.
func TestNodeCertificateEnrolRotateRevoke(t *testing.T) {
	dir := t.TempDir()
	caDir, agDir := filepath.Join(dir, "ca"), filepath.Join(dir, "agent")
	if out, err := exec.Command(unyoBin, "ca", "create", "--dir", caDir, "--name", "c1 nodes").CombinedOutput(); err != nil {
		t.Fatalf("unyo ca create: %v: %s", err, out)
	}
	servers := testutil.NewCA(t, "servers")
	serverCert, serverKey := servers.Issue(t, "cluster", "127.0.0.1")
	// The CLI and the agent trust the CA of the cluster's certificate.
	t.Setenv("SSL_CERT_FILE", servers.CertFile)

	clAddr := freeAddr(t)
	clURL := "https://" + clAddr
	clCfg := writeFile(t, dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
  tls: {cert_file: %s, key_file: %s}
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  heartbeat_interval: 1s
  stale_after: 5s
  node_ca: {cert_file: %s/ca.crt, key_file: %s/ca.key}
  node_cert_ttl: 20s
metrics: {store: none}
logs: {store: none}
stats: {enabled: false}
`, dir, clAddr, adminToken, joinToken, serverCert, serverKey, caDir, caDir))
	startUnyo(t, "cluster", nil, "server", "--config", clCfg)
	testutil.Eventually(t, 30*time.Second, "the cluster to answer over TLS", func() error {
		_, err := cli(t, clURL, "--token", adminToken, "status")
		return err
	})

	agCfg := writeFile(t, dir, "agent.yaml", fmt.Sprintf(`
role: agent
data_dir: %s
agent:
  node_name: n1
  cluster_url: %s
  flush_interval: 100ms
  metrics_interval: 0s
  checks:
    - name: tick
      spec: {command: ["true"], interval: 1s}
`, agDir, clURL))
	agent := startUnyo(t, "agent", []string{"UNYO_AGENT_TOKEN=" + joinToken}, "agent", "--config", agCfg)

	// Enrolment: a certificate for n1 signed by the node CA, and no token.
	certFile := filepath.Join(agDir, "agent", "node-cert.pem") // the agent keeps its state in <data_dir>/agent
	var first *tls.Certificate
	testutil.Eventually(t, 30*time.Second, "the agent to enrol and keep its certificate", func() error {
		var err error
		first, err = readNodeCert(certFile)
		return err
	})
	if first.Leaf.Subject.CommonName != "n1" || len(first.Leaf.URIs) != 1 || first.Leaf.URIs[0].String() != "unyo://node/n1" {
		t.Errorf("the node certificate names %q %v, want n1 and unyo://node/n1", first.Leaf.Subject.CommonName, first.Leaf.URIs)
	}
	if fi, err := os.Stat(certFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the node certificate file: %v, %v; want mode 0600", fi, err)
	}
	if _, err := os.Stat(filepath.Join(agDir, "agent", "node-token")); !os.IsNotExist(err) {
		t.Errorf("the cluster issued a node token too (%v): a node with a certificate must not need one", err)
	}

	// The certificate alone is the node's credential: it acts as n1, and
	// only as n1.
	ctx := context.Background()
	testutil.Eventually(t, 15*time.Second, "a client with only the node's certificate to heartbeat as n1", func() error {
		cur, err := readNodeCert(certFile) // the agent may have renewed it meanwhile
		if err != nil {
			return err
		}
		cl := certClient(t, clURL, servers.CertFile, cur)
		if _, err := cl.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n1"})); err != nil {
			return err
		}
		_, err = cl.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n2"}))
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("n1's certificate heartbeating as n2: %v, want PermissionDenied", err)
		}
		return nil
	})

	// Rotation: results keep arriving past the first certificate's expiry.
	adminCl, err := client.New(client.Options{URL: clURL, Token: adminToken, TLS: client.TLSOptions{CAFile: servers.CertFile}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	expired := first.Leaf.NotAfter
	testutil.Eventually(t, time.Until(expired)+30*time.Second, "results started after the first certificate expired", func() error {
		resp, err := adminCl.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{Node: "n1", Check: "tick", History: true, Limit: 5}))
		if err != nil {
			return err
		}
		for _, e := range resp.Msg.GetEvents() {
			if e.GetStartedAt().AsTime().After(expired.Add(2 * time.Second)) {
				return nil
			}
		}
		return fmt.Errorf("none yet (the first certificate expires at %s)", expired.Format(time.TimeOnly))
	})
	now, err := readNodeCert(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if identity.Serial(now.Leaf) == identity.Serial(first.Leaf) || !now.Leaf.NotAfter.After(time.Now()) {
		t.Errorf("the agent still keeps certificate %s (expires %s); want a renewed one", identity.Serial(now.Leaf), now.Leaf.NotAfter)
	}
	// The replaced certificate no longer works.
	_, err = certClient(t, clURL, servers.CertFile, first).Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n1"}))
	if err == nil {
		t.Error("the first, replaced certificate still authenticates")
	}
	// No call was refused while the agent swapped its certificate.
	log, _ := os.ReadFile(agent.log)
	if strings.Contains(strings.ToLower(string(log)), "unauthenticated") {
		t.Errorf("the agent had calls refused during rotation:\n%s", log)
	}
	if !strings.Contains(string(log), "renewed this node's certificate") {
		t.Error("the agent's log does not say it renewed its certificate")
	}
	// The renewal is in the cluster's audit log, made by the node itself.
	renewals, err := cliJSON(t, clURL, "--token", adminToken, "audit", "ls", "--kind", "NodeCertificate")
	if err != nil || len(renewals) == 0 || renewals[0]["who"] != "node:n1" || renewals[0]["outcome"] != "ok" {
		t.Errorf("audit ls --kind NodeCertificate: want renewals by node:n1, got %v (%v)", renewals, err)
	}

	// Revocation: unyo nodes delete makes the current certificate fail.
	if out, err := cli(t, clURL, "--token", adminToken, "nodes", "delete", "n1"); err != nil {
		t.Fatalf("nodes delete: %v: %s", err, out)
	}
	cur, err := readNodeCert(certFile)
	if err != nil {
		t.Fatal(err)
	}
	_, err = certClient(t, clURL, servers.CertFile, cur).Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: "n1"}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("the deleted node's certificate: %v, want Unauthenticated saying it was revoked", err)
	}
}
