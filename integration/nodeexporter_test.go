package integration

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestNodeExporterFullQueries: every query of testdata's list of the
// "Node Exporter Full" dashboard's main panels returns data from a real
// agent's system metrics through root's query engine, which needs
// node_exporter's counter names (node_cpu_seconds_total, ..._total).
func TestNodeExporterFullQueries(t *testing.T) {
	queries := readQueries(t, "testdata/node-exporter-full.queries", map[string]string{"$node": "n1"})
	f := newFleet(t, "")
	f.agent("n1", "{}", "  metrics_interval: 1s\n")
	// irate needs two samples of each counter; the first query waits for them.
	for _, q := range queries {
		testutil.Eventually(t, 60*time.Second, "data for "+q, func() error {
			items, err := f.json("metrics", "query", q)
			if err != nil {
				return err
			}
			for _, it := range items {
				if pts, _ := it["points"].([]any); len(pts) > 0 {
					return nil
				}
			}
			return fmt.Errorf("%s: no series with a value: %v", q, items)
		})
	}
}

// readQueries reads one query a line, skipping blank lines and # comments,
// with vars substituted.
func readQueries(t *testing.T, path string, vars map[string]string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for k, v := range vars {
			line = strings.ReplaceAll(line, k, v)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no queries", path)
	}
	return out
}
