package main

import (
	"os/exec"
	"strings"
	"testing"
)

// serverOnly are packages only root and cluster use: their init and code
// would cost every node's agent memory for nothing (README, "The agent's
// footprint"). A name ending in / stands for every package under it.
var serverOnly = []string{
	"github.com/unyo-ops/unyo/core/launch",
	"github.com/unyo-ops/unyo/core/cluster",
	"github.com/unyo-ops/unyo/core/root",
	"github.com/unyo-ops/unyo/core/web",
	"github.com/unyo-ops/unyo/core/store/sqlstore",
	"github.com/unyo-ops/unyo/core/tsdb/vmembed",
	"github.com/unyo-ops/unyo/core/logstore/vlembed",
	"github.com/unyo-ops/unyo/core/logstore/clickhouse",
	"github.com/VictoriaMetrics/VictoriaMetrics/app/",
	"github.com/VictoriaMetrics/VictoriaLogs/",
	"github.com/ClickHouse/",
	"modernc.org/sqlite",
	"github.com/jackc/",
	// The plugin SDK's schema compiler: the agent needs only its sdkconfig.
	"github.com/santhosh-tekuri/jsonschema/v6",
}

// TestLinksNoServerPackages: unyo-agent is the agent without the servers.
func TestLinksNoServerPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, d := range deps {
		for _, s := range serverOnly {
			if d == s || (strings.HasSuffix(s, "/") && strings.HasPrefix(d, s)) {
				t.Errorf("unyo-agent links %s, a server's package", d)
			}
		}
	}
}
