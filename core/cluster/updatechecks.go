package cluster

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

// judgeChecks records the state of an Active replica's update checks
// (spec.update.checks, judged by service.JudgeChecks from the latest
// result of each on the replica's node) in its status, for root's rolling
// update to wait on, and reports whether it changed the status. Results
// are read per node and check, once per pass (latest caches them).
func (h *healer) judgeChecks(ctx context.Context, c *unyov1.Compute, latest map[[2]string]*unyov1.Event) (bool, error) {
	names := c.GetSpec().GetUpdate().GetChecks()
	st := c.GetStatus()
	if len(names) == 0 || st.GetPhase() != PhaseActive || st.GetNode() == "" {
		return false, nil
	}
	node := st.GetNode()
	byName := map[string]*unyov1.Event{}
	for _, name := range names {
		key := [2]string{node, name}
		e, ok := latest[key]
		if !ok {
			es, err := h.c.store.ListEvents(ctx, store.EventFilter{Node: node, Check: name, Limit: 1})
			if err != nil {
				return false, fmt.Errorf("read the latest result of check %s on node %s: %w", name, node, err)
			}
			if len(es) > 0 {
				e = es[0]
			}
			latest[key] = e
		}
		if e != nil {
			byName[name] = e
		}
	}
	state, msg := service.JudgeChecks(names, node, st.GetActiveAt().AsTime(), byName)
	if st.GetChecks().GetState() == state && st.GetChecks().GetMessage() == msg {
		return false, nil
	}
	next := proto.CloneOf(st)
	now := timestamppb.New(h.c.now())
	next.Checks, next.UpdatedAt = &unyov1.ComputeChecks{State: state, Message: msg, UpdatedAt: now}, now
	return h.swapStatus(ctx, c, next)
}
