package root

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

// TestAddingAKindIsOneRegistration registers a kind that only this test
// has: Maintenance owned by root instead of the clusters, with a
// validation of its own. With nothing else added, root validates, stores,
// gets, lists and deletes it in its own store, while the Check in the same
// apply still goes to the cluster.
func TestAddingAKindIsOneRegistration(t *testing.T) {
	std := builtin.Kinds()
	check, _ := std.Lookup("Check")
	window := kinds.Define(kinds.Spec[*unyov1.Maintenance]{
		Noun: "windows", Help: "Maintenance windows kept by root", Aliases: []string{"window"},
		Owner: kinds.RootTier,
		Validate: func(m *unyov1.Maintenance, _ time.Time) error {
			if m.GetSpec().GetReason() == "" {
				return errors.New("spec.reason: a window needs a reason")
			}
			return nil
		},
		Prepare: func(m *unyov1.Maintenance) { m.Spec.Owner = "root" },
		Count:   "silenced",
	})
	reg, err := kinds.New(check, window)
	if err != nil {
		t.Fatal(err)
	}
	rc := startRoot(t, Options{Kinds: reg})
	ctx := context.Background()
	patch := &unyov1.Maintenance{Name: "patch", Spec: &unyov1.MaintenanceSpec{Reason: "kernel"}}
	disk := &unyov1.Check{Name: "disk", Spec: &unyov1.CheckSpec{Command: []string{"check_disk"}, Interval: "1m"}}

	_, err = rc.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{
		kinds.Wrap(&unyov1.Maintenance{Name: "bad", Spec: &unyov1.MaintenanceSpec{}}),
	}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !contains(err, "a window needs a reason") {
		t.Fatalf("apply of an invalid window: %v, want the registration's validation error", err)
	}

	resp, err := rc.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(patch), kinds.Wrap(disk)}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(results(resp.Msg.GetResults())); got != "[Maintenance/patch () created Check/disk () created Check/disk (c1) created]" {
		t.Errorf("apply results = %s", got)
	}

	got, err := rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "window", Name: "patch"}}))
	if err != nil {
		t.Fatal(err)
	}
	m := got.Msg.GetObjects()[0].GetMaintenance()
	if m.GetSpec().GetReason() != "kernel" || m.GetSpec().GetOwner() != "root" || m.GetCreatedAt() == nil || m.GetCluster() != "" {
		t.Errorf("root's window = %v; want its spec, the owner Prepare set, a creation time and no cluster", m)
	}
	list, err := rc.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "windows"}))
	if err != nil || len(list.Msg.GetObjects()) != 1 || len(list.Msg.GetClusterErrors()) != 0 {
		t.Fatalf("list windows = %v, %v", list, err)
	}
	checks, err := rc.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "checks"}))
	if err != nil || len(checks.Msg.GetObjects()) != 1 || !proto.Equal(checks.Msg.GetObjects()[0].GetCheck().GetSpec(), disk.GetSpec()) {
		t.Fatalf("the cluster's checks = %v, %v", checks, err)
	}

	for _, want := range []string{"deleted", "not found"} {
		del, err := rc.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Maintenance", Name: "patch"}}}))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(results(del.Msg.GetResults())); got != "[Maintenance/patch () "+want+"]" {
			t.Errorf("delete results = %s, want %s", got, want)
		}
	}
	_, err = rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "window", Name: "patch"}}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("get of a deleted window: %v, want NotFound", err)
	}
	_, err = rc.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "rules"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !contains(err, "known kinds: Check, Maintenance") {
		t.Errorf("list of a kind this root lacks: %v, want the known kinds", err)
	}
}

func results(rs []*unyov1.ApplyResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s/%s (%s) %s", r.GetRef().GetKind(), r.GetRef().GetName(), r.GetRef().GetCluster(), r.GetAction())
	}
	return out
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
