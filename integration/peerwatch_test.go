package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Clusters watch each other and root watches every cluster (issue 11,
// item 9): three clusters registered at root form a ring in which each
// watches the two others; a cluster killed with SIGKILL cannot report its
// own death, so its peers raise a critical cluster-peer event about it in
// their own pipelines, which opens an alert through the default rules;
// when it is back the peers' OK event resolves the alert. `clusters ls`
// shows who watches whom and what each saw.
func TestClustersWatchEachOther(t *testing.T) {
	dir := t.TempDir()
	const watch = "  peer_watch: {interval: 1s, unreachable_after: 4s, lag_after: 1m, ingest_after: 10m}\n"
	rootURL := startRootServer(t, dir, "root:\n"+watch)
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	procs := map[string]*proc{}
	for _, name := range []string{"a", "b", "c"} {
		procs[name], _ = startClusterServer(t, dir, name, rootURL, watch)
	}

	// seen returns, per cluster, "watcher:status" of every watcher.
	seen := func() (map[string][]string, error) {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "clusters", "ls")
		if err != nil {
			return nil, err
		}
		out := map[string][]string{}
		for _, c := range items {
			by, _ := c["watched_by"].([]any)
			for _, o := range by {
				m, _ := o.(map[string]any)
				out[str(c, "name")] = append(out[str(c, "name")], str(m, "watcher")+":"+str(m, "status"))
			}
		}
		return out, nil
	}
	watchedAs := func(cluster string, want ...string) func() error {
		return func() error {
			got, err := seen()
			if err != nil {
				return err
			}
			if !slices.Equal(got[cluster], want) {
				return fmt.Errorf("cluster %s is watched as %v, want %v (all: %v)", cluster, got[cluster], want, got)
			}
			return nil
		}
	}
	// Root watches every cluster, and each is watched by the two others.
	for _, w := range [][]string{{"a", "root:ok", "b:ok", "c:ok"}, {"b", "root:ok", "a:ok", "c:ok"}, {"c", "root:ok", "a:ok", "b:ok"}} {
		testutil.Eventually(t, 60*time.Second, "cluster "+w[0]+" to be watched by root and its peers", watchedAs(w[0], w[1:]...))
	}
	out, err := op("clusters", "ls")
	if err != nil || !strings.Contains(out, "WATCHED-BY") || !strings.Contains(out, "root,a,c") || !strings.Contains(out, "root:ok a:ok c:ok") {
		t.Errorf("clusters ls: %v; want b watched by root, a and c, all ok\n%s", err, out)
	}

	// peerAlert returns the state of the alert a cluster holds about b.
	peerAlert := func(in string) (string, error) {
		items, err := cliJSON(t, rootURL, "--token", adminToken, "alerts", "ls", "--all", "--cluster", in, "--node", "b", "--check", "cluster-peer")
		if err != nil {
			return "", err
		}
		if len(items) != 1 {
			return "", fmt.Errorf("alerts in %s about b: %v, want one", in, items)
		}
		return str(items[0], "state"), nil
	}
	alertIs := func(in, want string) func() error {
		return func() error {
			st, err := peerAlert(in)
			if err == nil && st != want {
				err = fmt.Errorf("the alert in %s about b is %s, want %s", in, st, want)
			}
			return err
		}
	}

	procs["b"].kill()
	for _, peer := range []string{"a", "c"} {
		testutil.Eventually(t, 30*time.Second, "cluster "+peer+" to raise an alert about b, killed", alertIs(peer, "open"))
	}
	testutil.Eventually(t, 10*time.Second, "clusters ls to show b down to every watcher", watchedAs("b", "root:down", "a:down", "c:down"))
	events, err := cliJSON(t, rootURL, "--token", adminToken, "events", "ls", "--cluster", "a", "--node", "b", "--check", "cluster-peer")
	if err != nil || len(events) != 1 || str(events[0], "level") != "critical" || !strings.Contains(str(events[0], "output"), "cluster b has not answered for") {
		t.Errorf("a's event about b: %v %v; want a critical cluster-peer event saying b does not answer", events, err)
	}

	procs["b"].restart()
	for _, peer := range []string{"a", "c"} {
		testutil.Eventually(t, 60*time.Second, "the alert in "+peer+" about b to resolve once b is back", alertIs(peer, "resolved"))
	}
	testutil.Eventually(t, 10*time.Second, "clusters ls to show b ok again", watchedAs("b", "root:ok", "a:ok", "c:ok"))
}
