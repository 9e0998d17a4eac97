package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestSecretsStayPrivate runs a cluster (SQLite) and an agent as real
// processes whose data directories an older version left world-readable,
// the agent with its token in its environment (UNYO_AGENT_TOKEN) and a
// check printing its environment. The token must reach no event, the
// agent's /status shows outputs only with its status token, every state
// file ends up 0600 in a 0700 directory, and an api_hook to a loopback
// receiver is refused, since the cluster's allowlist does not list it.
func TestSecretsStayPrivate(t *testing.T) {
	dir := t.TempDir()
	clDir, agDir := filepath.Join(dir, "cluster"), filepath.Join(dir, "agent")
	for _, d := range []string{clDir, agDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	// An empty file is an empty SQLite database, as an older version or a
	// package script might have left it.
	db := filepath.Join(clDir, "state.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}

	clAddr := freeAddr(t)
	clURL := "http://" + clAddr
	clCfg := writeFile(t, dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
  heartbeat_interval: 1s
  stale_after: 5s
metrics: {store: none}
logs: {store: none}
stats: {enabled: false}
`, clDir, clAddr, adminToken, joinToken))
	startUnyo(t, "cluster", nil, "server", "--config", clCfg)
	admin := func(args ...string) ([]map[string]any, error) {
		return cliJSON(t, clURL, append([]string{"--token", adminToken}, args...)...)
	}
	testutil.Eventually(t, 30*time.Second, "the cluster to answer", func() error {
		_, err := cli(t, clURL, "--token", adminToken, "status")
		return err
	})

	hooks := newHookReceiver(t)
	rule := writeFile(t, dir, "rule.yaml", fmt.Sprintf(`kind: EventRule
name: hook-env
spec:
  type: action
  match: {check: env}
  actions: [{api_hook: {url: %q, repeat_interval: 0s}}] # every result, though the check never fires
  owner: t
  reason: an api_hook to a loopback address the allowlist does not list
`, hooks.srv.URL))
	if _, err := cli(t, clURL, "--token", adminToken, "apply", "-f", rule); err != nil {
		t.Fatal(err)
	}

	const statusToken = "status-secret-for-tests"
	agCfg := writeFile(t, dir, "agent.yaml", fmt.Sprintf(`
role: agent
data_dir: %s
agent:
  node_name: n1
  cluster_url: %s
  flush_interval: 100ms
  status_listen: 127.0.0.1:0
  metrics_interval: 0s
  check_env: [DECLARED_FOR_CHECKS]
  checks:
    - name: env
      spec: {command: [env], interval: 1s, env: {FROM_SPEC: "1"}}
`, agDir, clURL))
	startUnyo(t, "agent", []string{
		"UNYO_AGENT_TOKEN=" + joinToken, "UNYO_AGENT_STATUS_TOKEN=" + statusToken,
		"UNDECLARED_SECRET=must-not-leak", "DECLARED_FOR_CHECKS=passed",
	}, "agent", "--config", agCfg)

	// 1. The check's environment: the base, the declared variable and its
	// spec.env; never the agent's token nor anything undeclared.
	var history []map[string]any
	testutil.Eventually(t, 30*time.Second, "results of the env check", func() error {
		var err error
		history, err = admin("events", "ls", "--history", "--node", "n1", "--check", "env")
		if err == nil && len(history) == 0 {
			err = fmt.Errorf("no results yet")
		}
		return err
	})
	for _, e := range history {
		text := str(e, "output") + "\n" + str(e, "long_output")
		for _, want := range []string{"PATH=", "DECLARED_FOR_CHECKS=passed", "FROM_SPEC=1"} {
			if !strings.Contains(text, want) {
				t.Errorf("the check's environment lacks %s:\n%s", want, text)
			}
		}
		for _, leak := range []string{"UNYO_", joinToken, statusToken, "must-not-leak"} {
			if strings.Contains(text, leak) {
				t.Errorf("the check's output has %q:\n%s", leak, text)
			}
		}
	}

	// 2. The agent's /status: redacted without a token, full with it.
	nodes, err := admin("nodes", "get", "n1")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes get n1: %v %v", nodes, err)
	}
	statusURL := "http://" + str(nodes[0], "address") + "/status"
	get := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, statusURL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The output's first line is one of the check's variables.
	if code, body := get(""); code != http.StatusOK || strings.Contains(body, `"output"`) || !strings.Contains(body, `"redacted":true`) {
		t.Errorf("/status without a token: %d %s", code, body)
	}
	if code, body := get(statusToken); code != http.StatusOK || !strings.Contains(body, `"output":"`) || strings.Contains(body, `"redacted"`) {
		t.Errorf("/status with the status token: %d %s", code, body)
	}
	if code, _ := get(joinToken); code != http.StatusUnauthorized {
		t.Errorf("/status with a wrong token: %d, want 401", code)
	}

	// 3. The api_hook was refused at the dial, and says by which rule.
	testutil.Eventually(t, 30*time.Second, "the api_hook's outcome in an explanation", func() error {
		evs, err := admin("events", "ls", "--history", "--node", "n1", "--check", "env")
		if err != nil {
			return err
		}
		for _, e := range evs {
			if x := fmt.Sprint(e["explanation"]); strings.Contains(x, "api_hook to") {
				if !strings.Contains(x, "destination 127.0.0.1 refused") || !strings.Contains(x, "cluster.api_hook.allow") {
					return fmt.Errorf("explanation %s does not name the refusing rule", x)
				}
				return nil
			}
		}
		return fmt.Errorf("no api_hook outcome yet")
	})
	if n := hooks.count(); n != 0 {
		t.Errorf("the loopback receiver got %d deliveries", n)
	}

	// 4. State is private, though it existed with looser modes.
	modes := map[string]os.FileMode{clDir: 0o700, db: 0o600, db + "-wal": 0o600, db + "-shm": 0o600, agDir: 0o700,
		filepath.Join(agDir, "agent"): 0o700, filepath.Join(agDir, "spool"): 0o700}
	segs, _ := filepath.Glob(filepath.Join(agDir, "spool", "*"))
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil && fi.Mode().IsRegular() {
			modes[s] = 0o600
		}
	}
	for path, want := range modes {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}
}
