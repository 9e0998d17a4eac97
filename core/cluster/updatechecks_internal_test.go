package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/service"
)

// TestUpdateChecksJudged: an Active replica whose spec names update checks
// carries their state for root's rollout: pending until a result started
// after it became Active, failing with the check's words, passing when all
// are OK; a new instance is judged afresh.
func TestUpdateChecksJudged(t *testing.T) {
	e := newHealEnv(t, "n1")
	r := healReplica("web-0", "")
	r.Spec.Update = &unyov1.UpdateStrategy{Checks: []string{"http"}}
	e.sync(r)
	e.step()
	node := e.compute("web-0").GetStatus().GetNode()
	seq := 0
	result := func(status unyov1.CheckStatus, out string, at time.Time) {
		t.Helper()
		seq++
		if _, err := e.c.store.AppendEvents(t.Context(), []*unyov1.Event{{Id: fmt.Sprintf("ev-%d", seq), Cluster: "c1", Node: node, Check: "http",
			Status: status, Output: out, StartedAt: timestamppb.New(at), ReceivedAt: timestamppb.New(at)}}); err != nil {
			t.Fatal(err)
		}
	}
	checks := func() *unyov1.ComputeChecks { return e.compute("web-0").GetStatus().GetChecks() }
	// A result from before the replica ran says nothing of it.
	result(unyov1.CheckStatus_CHECK_STATUS_OK, "OK", e.clock().Add(-time.Second))
	e.report(node, &unyov1.AssignmentState{Compute: "web-0", State: "running"})
	e.step()
	if c := checks(); c.GetState() != service.ChecksPending || !strings.Contains(c.GetMessage(), "http on node "+node) {
		t.Fatalf("checks before a result: %v", c)
	}
	e.advance(time.Second)
	result(unyov1.CheckStatus_CHECK_STATUS_CRITICAL, "HTTP CRITICAL - 503", e.clock())
	e.step()
	if c := checks(); c.GetState() != service.ChecksFailing || !strings.Contains(c.GetMessage(), "is CRITICAL: HTTP CRITICAL - 503") {
		t.Fatalf("checks after a failure: %v", c)
	}
	e.advance(time.Second)
	result(unyov1.CheckStatus_CHECK_STATUS_OK, "HTTP OK", e.clock())
	e.step()
	if c := checks(); c.GetState() != service.ChecksPassing {
		t.Fatalf("checks after OK: %v", c)
	}
	// The agent reports it failed, then running again: a new instance,
	// judged afresh (the old OK started before it).
	e.report(node, &unyov1.AssignmentState{Compute: "web-0", State: "failed", Message: "boom"})
	e.advance(time.Second)
	e.report(node, &unyov1.AssignmentState{Compute: "web-0", State: "running"})
	if c := checks(); c != nil {
		t.Errorf("a new instance kept the old instance's checks: %v", c)
	}
	e.step()
	if c := checks(); c.GetState() != service.ChecksPending {
		t.Errorf("checks of the new instance: %v", c)
	}
}
