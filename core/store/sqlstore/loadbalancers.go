package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

// desiredRunning is an assignment's desired state while it is wanted.
const desiredRunning = "running"

// lbRow is one row of loadbalancers.
type lbRow struct {
	l          *unyov1.Loadbalancer
	node       string
	deleting   bool
	assignment *unyov1.Assignment
}

const lbColumns = "name, node, deleting, assignment, body"

func scanLoadbalancer(row scanner) (lbRow, error) {
	var (
		name, node       string
		deleting         int64
		assignment, body []byte
	)
	if err := row.Scan(&name, &node, &deleting, &assignment, &body); err != nil {
		return lbRow{}, err
	}
	r := lbRow{l: &unyov1.Loadbalancer{}, node: node, deleting: deleting != 0}
	if err := proto.Unmarshal(body, r.l); err != nil {
		return lbRow{}, fmt.Errorf("decode load balancer %q: %w", name, err)
	}
	if assignment != nil {
		r.assignment = &unyov1.Assignment{}
		if err := proto.Unmarshal(assignment, r.assignment); err != nil {
			return lbRow{}, fmt.Errorf("decode the assignment of load balancer %q: %w", name, err)
		}
	}
	return r, nil
}

func writeLoadbalancer(ctx context.Context, tx *sql.Tx, r lbRow) error {
	body, err := proto.Marshal(r.l)
	if err != nil {
		return fmt.Errorf("encode load balancer %q: %w", r.l.GetName(), err)
	}
	a, err := marshalOrNil(r.assignment)
	if err != nil {
		return fmt.Errorf("encode the assignment of load balancer %q: %w", r.l.GetName(), err)
	}
	deleting := 0
	if r.deleting {
		deleting = 1
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO loadbalancers (name, node, deleting, assignment, body) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET node = excluded.node, deleting = excluded.deleting,
			assignment = excluded.assignment, body = excluded.body`,
		r.l.GetName(), r.node, deleting, a, body)
	return err
}

func readLoadbalancer(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (lbRow, error) {
	r, err := scanLoadbalancer(q.QueryRowContext(ctx, "SELECT "+lbColumns+" FROM loadbalancers WHERE name = $1", name))
	if errors.Is(err, sql.ErrNoRows) {
		return lbRow{}, fmt.Errorf("load balancer %q: %w", name, store.ErrNotFound)
	}
	return r, err
}

// lbAssignment is the assignment of r's load balancer on node at
// generation gen.
func lbAssignment(l *unyov1.Loadbalancer, node string, gen int64) *unyov1.Assignment {
	return &unyov1.Assignment{Compute: l.GetName(), Service: l.GetService(), Provider: l.GetSpec().GetProvider(), Node: node,
		Network: l.GetNetwork(), Address: l.GetVip(), Desired: desiredRunning, Generation: gen,
		Loadbalancer: service.LoadbalancerAssignment(l)}
}

// withoutLBStatus is l without what the cluster maintains.
func withoutLBStatus(l *unyov1.Loadbalancer) *unyov1.Loadbalancer {
	l = proto.CloneOf(l)
	l.Status, l.Revision, l.CreatedAt, l.UpdatedAt = nil, 0, nil, nil
	return l
}

func (s *Store) SyncLoadbalancers(ctx context.Context, desired []*unyov1.Loadbalancer, at time.Time) ([]*unyov1.Loadbalancer, error) {
	var out []*unyov1.Loadbalancer
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		held, err := syncAll(ctx, tx, lbSync{}, desired, timestamppb.New(at))
		out = make([]*unyov1.Loadbalancer, len(held))
		for i, r := range held {
			out[i] = r.l
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sync load balancers: %w", err)
	}
	return out, nil
}

// lbSync is the load balancers as syncAll sees them.
type lbSync struct{}

func (lbSync) query() string                 { return "SELECT " + lbColumns + " FROM loadbalancers" }
func (lbSync) scan(r scanner) (lbRow, error) { return scanLoadbalancer(r) }
func (lbSync) name(r lbRow) string           { return r.l.GetName() }
func (lbSync) deleting(r lbRow) bool         { return r.deleting }

// apply keeps the status and placement under root's new version: another
// provider places the load balancer anew (on a node offering it; the old
// node's agent removes what it no longer has), new backends, ports or
// health rewrite its assignment for the agent to update it in place.
func (lbSync) apply(ctx context.Context, tx *sql.Tx, d *unyov1.Loadbalancer, old lbRow, ok bool, ts *timestamppb.Timestamp) (lbRow, bool, error) {
	l := withoutLBStatus(d)
	l.UpdatedAt = ts
	if ok {
		if proto.Equal(withoutLBStatus(old.l), withoutLBStatus(l)) {
			return old, false, nil
		}
		l.Status, l.CreatedAt, l.Revision = old.l.GetStatus(), old.l.GetCreatedAt(), old.l.GetRevision()+1
	} else {
		l.Status = &unyov1.LoadbalancerStatus{Phase: phaseInitializing, UpdatedAt: ts}
		l.CreatedAt, l.Revision = ts, 1
	}
	r := lbRow{l: l, node: old.node, assignment: old.assignment}
	switch {
	case r.assignment != nil && r.assignment.GetProvider() != l.GetSpec().GetProvider():
		if _, err := bumpAssignments(ctx, tx); err != nil {
			return r, false, err
		}
		r.node, r.assignment = "", nil
		r.l.Status = &unyov1.LoadbalancerStatus{Phase: phaseInitializing, UpdatedAt: ts}
	case r.assignment != nil && !proto.Equal(r.assignment.GetLoadbalancer(), service.LoadbalancerAssignment(l)):
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return r, false, err
		}
		r.assignment = lbAssignment(l, r.node, gen)
	}
	return r, true, writeLoadbalancer(ctx, tx, r)
}

// drop removes a load balancer never placed at once (nothing to remove on
// a node) and marks a placed one Deleting for its agent to remove.
func (lbSync) drop(ctx context.Context, tx *sql.Tx, r lbRow, ts *timestamppb.Timestamp) (lbRow, bool, error) {
	if r.assignment == nil {
		_, err := tx.ExecContext(ctx, "DELETE FROM loadbalancers WHERE name = $1", r.l.GetName())
		return r, false, err
	}
	r.deleting = true
	r.l.Status = &unyov1.LoadbalancerStatus{Phase: phaseDeleting, Node: r.node, Handle: r.l.GetStatus().GetHandle(), UpdatedAt: ts}
	gen, err := bumpAssignments(ctx, tx)
	if err != nil {
		return r, false, err
	}
	r.assignment.Desired, r.assignment.Generation = desiredDeleted, gen
	return r, true, writeLoadbalancer(ctx, tx, r)
}

func (s *Store) ListLoadbalancers(ctx context.Context) ([]*unyov1.Loadbalancer, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+lbColumns+" FROM loadbalancers ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	all, err := scanAll(rows, scanLoadbalancer)
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	out := make([]*unyov1.Loadbalancer, len(all))
	for i, r := range all {
		out[i] = r.l
	}
	return out, nil
}

func (s *Store) GetLoadbalancer(ctx context.Context, name string) (*unyov1.Loadbalancer, error) {
	r, err := readLoadbalancer(ctx, s.r, name)
	if err != nil {
		return nil, err
	}
	return r.l, nil
}

func (s *Store) PlaceLoadbalancer(ctx context.Context, name, node string, st *unyov1.LoadbalancerStatus) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := readLoadbalancer(ctx, tx, name)
		if err != nil {
			return err
		}
		if r.deleting {
			return fmt.Errorf("load balancer %q: %w", name, store.ErrDeleting)
		}
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		r.node, r.assignment, r.l.Status = node, lbAssignment(r.l, node, gen), st
		return writeLoadbalancer(ctx, tx, r)
	})
}

func (s *Store) SetLoadbalancerStatus(ctx context.Context, name string, st *unyov1.LoadbalancerStatus) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := readLoadbalancer(ctx, tx, name)
		if err != nil {
			return err
		}
		r.l.Status = st
		return writeLoadbalancer(ctx, tx, r)
	})
}

func (s *Store) DropLoadbalancer(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM loadbalancers WHERE name = $1 AND assignment IS NOT NULL", name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			// Its node's agent sees the list change.
			_, err = bumpAssignments(ctx, tx)
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM loadbalancers WHERE name = $1", name)
		return err
	})
}
