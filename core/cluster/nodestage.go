package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/heal"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
)

// nodeStage is the cluster's half of scheduling, on the lease holder: it
// places the computes root synced here on nodes (provision/schedule),
// commits the placements with store.ReserveComputes (a batch per
// transaction, each re-checked), hands the agent its
// Assignment, and removes what root no longer wants. A compute that found
// no node is Blocked (NoCapacity) and placed again as soon as the nodes'
// capacity key moves (a node registers or comes back, is uncordoned, a
// reservation is released), or Failed (Unsatisfiable) at once.
type nodeStage struct {
	c *Cluster
	// blockedAt is the capacity key Blocked computes were last tried at.
	blockedAt uint64
	// poll is how often the stage rereads the nodes to see whether their
	// capacity key moved; a kick runs it at once.
	poll time.Duration
}

func newNodeStage(c *Cluster) *nodeStage { return &nodeStage{c: c, poll: time.Second} }

func (s *nodeStage) Run(ctx context.Context) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			s.c.log.Warn("the node stage failed; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.c.placeKick:
		case <-t.C:
		}
	}
}

// maxConflictRounds bounds how often one pass rebuilds its snapshot after
// a commit found its node moved (another writer placed there meanwhile).
const maxConflictRounds = 5

// pass does one round of placement and removal.
func (s *nodeStage) pass(ctx context.Context) error {
	for range maxConflictRounds {
		again, err := s.round(ctx)
		if err != nil {
			return err
		}
		if !again {
			break
		}
	}
	// Then replacements (drains, surge updates; replace.go), over what
	// this pass placed.
	return s.replacements(ctx)
}

// round returns true when a commit conflicted and the round should be run
// again over fresh nodes.
func (s *nodeStage) round(ctx context.Context) (bool, error) {
	computes, err := s.c.store.ListComputes(ctx)
	if err != nil {
		return false, err
	}
	if len(computes) == 0 {
		return false, nil
	}
	nodes, err := s.c.store.ListNodes(ctx)
	if err != nil {
		return false, err
	}
	key := capacityKey(nodes)
	retryBlocked := key != s.blockedAt
	byName := make(map[string]*unyov1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.GetName()] = n
	}
	var waiting []*unyov1.Compute
	changed := false
	for _, c := range computes {
		switch c.GetStatus().GetPhase() {
		case PhaseInitializing, "":
			waiting = append(waiting, c)
		case PhaseBlocked:
			if retryBlocked {
				waiting = append(waiting, c)
			}
		case PhaseDeleting:
			// Never placed, or its node is gone: nothing holds it.
			if node := c.GetStatus().GetNode(); node == "" || byName[node] == nil {
				if err := s.c.store.DropCompute(ctx, c.GetName()); err != nil {
					return false, err
				}
				s.c.log.Info("compute deleted", "compute", c.GetName(), "node", node)
				changed = true
			}
		}
	}
	if changed {
		s.c.assignments.notify()
	}
	if len(waiting) == 0 {
		s.blockedAt = key
		return false, nil
	}
	reservations, err := s.c.store.ListReservations(ctx)
	if err != nil {
		return false, err
	}
	pl := newPlanner(nodes, reservations)
	var chosen []choice
	for _, group := range byService(waiting) {
		placed, err := s.place(ctx, pl, group)
		if err != nil {
			return false, err
		}
		chosen = append(chosen, placed...)
	}
	conflict, err := s.commit(ctx, pl, chosen)
	s.c.assignments.notify()
	if err != nil {
		return false, err
	}
	if !conflict {
		s.blockedAt = key
	}
	return conflict, nil
}

// choice is one compute's placement as planned, to be committed.
type choice struct {
	c     *unyov1.Compute
	place store.Placement
}

// commitBatch is how many placements one transaction commits: fewer
// commits (one fsync each) for many replicas, while a conflict throws
// away little.
const commitBatch = 64

// place plans one service's waiting computes: first, one by one, those
// self-healing or an update released from a node (kept off it after too
// many failures there, else preferring it), then the rest together. The
// ones a node was found for are counted in pl and returned to be
// committed; the others are Blocked or Failed now.
func (s *nodeStage) place(ctx context.Context, pl *planner, group []*unyov1.Compute) ([]choice, error) {
	var plain []*unyov1.Compute
	var chosen []choice
	for _, c := range group {
		if c.GetStatus().GetRetry().GetNode() == "" {
			plain = append(plain, c)
			continue
		}
		req := placement.Request(c, pl.existing(c.GetService()))
		got, err := s.plan(ctx, pl, []*unyov1.Compute{c}, req, pl.placeHinted(c, req))
		if err != nil {
			return nil, err
		}
		chosen = append(chosen, got...)
	}
	if len(plain) == 0 {
		return chosen, nil
	}
	req := placement.Request(plain[0], pl.existing(plain[0].GetService()))
	got, err := s.plan(ctx, pl, plain, req, schedule.NewSnapshot(pl.nodes).Place(req, len(plain)))
	return append(chosen, got...), err
}

// plan turns res's placements of group (in order) into choices, counted in
// pl, and records why the rest found no node.
func (s *nodeStage) plan(ctx context.Context, pl *planner, group []*unyov1.Compute, req schedule.Request, res schedule.Result) ([]choice, error) {
	now := s.c.now()
	out := make([]choice, 0, len(res.Placed))
	for i, ch := range res.Placed {
		c := group[i]
		out = append(out, choice{c: c, place: store.Placement{
			Reservation: store.Reservation{
				Compute: c.GetName(), Service: c.GetService(), Node: ch.Node,
				Resources: req.Shape, Generation: ch.Generation, Policy: req.Policy, ReservedAt: now,
			},
			Assignment: assignmentFor(c), Status: scheduledStatus(c.GetStatus(), c.GetAddress(), ch.Node, c.GetSpecRevision(), now),
		}})
		pl.count(ch.Node, c.GetService(), req.Shape)
	}
	if res.Unplaced == 0 {
		return out, nil
	}
	for _, c := range group[len(res.Placed):] {
		st := unplacedStatus(c.GetStatus(), res.Reason, now)
		if proto.Equal(withoutTime(st), withoutTime(c.GetStatus())) {
			continue
		}
		switch err := s.c.store.SetComputeStatus(ctx, c.GetName(), st); {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrExists):
			continue // gone, or another writer placed it meanwhile
		case err != nil:
			return nil, err
		}
		s.c.log.Info("compute not placed", "compute", c.GetName(), "phase", st.GetPhase(), "reason", st.GetMessage())
		status := unyov1.CheckStatus_CHECK_STATUS_WARNING
		if st.GetPhase() == PhaseFailed {
			status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
		}
		s.raise(ctx, c, status, fmt.Sprintf("%s %s - compute %s: %s", st.GetPhase(), st.GetReason(), c.GetName(), st.GetMessage()))
	}
	return out, nil
}

// commit commits the round's placements commitBatch at a time, each
// re-checked by the store; it stops at the first one refused (another
// writer changed its node, or placed it) and reports a conflict, and the
// next round places what is left over fresh nodes.
func (s *nodeStage) commit(ctx context.Context, pl *planner, chosen []choice) (conflict bool, err error) {
	for batch := range slices.Chunk(chosen, commitBatch) {
		ps := make([]store.Placement, len(batch))
		for i, ch := range batch {
			ps[i] = ch.place
			// A node an earlier batch of this round placed on moved.
			ps[i].Reservation.Generation = pl.generation(ch.place.Reservation.Node, ch.place.Reservation.Generation)
		}
		gens, err := s.c.store.ReserveComputes(ctx, ps)
		for i, gen := range gens {
			c, node := batch[i].c, batch[i].place.Reservation.Node
			pl.moved[node] = gen
			s.c.log.Info("compute placed", "compute", c.GetName(), "node", node)
			if c.GetStatus().GetPhase() == PhaseBlocked {
				s.raise(ctx, c, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("OK - compute %s placed on node %s", c.GetName(), node))
			}
		}
		var reason *schedule.Reason
		switch {
		case err == nil:
		case errors.Is(err, store.ErrGeneration), errors.As(err, &reason), errors.Is(err, store.ErrExists),
			errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrDeleting):
			// Another writer changed the node (or placed this compute)
			// since the nodes were read, or the compute or node went
			// away: read them again.
			s.c.log.Debug("placement conflicted; rereading the nodes", "compute", batch[len(gens)].c.GetName(), "err", err)
			return true, nil
		default:
			return false, err
		}
	}
	return false, nil
}

// raise records a placement event through the ingest path, so that rules
// can alert on a compute that cannot be placed.
func (s *nodeStage) raise(ctx context.Context, c *unyov1.Compute, status unyov1.CheckStatus, out string) {
	s.c.raiseCompute(ctx, c, status, out)
}

func withoutTime(st *unyov1.ComputeStatus) *unyov1.ComputeStatus {
	st = proto.CloneOf(st)
	if st != nil {
		st.UpdatedAt = nil
	}
	return st
}

// scheduledStatus is a compute's status once it has a node, running
// specRevision, with address (root's, else the one it had).
func scheduledStatus(cur *unyov1.ComputeStatus, address, node string, specRevision int64, now time.Time) *unyov1.ComputeStatus {
	ts := timestamppb.New(now)
	return &unyov1.ComputeStatus{Phase: PhaseScheduled, Node: node, ScheduledAt: ts, UpdatedAt: ts, Address: cmp.Or(address, cur.GetAddress()),
		SpecRevision: specRevision, Retry: cur.GetRetry()}
}

// unplacedStatus is a compute's status when no node took it: Blocked
// (NoCapacity) or Failed (Unsatisfiable), with the reason's words and its
// per-rule node counts.
func unplacedStatus(cur *unyov1.ComputeStatus, r *schedule.Reason, now time.Time) *unyov1.ComputeStatus {
	st := &unyov1.ComputeStatus{Phase: PhaseBlocked, Reason: ReasonNoCapacity, UpdatedAt: timestamppb.New(now), Address: cur.GetAddress(),
		SpecRevision: cur.GetSpecRevision(), Retry: cur.GetRetry()}
	if r == nil {
		st.Message = "no node fits"
		return st
	}
	if r.Class == schedule.Unsatisfiable {
		st.Phase, st.Reason = PhaseFailed, ReasonUnsatisfiable
	}
	st.Message = r.String()
	for _, j := range r.Rejections {
		st.Reasons = append(st.Reasons, &unyov1.ScheduleReasonCount{Code: j.Code.String(), Count: int32(j.Nodes), Detail: j.String()})
	}
	return st
}

// assignmentFor is what c's agent receives.
func assignmentFor(c *unyov1.Compute) *unyov1.Assignment {
	sp := c.GetSpec()
	return &unyov1.Assignment{
		Compute: c.GetName(), Service: c.GetService(), Provider: sp.GetProvider(),
		Resources: c.GetResources(), ImageSource: c.GetImageSource(), Network: sp.GetNetwork(),
		Address: cmp.Or(c.GetAddress(), c.GetStatus().GetAddress()), Env: sp.GetEnv(), Command: sp.GetCommand(), Desired: StateRunning,
	}
}

// byService groups computes by service, services and computes by name.
func byService(cs []*unyov1.Compute) [][]*unyov1.Compute {
	idx := map[string]int{}
	var out [][]*unyov1.Compute
	for _, c := range cs {
		i, ok := idx[c.GetService()]
		if !ok {
			i = len(out)
			idx[c.GetService()] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	for _, g := range out {
		slices.SortFunc(g, func(a, b *unyov1.Compute) int {
			if a.GetIndex() != b.GetIndex() {
				return int(a.GetIndex() - b.GetIndex())
			}
			return cmp.Compare(a.GetName(), b.GetName())
		})
	}
	return out
}

// capacityKey changes whenever something that could let a Blocked
// compute be placed changes: a node joins or leaves, changes state,
// capacity or labels, its generation moves (a reservation released,
// cordon lifted), or a provider of it turns healthy or reports another
// capacity.
func capacityKey(nodes []*unyov1.Node) uint64 {
	h := fnv.New64a()
	for _, n := range nodes {
		c := n.GetCapacity()
		fmt.Fprintf(h, "%s|%d|%d|%d|%d|%d|%d|%v|%s|", n.GetName(), n.GetState(), n.GetGeneration(), c.GetCpus(), c.GetMemoryBytes(), c.GetDiskBytes(),
			len(n.GetLabels())+len(n.GetTopologyLabels()), n.GetCordoned(), placement.ProvidersKey(n.GetProviders()))
	}
	return h.Sum64()
}

// planner is one round's view of the nodes and reservations, kept up to
// date with the round's own commits so that later services see them.
type planner struct {
	nodes  []schedule.Node
	index  map[string]int
	labels map[string]map[string]string
	// placed are each service's placements.
	placed map[string][]schedule.Placement
	// moved are the generations this round's commits moved nodes to.
	moved map[string]int64
}

func newPlanner(nodes []*unyov1.Node, rs []store.Reservation) *planner {
	p := &planner{index: map[string]int{}, labels: map[string]map[string]string{}, placed: map[string][]schedule.Placement{}, moved: map[string]int64{}}
	for _, n := range nodes {
		p.index[n.GetName()] = len(p.nodes)
		p.nodes = append(p.nodes, placement.Node(n))
		p.labels[n.GetName()] = topology.NodeLabels(n)
	}
	for _, r := range rs {
		l := p.labels[r.Node]
		if l == nil {
			l = map[string]string{}
		}
		p.placed[r.Service] = append(p.placed[r.Service], schedule.Placement{Node: r.Node, Labels: l})
	}
	return p
}

func (p *planner) existing(service string) []schedule.Placement { return p.placed[service] }

// generation is the generation to commit a placement on node at: the one
// it was chosen at, or, when an earlier commit of this round moved the
// node since, the new one (the planner counted that commit).
func (p *planner) generation(node string, chosen int64) int64 {
	if g, ok := p.moved[node]; ok {
		return g
	}
	return chosen
}

// commit counts a reservation committed outside the round's batches (a
// replacement), which moved node to generation gen.
func (p *planner) commit(node, service string, shape schedule.Resources, gen int64) {
	p.count(node, service, shape)
	p.nodes[p.index[node]].Generation = gen
	p.moved[node] = gen
}

// count counts a placement planned on node for later services of the
// round.
func (p *planner) count(node, service string, shape schedule.Resources) {
	n := &p.nodes[p.index[node]]
	n.Reserved = n.Reserved.Add(shape)
	p.placed[service] = append(p.placed[service], schedule.Placement{Node: node, Labels: p.labels[node]})
}

// placeHinted places one replica released from retry.node: on that node
// again when it still fits (an update in place, a retry after a failure),
// else wherever the scheduler chooses; after heal.MaxFailuresPerNode
// failures there, anywhere but that node.
func (p *planner) placeHinted(c *unyov1.Compute, req schedule.Request) schedule.Result {
	r := retryOf(c.GetStatus().GetRetry())
	i, known := p.index[r.Node]
	nodes := p.nodes
	switch {
	case !known:
	case heal.Avoid(r):
		nodes = slices.Clone(p.nodes)
		nodes[i].Cordoned = true
	case schedule.Check(p.nodes[i], req) == nil:
		return schedule.Result{Placed: []schedule.Choice{{Node: r.Node, Generation: p.nodes[i].Generation}}}
	}
	return schedule.NewSnapshot(nodes).Place(req, 1)
}
