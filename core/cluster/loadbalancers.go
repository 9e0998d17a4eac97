package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// The cluster's half of a load balancer (provisioning, part 4): root hands
// it in SyncComputes beside the computes; the load-balancer stage, on the
// lease holder, places it on one node offering its provider (the node
// stage's scheduler with a zero shape: a load balancer reserves nothing),
// and the store hands that node's agent its Assignment, rewritten at a new
// generation whenever its backends, ports or health change, so that the
// agent updates it in place. The agent's reports make it Active and carry
// its backends' health and traffic into its status.
//
// Self-healing: a load balancer whose node is Down for lbReplaceAfter is
// placed on another node by the healer, judged as a replica is (heal.go;
// it is stateless: the new node's provider builds its tables from the
// assignment); one Failed is placed again after lbRetryAfter, on any node
// offering the provider.

// lbReplaceAfter is how long a load balancer's node may be Down before the
// load balancer moves: much shorter than a replica's default replace_after,
// as traffic to the VIP stops while its node is Down and moving it loses
// nothing.
const lbReplaceAfter = 30 * time.Second

// lbRetryAfter is how long a Failed load balancer waits before it is
// placed again.
const lbRetryAfter = 10 * time.Second

// maxLoadbalancersPerSync bounds one SyncComputes request's load balancers.
const maxLoadbalancersPerSync = 10000

// syncLoadbalancers takes the full set of load balancers root wants on
// this cluster and returns every one held.
func (s *provisionService) syncLoadbalancers(ctx context.Context, ls []*unyov1.Loadbalancer) ([]*unyov1.Loadbalancer, error) {
	if len(ls) > maxLoadbalancersPerSync {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("loadbalancers: %d in one sync, at most %d", len(ls), maxLoadbalancersPerSync))
	}
	seen := map[string]bool{}
	for i, l := range ls {
		if err := s.validLoadbalancer(fmt.Sprintf("loadbalancers[%d]", i), l); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if seen[l.GetName()] {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("loadbalancers[%d]: %s is listed twice", i, l.GetName()))
		}
		seen[l.GetName()] = true
	}
	held, err := s.c.store.SyncLoadbalancers(ctx, ls, time.Now())
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return held, nil
}

func (s *provisionService) validLoadbalancer(field string, l *unyov1.Loadbalancer) error {
	if err := validate.Name(l.GetName()); err != nil {
		return fmt.Errorf("%s.name: %w", field, err)
	}
	if err := validate.Name(l.GetService()); err != nil {
		return fmt.Errorf("%s.service: %w", field, err)
	}
	if l.GetCluster() != s.c.opts.Name {
		return fmt.Errorf("%s: load balancer %s is for cluster %q, this is %q", field, l.GetName(), l.GetCluster(), s.c.opts.Name)
	}
	if l.GetSpec().GetProvider() == "" {
		return fmt.Errorf("%s.spec.provider: load balancer %s names no provider", field, l.GetName())
	}
	if a, err := netip.ParseAddr(l.GetVip()); err != nil || !a.Is4() {
		return fmt.Errorf("%s.vip: %q is not an IPv4 address", field, l.GetVip())
	}
	return nil
}

// lbStage places the cluster's load balancers on nodes (the healer moves
// those whose node is Down).
type lbStage struct {
	c    *Cluster
	poll time.Duration
}

func newLBStage(c *Cluster) *lbStage {
	return &lbStage{c: c, poll: time.Second}
}

func (s *lbStage) Run(ctx context.Context) {
	every(ctx, s.poll, func(ctx context.Context) {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			s.c.log.Warn("placing load balancers failed; will retry", "err", err)
		}
	})
}

func (s *lbStage) pass(ctx context.Context) error {
	ls, err := s.c.store.ListLoadbalancers(ctx)
	if err != nil || len(ls) == 0 {
		return err
	}
	nodes, err := s.c.store.ListNodes(ctx)
	if err != nil {
		return err
	}
	now := s.c.now()
	byName := map[string]*unyov1.Node{}
	for _, n := range nodes {
		byName[n.GetName()] = n
	}
	changed := false
	for _, l := range ls {
		did, err := s.one(ctx, l, nodes, byName, now)
		if err != nil {
			return err
		}
		changed = changed || did
	}
	if changed {
		s.c.assignments.notify()
	}
	return nil
}

// one acts on one load balancer; it reports whether an assignment changed.
func (s *lbStage) one(ctx context.Context, l *unyov1.Loadbalancer, nodes []*unyov1.Node, byName map[string]*unyov1.Node, now time.Time) (bool, error) {
	st := l.GetStatus()
	node := st.GetNode()
	switch st.GetPhase() {
	case PhaseDeleting:
		if node == "" || byName[node] == nil {
			// Never placed, or its node is gone: nothing holds it.
			s.c.log.Info("load balancer deleted", "loadbalancer", l.GetName(), "node", node)
			return true, s.c.store.DropLoadbalancer(ctx, l.GetName())
		}
		return false, nil
	case PhaseInitializing, "", PhaseBlocked:
		return s.c.placeLoadbalancer(ctx, l, nodes, "", now)
	case PhaseFailed:
		if now.Sub(st.GetUpdatedAt().AsTime()) < lbRetryAfter {
			return false, nil
		}
		s.c.log.Info("a failed load balancer is placed again", "loadbalancer", l.GetName(), "node", node, "failure", st.GetMessage())
		return s.c.placeLoadbalancer(ctx, l, nodes, "", now)
	}
	if byName[node] == nil {
		s.c.log.Info("a load balancer's node is gone; placing it on another", "loadbalancer", l.GetName(), "node", node)
		return s.c.placeLoadbalancer(ctx, l, nodes, node, now)
	}
	return false, nil
}

// placeLoadbalancer puts l on a node offering its provider (never avoid),
// or Blocks it with the scheduler's reason.
func (c *Cluster) placeLoadbalancer(ctx context.Context, l *unyov1.Loadbalancer, nodes []*unyov1.Node, avoid string, now time.Time) (bool, error) {
	req := schedule.Request{Service: l.GetService(), Provider: l.GetSpec().GetProvider(), Policy: placement.Policy(l.GetSpec().GetSchedule()), Shapeless: true}
	sn := make([]schedule.Node, 0, len(nodes))
	for _, n := range nodes {
		x := placement.Node(n)
		if n.GetName() == avoid {
			x.Cordoned = true
		}
		sn = append(sn, x)
	}
	res := schedule.Place(sn, req, 1)
	if len(res.Placed) == 1 {
		node := res.Placed[0].Node
		ts := timestamppb.New(now)
		err := c.store.PlaceLoadbalancer(ctx, l.GetName(), node, &unyov1.LoadbalancerStatus{Phase: PhaseScheduled, Node: node, ScheduledAt: ts, UpdatedAt: ts})
		switch {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrDeleting):
			return false, nil // root dropped it meanwhile
		case err != nil:
			return false, err
		}
		c.log.Info("load balancer placed", "loadbalancer", l.GetName(), "node", node, "provider", req.Provider)
		return true, nil
	}
	st := lbUnplacedStatus(res.Reason, now)
	if sameLBStatus(st, l.GetStatus()) {
		return false, nil
	}
	c.log.Info("load balancer not placed", "loadbalancer", l.GetName(), "reason", st.GetMessage())
	if err := c.store.SetLoadbalancerStatus(ctx, l.GetName(), st); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return false, nil
}

// lbUnplacedStatus is a load balancer's status when no node took it:
// Blocked with the node stage's reason (a node offering the provider may
// join), with its per-rule node counts.
func lbUnplacedStatus(r *schedule.Reason, now time.Time) *unyov1.LoadbalancerStatus {
	cs := unplacedStatus(nil, r, now)
	return &unyov1.LoadbalancerStatus{Phase: PhaseBlocked, Reason: ReasonNoCapacity, Message: cs.GetMessage(), Reasons: cs.GetReasons(), UpdatedAt: cs.GetUpdatedAt()}
}

func sameLBStatus(a, b *unyov1.LoadbalancerStatus) bool {
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	a.UpdatedAt, b.UpdatedAt = nil, nil
	return proto.Equal(a, b)
}

// reportLoadbalancer applies node's report st of load balancer l: running
// makes it Active with the provider's view of its backends and traffic,
// failed makes it Failed (ProviderError), deleted ends one being deleted.
// Reports of a node it is not on (its old node after a move) are ignored.
func (s *provisionService) reportLoadbalancer(ctx context.Context, node string, l *unyov1.Loadbalancer, st *unyov1.AssignmentState) (bool, error) {
	cur := l.GetStatus()
	if node != cur.GetNode() {
		return false, nil
	}
	now := s.c.now()
	if cur.GetPhase() == PhaseDeleting {
		if st.GetState() != StateDeleted {
			return false, nil
		}
		s.c.log.Info("load balancer deleted", "loadbalancer", l.GetName(), "node", node)
		return true, s.c.store.DropLoadbalancer(ctx, l.GetName())
	}
	next := proto.CloneOf(cur)
	if st.GetHandle() != "" {
		next.Handle = st.GetHandle()
	}
	switch st.GetState() {
	case StateRunning:
		if next.GetPhase() != PhaseActive {
			next.ActiveAt = timestamppb.New(now)
		}
		next.Phase, next.Reason, next.Message, next.Reasons = PhaseActive, "", "", nil
		next.Backends, next.Packets, next.Bytes = st.GetBackends(), st.GetPackets(), st.GetBytes()
	case StateFailed:
		next.Phase, next.Reason, next.Message, next.Reasons = PhaseFailed, ReasonProviderError, st.GetMessage(), nil
	default:
		return false, nil
	}
	if sameLBStatus(next, cur) {
		return false, nil
	}
	next.UpdatedAt = timestamppb.New(now)
	if err := s.c.store.SetLoadbalancerStatus(ctx, l.GetName(), next); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	// Only a phase change wakes the agents; traffic counters do not.
	return next.GetPhase() != cur.GetPhase(), nil
}

// reportLoadbalancerNamed applies a report of the load balancer st names;
// one that does not exist (gone meanwhile) is ignored.
func (s *provisionService) reportLoadbalancerNamed(ctx context.Context, node string, st *unyov1.AssignmentState) (bool, error) {
	l, err := s.c.store.GetLoadbalancer(ctx, st.GetCompute())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.reportLoadbalancer(ctx, node, l, st)
}
