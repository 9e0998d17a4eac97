package integration

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestNodeExporterFullQueries: every query of testdata's list of the
// "Node Exporter Full" dashboard's main panels returns data from a real
// agent's system metrics through root's query engine, which needs
// node_exporter's counter names (node_cpu_seconds_total, ..._total); and
// so does each in the dashboard's own form, which selects the host with
// instance="$node",job="$job" (the values its variables take from
// label_values(node_load1, job) and label_values(node_load1{job="$job"}, instance), say).
func TestNodeExporterFullQueries(t *testing.T) {
	queries := readQueries(t, "testdata/node-exporter-full.queries", map[string]string{"$node": "n1"})
	stock := strings.NewReplacer(`node="n1"`, `instance="$node",job="$job"`)
	for _, q := range slices.Clone(queries) {
		queries = append(queries, strings.NewReplacer("$node", "n1", "$job", "node").Replace(stock.Replace(q)))
	}
	f := newFleet(t, "")
	f.agent("n1", "{}", "  metrics_interval: 1s\n")
	// The dashboard's variables: job, then instance for that job.
	for _, v := range []struct{ label, want string }{{"job", "node"}, {"instance", "n1"}} {
		testutil.Eventually(t, 60*time.Second, "the dashboard's "+v.label+" variable", func() error {
			out, err := f.cli("metrics", "query", "-o", "json", `count by (`+v.label+`) (node_load1{job="node"})`)
			if err != nil {
				return err
			}
			if !strings.Contains(out, `"`+v.label+`": "`+v.want+`"`) {
				return fmt.Errorf("%s values: %s", v.label, out)
			}
			return nil
		})
	}
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
