package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// startLoneCluster starts a cluster server on SQLite with no root and returns
// its URL.
func startLoneCluster(t *testing.T, dir, extra string) string {
	t.Helper()
	addr := freeAddr(t)
	cfg := writeFile(t, dir, "cluster.yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/cluster
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: c1
  default_rules: false # the rules this test applies, and no others
%s`, dir, addr, adminToken, joinToken, extra))
	startUnyo(t, "cluster", nil, "server", "--config", cfg)
	url := "http://" + addr
	testutil.Eventually(t, 30*time.Second, "the cluster to answer", func() error {
		_, err := cli(t, url, "--token", adminToken, "status")
		return err
	})
	return url
}

// checkDocs writes n Check documents named prefix-0.. to a file.
func checkDocs(t *testing.T, dir, prefix string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\nkind: Check\nname: %s-%d\nspec: {command: [check_dummy, \"0\"], interval: 1m}\n", prefix, i)
	}
	p := filepath.Join(dir, prefix+".yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// countChecks counts the stored checks whose name starts with prefix.
func countChecks(ctx context.Context, cl *client.Clients, prefix string) (int, error) {
	resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "Check"}))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range resp.Msg.GetObjects() {
		if strings.HasPrefix(o.GetCheck().GetName(), prefix) {
			n++
		}
	}
	return n, nil
}

// An apply is one transaction: an apply the client gave up on (the finding:
// 23,046 of 344,160 objects stored after the CLI reported a time-out), an
// apply with one bad object, and an apply under concurrent reads are all or
// nothing.
func TestApplyAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	url := startLoneCluster(t, dir, "")
	cl, err := client.New(client.Options{URL: url, Token: adminToken, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("client time-out", func(t *testing.T) {
		const n = 20_000
		big := checkDocs(t, dir, "big", n)
		_, err := cli(t, url, "--token", adminToken, "--timeout", "300ms", "apply", "-f", big)
		if err == nil {
			t.Log("the apply finished within its time-out; it must then be stored whole")
		} else if !strings.Contains(err.Error(), "did not answer in time") && !strings.Contains(err.Error(), "nothing was stored") {
			t.Errorf("a timed-out apply says: %v", err)
		}
		// The cluster has one writer: this apply returns only after the one
		// the client gave up on has rolled back (or committed).
		if _, err := cli(t, url, "--token", adminToken, "apply", "-f", checkDocs(t, dir, "after", 1)); err != nil {
			t.Fatal(err)
		}
		got, err := countChecks(ctx, cl, "big-")
		if err != nil {
			t.Fatal(err)
		}
		if got != 0 && got != n {
			t.Errorf("%d of %d checks stored after an apply the client gave up on; want all or none", got, n)
		}
		if got == n {
			// Start from an empty cluster again.
			refs := []*unyov1.ObjectRef{}
			for i := range n {
				refs = append(refs, &unyov1.ObjectRef{Kind: "Check", Name: fmt.Sprintf("big-%d", i)})
			}
			if _, err := cl.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: refs})); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("one invalid object", func(t *testing.T) {
		var objs []*unyov1.Object
		for i := range 1000 {
			objs = append(objs, &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{
				Name: fmt.Sprintf("bad-apply-%d", i),
				Spec: &unyov1.CheckSpec{Command: []string{"check_dummy", "0"}, Interval: "1m"},
			}}})
		}
		// A check with neither a command nor a plugin, sent past the CLI.
		objs = append(objs, &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "bad-apply-x", Spec: &unyov1.CheckSpec{Interval: "1m"}}}})
		_, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: objs}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "objects[1000]") {
			t.Errorf("an apply with one invalid object: %v; want invalid_argument naming objects[1000]", err)
		}
		if got, err := countChecks(ctx, cl, "bad-apply-"); err != nil || got != 0 {
			t.Errorf("%d checks stored from a refused apply (%v); want none", got, err)
		}
	})

	t.Run("concurrent reader", func(t *testing.T) {
		const n = 3000
		file := checkDocs(t, dir, "seen", n)
		var wg sync.WaitGroup
		done := make(chan struct{})
		var reads int
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := countChecks(ctx, cl, "seen-")
				if err != nil {
					t.Error(err)
					return
				}
				reads++
				if got != 0 && got != n {
					t.Errorf("a reader saw %d of %d checks of one apply", got, n)
					return
				}
			}
		}()
		_, err := cli(t, url, "--token", adminToken, "apply", "-f", file)
		close(done)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if reads == 0 {
			t.Error("the reader never read")
		}
		if got, err := countChecks(ctx, cl, "seen-"); err != nil || got != n {
			t.Errorf("%d checks stored after the apply (%v), want %d", got, err, n)
		}
	})
}

// An apply through root is atomic per cluster: a bad document is refused at
// root before any cluster stores anything, and a cluster that does not
// answer stores nothing while the others keep their part.
func TestApplyThroughRootPerCluster(t *testing.T) {
	dir := t.TempDir()
	rootURL := startRootServer(t, dir, fmt.Sprintf("  join_tokens: [%s]\nroot:\n  cluster_token: %s\n", joinToken, adminToken))
	clusters := map[string]*proc{}
	for _, name := range []string{"c1", "c2"} {
		cred := addClusterAt(t, rootURL, name)
		addr := freeAddr(t)
		clusters[name] = startUnyo(t, name, nil, "server", "--config", writeFile(t, dir, name+".yaml", fmt.Sprintf(`
role: cluster
data_dir: %s/%s
server:
  listen: %s
  admin_tokens: [%s]
  join_tokens: [%s]
cluster:
  name: %s
  default_rules: false # the rules this test applies, and no others
  root_url: %s
  root_token: %s
%s`, dir, name, addr, adminToken, joinToken, name, rootURL, cred, lightCluster)))
	}
	op := func(args ...string) (string, error) {
		return cli(t, rootURL, append([]string{"--token", adminToken}, args...)...)
	}
	testutil.Eventually(t, 30*time.Second, "both clusters to register", func() error {
		out, err := op("clusters", "ls")
		if err != nil || strings.Count(out, "yes") != 2 {
			return fmt.Errorf("clusters ls: %s %v", out, err)
		}
		return nil
	})

	// A check for c1 and an invalid one for c2, sent past the CLI's own
	// checks: root refuses the whole apply, c1 stores nothing.
	cl, err := client.New(client.Options{URL: rootURL, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	good := &unyov1.Check{Name: "root-good", Cluster: "c1", Spec: &unyov1.CheckSpec{Command: []string{"true"}, Interval: "1m"}}
	bad := &unyov1.Check{Name: "root-bad", Cluster: "c2", Spec: &unyov1.CheckSpec{Interval: "1m"}}
	_, err = cl.Objects.Apply(t.Context(), connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{
		{Kind: &unyov1.Object_Check{Check: good}}, {Kind: &unyov1.Object_Check{Check: bad}},
	}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "objects[1]") {
		t.Errorf("apply with a bad object for c2: %v; want invalid_argument naming objects[1]", err)
	}
	if n, err := countChecks(t.Context(), cl, "root-"); err != nil || n != 0 {
		t.Errorf("%d checks stored from an apply root refused (%v); want none", n, err)
	}

	// c2 is down: c1 keeps its part, the command names c2 and fails.
	clusters["c2"].kill()
	file := writeFile(t, dir, "both.yaml", "kind: Check\nname: everywhere\nspec: {command: [\"true\"], interval: 1m}\n")
	out, err := op("apply", "-f", file)
	if err == nil || !strings.Contains(err.Error(), "cluster c2 did not answer") || !strings.Contains(err.Error(), "1 cluster(s) did not confirm their part") {
		t.Errorf("apply with c2 down: %v; want it to fail naming c2", err)
	}
	if !strings.Contains(out, "Check/everywhere (c1) created") {
		t.Errorf("apply with c2 down printed %q; want c1's part created", out)
	}
}
