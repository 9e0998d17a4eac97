package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/heal"
	"github.com/unyo-ops/unyo/provision/service"
)

// The phase and reasons self-healing writes.
const (
	PhaseUpdating   = "Updating"
	ReasonNodeDown  = "NodeDown"
	PartitionCheck  = "partition-guard"
	healInterval    = time.Second
	partitionWindow = service.DefaultReplaceAfter
)

// healer is self-healing, on the lease holder (provision/heal decides):
//
//   - a replica whose node is Down shows reason NodeDown and, once the
//     node has been silent for the replica's replace_after, is released
//     (reservation and assignment) and placed again elsewhere by the node
//     stage; the agent of a node that comes back no longer has the
//     assignment and removes its stale instance as a stray;
//   - while more than half of the nodes went Down within one window
//     (partitionWindow), nothing is replaced, and an event says so;
//   - a replica its provider failed is re-created after a backoff kept in
//     its status (so it survives restarts), and after
//     heal.MaxFailuresPerNode failures on one node placed on another;
//   - a load balancer is judged as a replica is, with lbReplaceAfter, and
//     placed on another node (loadbalancers.go).
type healer struct {
	c *Cluster
	// suspected is the guard's last verdict, so that its event is raised
	// on changes only; nil before the first pass.
	suspected *bool
	// downSeen is when each Down node was first seen Down.
	downSeen map[string]time.Time
}

func newHealer(c *Cluster) *healer { return &healer{c: c} }

func (h *healer) Run(ctx context.Context) { every(ctx, healInterval, h.pass) }

func (h *healer) pass(ctx context.Context) {
	if err := h.heal(ctx); err != nil && ctx.Err() == nil {
		h.c.log.Warn("self-healing failed; will retry", "err", err)
	}
}

// liveness is the nodes as provision/heal sees them, by name. A node is
// Down since this healer first saw it Down: the cluster keeps no time of
// the change, and counting from the last heartbeat would replace replicas
// the moment a node turns Down (down_after is longer than most
// replace_after). A new lease holder starts counting afresh, which only
// ever delays a replacement.
func (h *healer) liveness(nodes []*unyov1.Node, now time.Time) ([]heal.Node, map[string]heal.Node) {
	list := make([]heal.Node, 0, len(nodes))
	byName := make(map[string]heal.Node, len(nodes))
	seen := make(map[string]time.Time, len(h.downSeen))
	for _, n := range nodes {
		hn := heal.Node{Name: n.GetName(), Down: n.GetState() == unyov1.NodeState_NODE_STATE_DOWN}
		if hn.Down {
			since, ok := h.downSeen[hn.Name]
			if !ok {
				since = now
			}
			seen[hn.Name], hn.DownSince = since, since
		}
		list = append(list, hn)
		byName[hn.Name] = hn
	}
	h.downSeen = seen
	return list, byName
}

func (h *healer) heal(ctx context.Context) error {
	computes, err := h.c.store.ListComputes(ctx)
	if err != nil {
		return err
	}
	lbs, err := h.c.store.ListLoadbalancers(ctx)
	if err != nil || len(computes)+len(lbs) == 0 {
		return err
	}
	nodes, err := h.c.store.ListNodes(ctx)
	if err != nil {
		return err
	}
	now := h.c.now()
	list, byName := h.liveness(nodes, now)
	p := heal.Guard(list, partitionWindow)
	h.guardChanged(ctx, p)
	changed := false
	latest := map[[2]string]*unyov1.Event{}
	for _, c := range computes {
		did, err := h.one(ctx, c, byName, p, now)
		if err == nil && !did {
			// Its update checks, for root's rolling update (updatechecks.go).
			did, err = h.judgeChecks(ctx, c, latest)
		}
		if err != nil {
			return err
		}
		changed = changed || did
	}
	for _, l := range lbs {
		did, err := h.oneLoadbalancer(ctx, l, nodes, byName, p, now)
		if err != nil {
			return err
		}
		changed = changed || did
	}
	if changed {
		h.c.kickPlacement()
		h.c.assignments.notify()
	}
	return nil
}

// one applies self-healing to one compute and reports whether it changed
// anything.
func (h *healer) one(ctx context.Context, c *unyov1.Compute, nodes map[string]heal.Node, p heal.Partition, now time.Time) (bool, error) {
	st := c.GetStatus()
	switch st.GetPhase() {
	case "", PhaseInitializing, PhaseBlocked:
		return false, nil // holds no node
	}
	if st.GetReplacingNode() != "" || replaceView(c).InFlight() {
		return false, nil // a drain or surge update is replacing it already
	}
	n, ok := nodes[st.GetNode()]
	if !ok {
		return false, nil
	}
	replaceAfter, err := service.ReplaceAfter(c.GetSpec().GetReplaceAfter())
	if err != nil {
		replaceAfter = service.DefaultReplaceAfter
	}
	verdict := heal.Judge(n, replaceAfter, p, now)
	switch {
	case verdict == heal.Replace:
		return h.replace(ctx, c, n, replaceAfter, now)
	case verdict == heal.Waiting && st.GetPhase() != PhaseDeleting:
		return h.setReason(ctx, c, ReasonNodeDown, heal.WaitingMessage(n, replaceAfter, p), now)
	case verdict == heal.Keep && st.GetReason() == ReasonNodeDown:
		return h.setReason(ctx, c, "", "", now)
	case verdict == heal.Keep && st.GetPhase() == PhaseFailed && st.GetReason() == ReasonProviderError && st.GetRetry() != nil:
		return h.retry(ctx, c, now)
	}
	return false, nil
}

// oneLoadbalancer moves a placed load balancer whose node is Down for
// lbReplaceAfter (and no partition is suspected) to another node.
func (h *healer) oneLoadbalancer(ctx context.Context, l *unyov1.Loadbalancer, nodes []*unyov1.Node, byName map[string]heal.Node, p heal.Partition, now time.Time) (bool, error) {
	st := l.GetStatus()
	switch st.GetPhase() {
	case "", PhaseInitializing, PhaseBlocked, PhaseFailed, PhaseDeleting:
		return false, nil // the load balancer stage's
	}
	n, ok := byName[st.GetNode()]
	if !ok || heal.Judge(n, lbReplaceAfter, p, now) != heal.Replace {
		return false, nil
	}
	h.c.log.Info("a load balancer's node is Down; moving it", "loadbalancer", l.GetName(), "node", n.Name, "down_since", n.DownSince)
	return h.c.placeLoadbalancer(ctx, l, nodes, n.Name, now)
}

// replace releases a replica on a node Down for its replace_after, for the
// node stage to place it elsewhere; a replica root is deleting is simply
// dropped (its node's agent removes the instance if it comes back).
func (h *healer) replace(ctx context.Context, c *unyov1.Compute, n heal.Node, replaceAfter time.Duration, now time.Time) (bool, error) {
	if c.GetStatus().GetPhase() == PhaseDeleting {
		h.c.log.Info("a compute being deleted sat on a Down node; dropped", "compute", c.GetName(), "node", n.Name)
		return true, h.c.store.DropCompute(ctx, c.GetName())
	}
	msg := fmt.Sprintf("node %s was Down for %s (replace_after %s); being placed elsewhere",
		n.Name, now.Sub(n.DownSince).Round(time.Second), replaceAfter)
	st := releasedStatus(c.GetStatus(), now)
	st.Reason, st.Message = ReasonNodeDown, msg
	released, err := h.c.store.ReleaseCompute(ctx, c.GetName(), n.Name, false, st)
	if err != nil || !released {
		return false, err
	}
	h.c.log.Info("compute released from its Down node for replacement", "compute", c.GetName(), "node", n.Name, "down_since", n.DownSince)
	h.c.raiseCompute(ctx, c, unyov1.CheckStatus_CHECK_STATUS_WARNING, fmt.Sprintf("NodeDown - compute %s: %s", c.GetName(), msg))
	return true, nil
}

// retry re-creates a replica its provider failed once its backoff passed:
// the failed instance is removed (Updating), and when the agent reports it
// gone the node stage places the replica again, on the same node or,
// after MaxFailuresPerNode failures there, on another.
func (h *healer) retry(ctx context.Context, c *unyov1.Compute, now time.Time) (bool, error) {
	r := retryOf(c.GetStatus().GetRetry())
	action := heal.NextAttempt(r, now)
	if action == heal.Wait {
		return false, nil
	}
	st := proto.CloneOf(c.GetStatus())
	st.Phase, st.UpdatedAt = PhaseUpdating, timestamppb.New(now)
	st.Message = fmt.Sprintf("%s after failure %d on node %s: %s", action, r.Failures, r.Node, c.GetStatus().GetMessage())
	switch err := h.c.store.RecreateCompute(ctx, c.GetName(), c.GetStatus(), st); {
	case errors.Is(err, store.ErrStatusChanged):
		return false, nil // an agent reported meanwhile: judged again next pass
	case err != nil:
		return false, err
	}
	h.c.log.Info("re-creating a compute its provider failed", "compute", c.GetName(), "node", r.Node, "failures", r.Failures, "action", action.String())
	return true, nil
}

// setReason shows (or clears) why a placed replica waits.
func (h *healer) setReason(ctx context.Context, c *unyov1.Compute, reason, msg string, now time.Time) (bool, error) {
	st := c.GetStatus()
	if st.GetReason() == reason && st.GetMessage() == msg {
		return false, nil
	}
	next := proto.CloneOf(st)
	next.Reason, next.Message, next.UpdatedAt = reason, msg, timestamppb.New(now)
	return h.swapStatus(ctx, c, next)
}

// swapStatus writes a compute's status if it is still the one the healer
// read (the agent's reports and the node stage write it too); one that
// changed meanwhile is left for the next pass to judge again.
func (h *healer) swapStatus(ctx context.Context, c *unyov1.Compute, next *unyov1.ComputeStatus) (bool, error) {
	switch err := h.c.store.SwapComputeStatus(ctx, c.GetName(), c.GetStatus(), next); {
	case errors.Is(err, store.ErrStatusChanged):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// guardChanged raises the partition guard's event when its verdict
// changes (and on the first pass when it is suspected).
func (h *healer) guardChanged(ctx context.Context, p heal.Partition) {
	if h.suspected != nil && *h.suspected == p.Suspected {
		return
	}
	first := h.suspected == nil
	h.suspected = &p.Suspected
	if first && !p.Suspected {
		return
	}
	status := unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	out := "CRITICAL - " + p.String()
	if !p.Suspected {
		status, out = unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("OK - partition cleared (%d/%d nodes Down); replacement resumes", p.Down, p.Total)
	}
	h.c.log.Warn("partition guard", "suspected", p.Suspected, "down", p.Down, "total", p.Total)
	err := h.c.raise(ctx, ingest.Placement, ingest.Synthetic{Node: h.c.opts.Name, Check: PartitionCheck, Status: status, Output: out})
	if err != nil && ctx.Err() == nil {
		h.c.log.Warn("recording the partition guard's event failed", "err", err)
	}
}

// raiseCompute records a placement event of a compute through ingest.
func (c *Cluster) raiseCompute(ctx context.Context, comp *unyov1.Compute, status unyov1.CheckStatus, out string) {
	err := c.raise(ctx, ingest.Placement, ingest.Synthetic{
		Node: c.opts.Name, Check: ingest.PlacementCheck, Status: status, Output: out,
		Labels: map[string]string{"compute": comp.GetName(), "service": comp.GetService()},
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("recording a placement event failed", "compute", comp.GetName(), "err", err)
	}
}

// releasedStatus is a replica's status once its instance is released: back
// to the node stage (Initializing), remembering its node in retry (kept
// off it after too many failures, else preferred).
func releasedStatus(cur *unyov1.ComputeStatus, now time.Time) *unyov1.ComputeStatus {
	r := proto.CloneOf(cur.GetRetry())
	if r == nil || r.GetNode() != cur.GetNode() {
		r = &unyov1.ComputeRetry{Node: cur.GetNode()}
	}
	return &unyov1.ComputeStatus{Phase: PhaseInitializing, Reason: cur.GetReason(), Message: cur.GetMessage(),
		Address: cur.GetAddress(), SpecRevision: cur.GetSpecRevision(), Retry: r, UpdatedAt: timestamppb.New(now)}
}

func retryOf(r *unyov1.ComputeRetry) heal.Retry {
	out := heal.Retry{Node: r.GetNode(), Failures: int(r.GetFailures())}
	if r.GetNextAt() != nil {
		out.NextAt = r.GetNextAt().AsTime()
	}
	return out
}

func retryProto(r heal.Retry) *unyov1.ComputeRetry {
	return &unyov1.ComputeRetry{Node: r.Node, Failures: int32(r.Failures), NextAt: timestamppb.New(r.NextAt)}
}
