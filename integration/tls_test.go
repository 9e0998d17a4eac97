package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// lightCluster is cluster YAML that leaves out the embedded metrics and log
// stores, which these tests do not use.
const lightCluster = `
metrics: {store: none}
logs: {store: none}
stats: {enabled: false}
`

// logSays waits until p's log contains want.
func logSays(t *testing.T, p *proc, want string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s to log %q", p.name, want), func() error {
		data, err := os.ReadFile(p.log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), want) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// Every client verifies a server on a private CA with its CA setting, and
// without it fails with an error that names the setting: agent → cluster
// (agent.tls.ca_file), cluster → root (cluster.root_tls.ca_file), root →
// cluster (root.cluster_tls.ca_file) and the CLI (--ca-file). The agents
// here take their join token from `unyo agent --token`, and one its CA from
// `unyo agent --ca-file`.
func TestTLSPrivateCA(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "unyo-test")
	rootAddr, clAddr, c2Addr := freeAddr(t), freeAddr(t), freeAddr(t)
	rootURL, clURL := "https://"+rootAddr, "https://"+clAddr
	cert, key := ca.Issue(t, "servers", "127.0.0.1", "localhost")

	rootCfg := writeFile(t, dir, "root.yaml", fmt.Sprintf(`
role: root
data_dir: %s/root
server:
  listen: %s
  tls: {cert_file: %s, key_file: %s}
  admin_tokens: [%s]
  join_tokens: [%s]
root:
  cluster_token: %s
  cluster_tls: {ca_file: %s}
`, dir, rootAddr, cert, key, adminToken, joinToken, adminToken, ca.CertFile))
	startUnyo(t, "root", nil, "server", "--config", rootCfg)

	clusterCfg := func(name, addr, rootTLS string) string {
		cred := addClusterAt(t, rootURL, name, "--ca-file", ca.CertFile)
		return writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  tls: {cert_file: %s, key_file: %s}
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: %s
  default_rules: false # the rules this test applies, and no others
  advertise_url: https://%s
  root_url: %s
  root_token: %s
  heartbeat_interval: 1s
  stale_after: 5s
%s
%s`, dir, name, addr, cert, key, adminToken, joinToken, name, addr, rootURL, cred, rootTLS, lightCluster))
	}
	startUnyo(t, "c1", nil, "server", "--config", clusterCfg("c1", clAddr, "  root_tls: {ca_file: "+ca.CertFile+"}"))
	c2 := startUnyo(t, "c2", nil, "server", "--config", clusterCfg("c2", c2Addr, ""))

	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken, "--ca-file", ca.CertFile}, args...)...)
	}
	// cluster → root with cluster.root_tls, and root → cluster with
	// root.cluster_tls: root lists c1 as reachable.
	testutil.Eventually(t, 30*time.Second, "c1 to register at root and answer it", func() error {
		out, err := op("clusters", "ls")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "c1") || !strings.Contains(out, "yes") {
			return fmt.Errorf("clusters ls: %s", out)
		}
		return nil
	})
	logSays(t, c2, "signed by an authority this client does not trust; give this client the CA that signed it with cluster.root_tls.ca_file")

	agentCfg := func(name, tls string) string {
		return writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: agent
data_dir: %s/%s
agent:
  node_name: %s
  cluster_url: %s
  status_listen: 127.0.0.1:0
  metrics_interval: 0s
%s`, dir, name, name, clURL, tls))
	}
	startUnyo(t, "good", nil, "agent", "--config", agentCfg("good", "  tls: {ca_file: "+ca.CertFile+"}"), "--token", joinToken)
	startUnyo(t, "flagged", nil, "agent", "--config", agentCfg("flagged", ""), "--token", joinToken, "--ca-file", ca.CertFile)
	bad := startUnyo(t, "bad", nil, "agent", "--config", agentCfg("bad", ""), "--token", joinToken)
	testutil.Eventually(t, 30*time.Second, "the agents with agent.tls.ca_file and with --ca-file to register", func() error {
		out, err := op("nodes", "ls")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "good") || !strings.Contains(out, "flagged") {
			return fmt.Errorf("nodes ls: %s", out)
		}
		return nil
	})
	logSays(t, bad, "give this client the CA that signed it with agent.tls.ca_file")

	// The CLI without --ca-file.
	_, err := cli(t, rootURL, "--token", adminToken, "clusters", "ls")
	if err == nil || !strings.Contains(err.Error(), "give this client the CA that signed it with --ca-file or UNYO_CA_FILE") {
		t.Errorf("the CLI without --ca-file: %v; want an error naming --ca-file", err)
	}

	// root → cluster without root.cluster_tls: a root that does not trust
	// the CA names the setting for the cluster it cannot reach.
	root2Addr := freeAddr(t)
	root2Cfg := writeFile(t, dir, "root2.yaml", fmt.Sprintf(`
role: root
data_dir: %s/root2
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
root:
  cluster_token: %s
`, dir, root2Addr, adminToken, joinToken, adminToken))
	startUnyo(t, "root2", nil, "server", "--config", root2Cfg)
	c3Cred := addClusterAt(t, "http://"+root2Addr, "c3")
	c3Addr := freeAddr(t)
	startUnyo(t, "c3", nil, "server", "--config", writeFile(t, dir, "c3.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/c3
server:
  listen: %s
  tls: {cert_file: %s, key_file: %s}
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c3
  default_rules: false # the rules this test applies, and no others
  advertise_url: https://%s
  root_url: http://%s
  root_token: %s
%s`, dir, c3Addr, cert, key, adminToken, joinToken, c3Addr, root2Addr, c3Cred, lightCluster)))
	testutil.Eventually(t, 30*time.Second, "root2 to name root.cluster_tls.ca_file for c3", func() error {
		out, err := cli(t, "http://"+root2Addr, "--token", adminToken, "clusters", "ls", "-o", "json")
		if !strings.Contains(out, "root.cluster_tls.ca_file") {
			return fmt.Errorf("clusters ls: %s %v", out, err)
		}
		return nil
	})
}

// Servers and agents refuse the operator commands' flags instead of
// accepting and ignoring them (as `unyo agent --token` once was).
func TestServerCommandsRefuseOperatorFlags(t *testing.T) {
	for _, args := range [][]string{
		{"agent", "--server", "http://127.0.0.1:1"},
		{"agent", "--timeout", "5s"},
		{"server", "--token", "x"},
		{"server", "--ca-file", "/ca.pem"},
		{"dev", "--token", "x"},
	} {
		out, err := exec.Command(unyoBin, args...).CombinedOutput()
		want := fmt.Sprintf("%s is a flag of the operator commands", args[1])
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("unyo %s: %v: %s; want it refused with %q", strings.Join(args, " "), err, out, want)
		}
	}
}
