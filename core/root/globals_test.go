package root

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestObjectsForEveryClusterReachLaterClusters: a rule and a check applied
// without a cluster before any cluster exists are kept by root and reach a
// cluster that registers later, marked as root's; a cluster's own object of
// the same name is left alone; a global delete the cluster missed is
// caught up on; and a global delete removes root's copy.
func TestObjectsForEveryClusterReachLaterClusters(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := New(openStore(t, "root.db"), Options{Logger: log, SyncInterval: 200 * time.Millisecond})
	rc := serve(t, log, r.Register, r.Run)
	ctx := context.Background()

	rule := &unyov1.EventRule{Name: "page", Spec: &unyov1.EventRuleSpec{Type: "action", Owner: "ops", Reason: "page on critical", Match: &unyov1.EventMatch{Levels: []string{"critical"}},
		Actions: []*unyov1.Action{{Kind: &unyov1.Action_CreateAlert{CreateAlert: &unyov1.CreateAlertAction{}}}}}}
	disk := &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{Command: []string{"check_disk"}, Interval: "1m"}}
	resp, err := rc.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(rule), kinds.Wrap(disk)}}))
	if err != nil {
		t.Fatalf("apply without any cluster: %v; want root to keep the objects for clusters to come", err)
	}
	if got := fmt.Sprint(results(resp.Msg.GetResults())); got != "[EventRule/page () created Check/disk () created]" {
		t.Errorf("apply results = %s", got)
	}

	cl := cluster.New(openStore(t, "cluster.db"), cluster.Options{Name: "c1", Replica: "r1", Logger: log})
	cc := serve(t, log, cl.Register, cl.Run)
	register := func() {
		t.Helper()
		if _, err := rc.Cluster.RegisterCluster(ctx, connect.NewRequest(&unyov1.RegisterClusterRequest{Name: "c1", Url: cc.URL})); err != nil {
			t.Fatal(err)
		}
	}
	register()
	origins := func(c *client.Clients, kind string) map[string]string {
		t.Helper()
		out, err := c.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: kind}))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, o := range out.Msg.GetObjects() {
			m[kinds.Name(o)] = kinds.Origin(o)
		}
		return m
	}
	testutil.Eventually(t, 10*time.Second, "the later cluster has root's rule and check", func() error {
		if got := fmt.Sprint(origins(cc, "EventRule"), origins(cc, "Check")); got != "map[page:root] map[disk:root]" {
			return fmt.Errorf("cluster c1 holds %s", got)
		}
		return nil
	})

	// Changed at root while the cluster was away: the cluster's copy follows.
	changed := &unyov1.EventRule{Name: "page", Origin: kinds.OriginRoot, Spec: proto.Clone(rule.GetSpec()).(*unyov1.EventRuleSpec)}
	changed.Spec.Priority = 70
	if _, err := r.store.PutObjects(ctx, []*unyov1.Object{kinds.Wrap(changed)}); err != nil {
		t.Fatal(err)
	}
	register()
	testutil.Eventually(t, 10*time.Second, "the cluster's copy to follow root's change", func() error {
		got, err := cc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "EventRule", Name: "page"}}))
		if err != nil {
			return err
		}
		if p := got.Msg.GetObjects()[0].GetEventRule().GetSpec().GetPriority(); p != 70 {
			return fmt.Errorf("priority %d", p)
		}
		return nil
	})

	// The cluster's own check of that name overrides root's there.
	own := &unyov1.Check{Name: "disk", Cluster: "c1", Spec: &unyov1.CheckSpec{Command: []string{"check_disk", "-w", "5%"}, Interval: "5m"}}
	if _, err := rc.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(own)}})); err != nil {
		t.Fatal(err)
	}
	// Root forgets the rule as if deleted while the cluster was away.
	if err := r.store.DeleteObject(ctx, "EventRule", "page"); err != nil {
		t.Fatal(err)
	}
	register()
	testutil.Eventually(t, 10*time.Second, "the cluster drops the rule root no longer has", func() error {
		if got := origins(cc, "EventRule"); len(got) != 0 {
			return fmt.Errorf("cluster c1 still holds %v", got)
		}
		return nil
	})
	got, err := cc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Check", Name: "disk"}}))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Msg.GetObjects()[0].GetCheck(); c.GetSpec().GetInterval() != "5m" || c.GetOrigin() != "" {
		t.Errorf("the cluster's own check = %v; want it kept, origin empty", c)
	}

	// A global delete removes root's copy too: no cluster gets it again.
	del, err := rc.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Check", Name: "disk"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(results(del.Msg.GetResults())); got != "[Check/disk () deleted Check/disk (c1) deleted]" {
		t.Errorf("delete results = %s", got)
	}
	if objs, err := r.store.ListObjects(ctx, "Check"); err != nil || len(objs) != 0 {
		t.Errorf("root's checks after the delete = %v, %v", objs, err)
	}
}
