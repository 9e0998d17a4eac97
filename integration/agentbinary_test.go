package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestAgentBinary: unyo-agent, the agent's own binary that the Debian
// package's unit runs, is `unyo agent`: the same configuration registers
// the node with a cluster and delivers its checks' results.
func TestAgentBinary(t *testing.T) {
	out, err := exec.Command(unyoAgentBin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "unyo-agent ") {
		t.Fatalf("unyo-agent --version: %v %q", err, out)
	}
	_, url := startClusterProcess(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "agent.yaml", fmt.Sprintf(`
role: agent
data_dir: %s
log: {level: warn}
agent:
  node_name: own-binary
  cluster_url: %s
  status_listen: 127.0.0.1:0
  checks:
    - {name: fine, spec: {command: [sh, -c, "echo OK - from unyo-agent"], interval: 1s}}
`, dir, url))
	startUnyoBin(t, unyoAgentBin, "unyo-agent", nil, "--config", cfg)
	testutil.Eventually(t, 30*time.Second, "unyo-agent's check result at the cluster", func() error {
		events, err := cliJSON(t, url, "events", "ls", "--node", "own-binary")
		if err != nil {
			return err
		}
		if len(events) != 1 || !strings.Contains(fmt.Sprint(events[0]), "from unyo-agent") {
			return fmt.Errorf("events of own-binary: %v", events)
		}
		return nil
	})
}
