package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
)

// Phases and desired states this file writes (the contract's words).
const (
	phaseInitializing = "Initializing"
	phaseDeleting     = "Deleting"
	desiredDeleted    = "deleted"
)

// computeRow is one row of computes.
type computeRow struct {
	c          *unyov1.Compute
	deleting   bool
	assignment *unyov1.Assignment
	assignGen  int64
	// next is the next instance's assignment (a replacement in flight),
	// and nextRevision the spec revision it runs.
	next         *unyov1.Assignment
	nextRevision int64
}

func scanCompute(row scanner) (computeRow, error) {
	var (
		name             string
		deleting, gen    int64
		assignment, body []byte
		next             []byte
		nextRevision     int64
	)
	if err := row.Scan(&name, &deleting, &assignment, &body, &gen, &next, &nextRevision); err != nil {
		return computeRow{}, err
	}
	r := computeRow{c: &unyov1.Compute{}, deleting: deleting != 0, assignGen: gen, nextRevision: nextRevision}
	if err := proto.Unmarshal(body, r.c); err != nil {
		return computeRow{}, fmt.Errorf("decode compute %q: %w", name, err)
	}
	if assignment != nil {
		r.assignment = &unyov1.Assignment{}
		if err := proto.Unmarshal(assignment, r.assignment); err != nil {
			return computeRow{}, fmt.Errorf("decode assignment of compute %q: %w", name, err)
		}
	}
	if next != nil {
		r.next = &unyov1.Assignment{}
		if err := proto.Unmarshal(next, r.next); err != nil {
			return computeRow{}, fmt.Errorf("decode the next assignment of compute %q: %w", name, err)
		}
	}
	return r, nil
}

const computeColumns = "name, deleting, assignment, body, assign_gen, next_assignment, next_revision"

func marshalOrNil(m proto.Message) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return proto.Marshal(m)
}

// writeCompute stores r whole.
func writeCompute(ctx context.Context, tx *sql.Tx, r computeRow, assignGen int64) error {
	body, err := proto.Marshal(r.c)
	if err != nil {
		return fmt.Errorf("encode compute %q: %w", r.c.GetName(), err)
	}
	var a []byte
	if r.assignment != nil {
		if a, err = marshalOrNil(r.assignment); err != nil {
			return fmt.Errorf("encode assignment of %q: %w", r.c.GetName(), err)
		}
	}
	var next []byte
	if r.next != nil {
		if next, err = marshalOrNil(r.next); err != nil {
			return fmt.Errorf("encode the next assignment of %q: %w", r.c.GetName(), err)
		}
	}
	deleting := 0
	if r.deleting {
		deleting = 1
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO computes (name, service, node, deleting, assign_gen, assignment, body, next_node, next_assignment, next_revision)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (name) DO UPDATE SET service = excluded.service, node = excluded.node,
			deleting = excluded.deleting, assign_gen = excluded.assign_gen,
			assignment = excluded.assignment, body = excluded.body, next_node = excluded.next_node,
			next_assignment = excluded.next_assignment, next_revision = excluded.next_revision`,
		r.c.GetName(), r.c.GetService(), r.assignment.GetNode(), deleting, assignGen, a, body, r.next.GetNode(), next, r.nextRevision)
	return err
}

// bumpAssignments moves the assignments counter and returns its new value.
func bumpAssignments(ctx context.Context, tx *sql.Tx) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, "UPDATE counters SET value = value + 1 WHERE name = 'assignments' RETURNING value").Scan(&v)
	return v, err
}

func (s *Store) SyncComputes(ctx context.Context, desired []*unyov1.Compute, at time.Time) ([]*unyov1.Compute, error) {
	var out []*unyov1.Compute
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		held, err := syncAll(ctx, tx, computeSync{}, desired, timestamppb.New(at))
		out = make([]*unyov1.Compute, len(held))
		for i, r := range held {
			out[i] = r.c
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sync %d computes: %w", len(desired), err)
	}
	return out, nil
}

// computeSync is the computes as syncAll sees them.
type computeSync struct{}

func (computeSync) query() string                      { return "SELECT " + computeColumns + " FROM computes" }
func (computeSync) scan(r scanner) (computeRow, error) { return scanCompute(r) }
func (computeSync) name(r computeRow) string           { return r.c.GetName() }
func (computeSync) deleting(r computeRow) bool         { return r.deleting }

// apply keeps what the cluster maintains (status, creation, the
// assignment and a next instance) under root's new version; a new spec
// revision of a placed replica replaces its instance in place, unless
// the replica is updated with surge (the node stage then places the new
// instance first: replaceWithSurge).
func (computeSync) apply(ctx context.Context, tx *sql.Tx, d *unyov1.Compute, old computeRow, ok bool, ts *timestamppb.Timestamp) (computeRow, bool, error) {
	c := proto.CloneOf(d)
	c.UpdatedAt = ts
	if ok {
		if proto.Equal(withoutStatus(old.c), withoutStatus(c)) {
			return old, false, nil
		}
		c.Status, c.CreatedAt, c.Revision = old.c.GetStatus(), old.c.GetCreatedAt(), old.c.GetRevision()+1
	} else {
		c.Status = &unyov1.ComputeStatus{Phase: phaseInitializing, UpdatedAt: ts}
		c.CreatedAt, c.Revision = ts, 1
	}
	r := computeRow{c: c, assignment: old.assignment, assignGen: old.assignGen, next: old.next, nextRevision: old.nextRevision}
	if ok && !c.GetSurge() && old.next == nil && needsReplacement(old, c) {
		r, err := replaceInPlace(ctx, tx, r, ts)
		return r, true, err
	}
	return r, true, writeCompute(ctx, tx, r, r.assignGen)
}

// drop marks a compute Deleting; its instances' assignments (the current
// and a next one) ask their agents to remove them.
func (computeSync) drop(ctx context.Context, tx *sql.Tx, r computeRow, ts *timestamppb.Timestamp) (computeRow, bool, error) {
	r.deleting = true
	r.c.Status = proto.CloneOf(r.c.GetStatus())
	if r.c.Status == nil {
		r.c.Status = &unyov1.ComputeStatus{}
	}
	r.c.Status.Phase, r.c.Status.Reason, r.c.Status.Message, r.c.Status.Reasons = phaseDeleting, "", "", nil
	r.c.Status.UpdatedAt = ts
	gen := r.assignGen
	var err error
	if r.assignment != nil {
		if gen, err = bumpAssignments(ctx, tx); err != nil {
			return r, false, err
		}
		r.assignment.Desired, r.assignment.Generation = desiredDeleted, gen
	}
	if r.next != nil {
		if gen, err = bumpAssignments(ctx, tx); err != nil {
			return r, false, err
		}
		r.next.Desired, r.next.Generation = desiredDeleted, gen
	}
	return r, true, writeCompute(ctx, tx, r, gen)
}

// withoutStatus is c without what the cluster maintains, to tell whether
// root changed anything.
func withoutStatus(c *unyov1.Compute) *unyov1.Compute {
	c = proto.CloneOf(c)
	c.Status, c.CreatedAt, c.UpdatedAt, c.Revision = nil, nil, nil, 0
	return c
}

func (s *Store) ListComputes(ctx context.Context) ([]*unyov1.Compute, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+computeColumns+" FROM computes ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list computes: %w", err)
	}
	rs, err := scanAll(rows, scanCompute)
	if err != nil {
		return nil, fmt.Errorf("list computes: %w", err)
	}
	out := make([]*unyov1.Compute, len(rs))
	for i, r := range rs {
		out[i] = r.c
	}
	return out, nil
}

func (s *Store) GetCompute(ctx context.Context, name string) (*unyov1.Compute, error) {
	r, err := scanCompute(s.r.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1", name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("compute", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get compute %q: %w", name, err)
	}
	return r.c, nil
}

func (s *Store) SetComputeStatus(ctx context.Context, name string, st *unyov1.ComputeStatus) error {
	return s.setComputeStatus(ctx, name, false, nil, st)
}

func (s *Store) SwapComputeStatus(ctx context.Context, name string, prev, st *unyov1.ComputeStatus) error {
	return s.setComputeStatus(ctx, name, true, prev, st)
}

// setComputeStatus sets a compute's status, with swap only while it is
// still prev.
func (s *Store) setComputeStatus(ctx context.Context, name string, swap bool, prev, st *unyov1.ComputeStatus) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := scanCompute(tx.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1"+s.d.forUpdate, name))
		if err != nil {
			return err
		}
		if swap && !proto.Equal(r.c.GetStatus(), prev) {
			return store.ErrStatusChanged
		}
		if r.assignment != nil && st.GetNode() == "" {
			// A node stage that read the compute before another placed it.
			return fmt.Errorf("%w: it is placed on node %s", store.ErrExists, r.assignment.GetNode())
		}
		if cur := r.c.GetStatus(); cur != nil {
			if cur.GetNode() != "" && st.GetNode() != "" && cur.GetNode() != st.GetNode() {
				// Written for an instance the compute no longer runs (its
				// replacement took over meanwhile): stale.
				return nil
			}
			// The replacement's fields are the replacement methods' own.
			st = proto.CloneOf(st)
			st.ReplacingNode, st.ReplacementPhase, st.ReplacementReason, st.ReplacementMessage =
				cur.GetReplacingNode(), cur.GetReplacementPhase(), cur.GetReplacementReason(), cur.GetReplacementMessage()
		}
		r.c.Status = st
		body, err := proto.Marshal(r.c)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE computes SET body = $1 WHERE name = $2", body, name)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("compute", name)
	}
	if err != nil {
		return fmt.Errorf("set status of compute %q: %w", name, err)
	}
	return nil
}

// lockPlacement takes the locks of a placement of res, the service's
// first, then the node's, always in this order: placements of one service
// take turns (anti-affinity spans nodes), and placements on one node take
// turns (capacity). It refuses a node whose generation moved since the
// choice (ErrGeneration) and returns the node as it is now.
func (s *Store) lockPlacement(ctx context.Context, tx *sql.Tx, res store.Reservation) (*unyov1.Node, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO counters (name, value) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET value = counters.value + 1`, "placement/"+res.Service); err != nil {
		return nil, fmt.Errorf("lock service: %w", err)
	}
	var locked int64
	if err := tx.QueryRowContext(ctx, "SELECT generation FROM nodes WHERE name = $1"+s.d.forUpdate, res.Node).Scan(&locked); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("node", res.Node)
		}
		return nil, fmt.Errorf("lock node: %w", err)
	}
	if locked != res.Generation {
		return nil, fmt.Errorf("%w (node %s: generation %d, chosen at %d)", store.ErrGeneration, res.Node, locked, res.Generation)
	}
	n, err := scanNode(tx.QueryRowContext(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE name = $1", res.Node))
	if err != nil {
		return nil, fmt.Errorf("read node: %w", err)
	}
	return n, nil
}

func (s *Store) ReserveCompute(ctx context.Context, res store.Reservation, a *unyov1.Assignment, st *unyov1.ComputeStatus) (int64, error) {
	gens, err := s.ReserveComputes(ctx, []store.Placement{{Reservation: res, Assignment: a, Status: st}})
	if err != nil {
		return 0, err
	}
	return gens[0], nil
}

func (s *Store) ReserveComputes(ctx context.Context, ps []store.Placement) ([]int64, error) {
	var (
		gens    []int64
		refusal error
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		gens, refusal = gens[:0], nil
		b, err := lockPlacements(ctx, tx, s.d.forUpdate, ps)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Reservation.ReservedAt.IsZero() {
				p.Reservation.ReservedAt = s.clockNow()
			}
			gen, err := b.reserve(ctx, tx, p)
			if err != nil {
				var reason *schedule.Reason
				if errors.As(err, &reason) || errors.Is(err, store.ErrGeneration) || errors.Is(err, store.ErrExists) ||
					errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDeleting) {
					refusal = err
					break
				}
				return err
			}
			gens = append(gens, gen)
		}
		if refusal != nil && len(gens) == 0 {
			// Nothing to keep: roll back (the service locks' counters
			// moved) rather than commit an empty write.
			return errNothingReserved
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNothingReserved) {
		return nil, fmt.Errorf("reserve %d placements: %w", len(ps), err)
	}
	if refusal != nil {
		var reason *schedule.Reason
		if errors.As(refusal, &reason) {
			// The caller tells a refusal from a failure by the Reason.
			return gens, reason
		}
		res := ps[len(gens)].Reservation
		return gens, fmt.Errorf("reserve %d vCPUs, %d bytes of memory and %d of disk for %s on node %s: %w",
			res.Resources.VCPUs, res.Resources.MemoryBytes, res.Resources.DiskBytes, res.Compute, res.Node, refusal)
	}
	return gens, nil
}

// errNothingReserved rolls back a batch whose first placement was refused.
var errNothingReserved = errors.New("no placement reserved")

// reserveBatch is what a batch of placements read under its locks, kept
// up to date with the batch's own reservations, so that each placement
// is checked against the ones before it without reading again.
type reserveBatch struct {
	nodes map[string]*batchNode
	// placed are each service's placements.
	placed map[string][]servicePlacement
	// assignGen is the batch's assignments generation, moved once.
	assignGen int64
}

type batchNode struct {
	node   schedule.Node
	labels map[string]string
	// chosenAt is the generation the batch's placements on the node were
	// chosen at, set by the first one.
	chosenAt int64
	placed   bool
}

// lockPlacements takes the locks a batch of placements needs, the
// services' first, then the nodes', each in name order, so that two
// batches never wait on each other in a cycle: placements of one service
// take turns (anti-affinity spans nodes), and placements on one node take
// turns (capacity). It reads the nodes and the services' placements.
func lockPlacements(ctx context.Context, tx *sql.Tx, forUpdate string, ps []store.Placement) (*reserveBatch, error) {
	var services, nodes []string
	for _, p := range ps {
		services = append(services, p.Reservation.Service)
		nodes = append(nodes, p.Reservation.Node)
	}
	slices.Sort(services)
	slices.Sort(nodes)
	b := &reserveBatch{nodes: map[string]*batchNode{}, placed: map[string][]servicePlacement{}}
	for _, svc := range slices.Compact(services) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO counters (name, value) VALUES ($1, 1)
			ON CONFLICT (name) DO UPDATE SET value = counters.value + 1`, "placement/"+svc); err != nil {
			return nil, fmt.Errorf("lock service %s: %w", svc, err)
		}
	}
	for _, name := range slices.Compact(nodes) {
		var gen int64
		err := tx.QueryRowContext(ctx, "SELECT generation FROM nodes WHERE name = $1"+forUpdate, name).Scan(&gen)
		if errors.Is(err, sql.ErrNoRows) {
			continue // refused when a placement asks for it
		}
		if err != nil {
			return nil, fmt.Errorf("lock node %s: %w", name, err)
		}
		n, err := scanNode(tx.QueryRowContext(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE name = $1", name))
		if err != nil {
			return nil, fmt.Errorf("read node %s: %w", name, err)
		}
		b.nodes[name] = &batchNode{node: placement.Node(n), labels: topology.NodeLabels(n)}
	}
	for _, svc := range slices.Compact(services) {
		existing, err := servicePlacements(ctx, tx, svc)
		if err != nil {
			return nil, err
		}
		b.placed[svc] = existing
	}
	return b, nil
}

// reserve commits one placement of the batch if its node is where it was
// chosen and it passes schedule.Check; it returns the node's new
// generation.
func (b *reserveBatch) reserve(ctx context.Context, tx *sql.Tx, p store.Placement) (int64, error) {
	res := p.Reservation
	bn := b.nodes[res.Node]
	if bn == nil {
		return 0, notFound("node", res.Node)
	}
	// A second placement on a node carries the generation the first was
	// chosen at; the node is then where the batch moved it.
	want := res.Generation
	if bn.placed {
		if res.Generation != bn.chosenAt {
			return 0, fmt.Errorf("%w (node %s: placement chosen at generation %d, the batch's at %d)", store.ErrGeneration, res.Node, res.Generation, bn.chosenAt)
		}
		want = bn.node.Generation
	}
	if bn.node.Generation != want {
		return 0, fmt.Errorf("%w (node %s: generation %d, chosen at %d)", store.ErrGeneration, res.Node, bn.node.Generation, want)
	}
	r, err := scanCompute(tx.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1", res.Compute))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("compute", res.Compute)
	}
	if err != nil {
		return 0, err
	}
	if r.deleting {
		return 0, fmt.Errorf("compute %s: %w", res.Compute, store.ErrDeleting)
	}
	existing := b.placed[res.Service]
	for _, e := range existing {
		if e.compute == res.Compute {
			return 0, fmt.Errorf("compute %s: %w (on node %s)", res.Compute, store.ErrExists, e.Node)
		}
	}
	if r.assignment != nil || r.next != nil {
		return 0, fmt.Errorf("compute %s: %w (assigned to node %s)", res.Compute, store.ErrExists, r.assignment.GetNode())
	}
	req := schedule.Request{Service: res.Service, Shape: res.Resources, Policy: res.Policy, Provider: p.Assignment.GetProvider()}
	for _, e := range existing {
		req.Existing = append(req.Existing, e.Placement)
	}
	if err := schedule.Check(bn.node, req); err != nil {
		return 0, err
	}
	gen, err := insertReservation(ctx, tx, res, r.c, bn.labels[topology.LabelModel])
	if err != nil {
		return 0, err
	}
	if b.assignGen == 0 {
		// One move of the counter for the batch: its agents learn of
		// all of it at once.
		if b.assignGen, err = bumpAssignments(ctx, tx); err != nil {
			return 0, err
		}
	}
	a := proto.CloneOf(p.Assignment)
	a.Node, a.Generation = res.Node, b.assignGen
	r.assignment = a
	if p.Status != nil {
		r.c.Status = p.Status
	}
	if err := writeCompute(ctx, tx, r, b.assignGen); err != nil {
		return 0, err
	}
	if !bn.placed {
		bn.placed, bn.chosenAt = true, res.Generation
	}
	bn.node.Generation = gen
	bn.node.Reserved = bn.node.Reserved.Add(res.Resources)
	b.placed[res.Service] = append(existing, servicePlacement{compute: res.Compute, Placement: schedule.Placement{Node: res.Node, Labels: bn.labels}})
	return gen, nil
}

// servicePlacement is one reservation of a service, with its node's
// labels (for the hard rules).
type servicePlacement struct {
	compute string
	schedule.Placement
}

func servicePlacements(ctx context.Context, tx *sql.Tx, service string) ([]servicePlacement, error) {
	rows, err := tx.QueryContext(ctx, `SELECT r.compute, r.node, n.body FROM reservations r
		LEFT JOIN nodes n ON n.name = r.node WHERE r.service = $1 ORDER BY r.compute`, service)
	if err != nil {
		return nil, fmt.Errorf("read placements of service %s: %w", service, err)
	}
	return scanAll(rows, func(row scanner) (servicePlacement, error) {
		var p servicePlacement
		var body []byte
		if err := row.Scan(&p.compute, &p.Node, &body); err != nil {
			return p, err
		}
		n := &unyov1.Node{Name: p.Node}
		if body != nil {
			if err := proto.Unmarshal(body, n); err != nil {
				return p, fmt.Errorf("decode node %q: %w", p.Node, err)
			}
		}
		// A gone node's placement still counts, with no labels but its
		// hostname.
		p.Labels = topology.NodeLabels(n)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		return p, nil
	})
}

// insertReservation is the one place a reservation is written: every
// reservation, and anything kept beside it (the billing ledger's row, from
// the compute c and its node's machine model, which the caller read), starts
// here. It moves the node's generation and returns it.
func insertReservation(ctx context.Context, tx *sql.Tx, res store.Reservation, c *unyov1.Compute, model string) (gen int64, err error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO reservations (compute, service, node, vcpus, memory_bytes, disk_bytes, reserved_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, res.Compute, res.Service, res.Node,
		res.Resources.VCPUs, res.Resources.MemoryBytes, res.Resources.DiskBytes, res.ReservedAt.UnixNano()); err != nil {
		return 0, fmt.Errorf("write reservation: %w", err)
	}
	if err := allocPortLink(ctx, tx, res.Compute, res.Node); err != nil {
		return 0, err
	}
	if err := openLedgerRow(ctx, tx, res, c, model); err != nil {
		return 0, err
	}
	if err := tx.QueryRowContext(ctx, "UPDATE nodes SET generation = generation + 1 WHERE name = $1 RETURNING generation", res.Node).Scan(&gen); err != nil {
		return 0, fmt.Errorf("move generation of node %q: %w", res.Node, err)
	}
	return gen, nil
}

// deleteReservation is the one place a reservation is released: the
// compute's on node, or every one it holds when node is "" (a no-op when
// it holds none), its ledger row closed at at; it moves the nodes'
// generations.
func deleteReservation(ctx context.Context, tx *sql.Tx, compute, node string, at time.Time) error {
	q, args := "DELETE FROM reservations WHERE compute = $1 RETURNING node", []any{compute}
	if node != "" {
		q, args = "DELETE FROM reservations WHERE compute = $1 AND node = $2 RETURNING node", []any{compute, node}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("release reservation of %q: %w", compute, err)
	}
	nodes, err := scanAll(rows, func(row scanner) (string, error) {
		var n string
		return n, row.Scan(&n)
	})
	if err != nil {
		return fmt.Errorf("release reservation of %q: %w", compute, err)
	}
	if err := releasePortLink(ctx, tx, compute, node); err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := tx.ExecContext(ctx, "UPDATE nodes SET generation = generation + 1 WHERE name = $1", n); err != nil {
			return fmt.Errorf("move generation of node %q: %w", n, err)
		}
		if err := closeLedgerRow(ctx, tx, compute, n, at); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) DropCompute(ctx context.Context, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := deleteReservation(ctx, tx, name, "", s.clockNow()); err != nil {
			return err
		}
		var hadAssignment bool
		err := tx.QueryRowContext(ctx, "DELETE FROM computes WHERE name = $1 RETURNING (assignment IS NOT NULL OR next_assignment IS NOT NULL)", name).Scan(&hadAssignment)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if hadAssignment {
			_, err = bumpAssignments(ctx, tx)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("drop compute %q: %w", name, err)
	}
	return nil
}

func (s *Store) ListReservations(ctx context.Context) ([]store.Reservation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT compute, service, node, vcpus, memory_bytes, disk_bytes, reserved_at
		FROM reservations ORDER BY compute`)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	out, err := scanAll(rows, func(row scanner) (store.Reservation, error) {
		var r store.Reservation
		var at int64
		err := row.Scan(&r.Compute, &r.Service, &r.Node, &r.Resources.VCPUs, &r.Resources.MemoryBytes, &r.Resources.DiskBytes, &at)
		r.ReservedAt = time.Unix(0, at)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	return out, nil
}

func (s *Store) ListAssignments(ctx context.Context, node string) ([]*unyov1.Assignment, int64, error) {
	var out []*unyov1.Assignment
	var gen int64
	// In one transaction, so that the counter matches the list.
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'assignments'").Scan(&gen); err != nil {
			return err
		}
		// A node's assignments are the current instances it runs, the next
		// instances (replacements) placed on it and its load balancers; each
		// compute with the link address its reservation holds on the node.
		rows, err := tx.QueryContext(ctx, `SELECT c.assignment, c.name, p.slot FROM computes c
				LEFT JOIN port_links p ON p.compute = c.name AND p.node = $1
				WHERE c.node = $1 AND c.assignment IS NOT NULL
			UNION ALL SELECT c.next_assignment, c.name, p.slot FROM computes c
				LEFT JOIN port_links p ON p.compute = c.name AND p.node = $1
				WHERE c.next_node = $1 AND c.next_assignment IS NOT NULL
			UNION ALL SELECT assignment, name, NULL FROM loadbalancers WHERE node = $1 AND assignment IS NOT NULL
			ORDER BY 2`, node)
		if err != nil {
			return err
		}
		out, err = scanAll(rows, func(row scanner) (*unyov1.Assignment, error) {
			var b []byte
			var name string
			var slot sql.NullInt64
			if err := row.Scan(&b, &name, &slot); err != nil {
				return nil, err
			}
			a := &unyov1.Assignment{}
			if err := proto.Unmarshal(b, a); err != nil {
				return nil, err
			}
			if slot.Valid {
				a.LinkAddress = portLinkAddr(slot.Int64)
			}
			return a, nil
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list assignments of node %q: %w", node, err)
	}
	return out, gen, nil
}

func (s *Store) AssignmentsGeneration(ctx context.Context) (int64, error) {
	var gen int64
	if err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'assignments'").Scan(&gen); err != nil {
		return 0, fmt.Errorf("read assignments generation: %w", err)
	}
	return gen, nil
}

func (s *Store) SetNodeCordoned(ctx context.Context, node string, cordoned bool) (bool, error) {
	v := 0
	if cordoned {
		v = 1
	}
	res, err := s.w.ExecContext(ctx, "UPDATE nodes SET cordoned = $1, generation = generation + 1 WHERE name = $2 AND cordoned <> $1", v, node)
	if err != nil {
		return false, fmt.Errorf("cordon node %q: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("cordon node %q: %w", node, err)
	} else if n > 0 {
		return true, nil
	}
	if _, err := s.GetNode(ctx, node); err != nil {
		return false, err
	}
	return false, nil
}
