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
	"github.com/unyo-ops/unyo/provision/placement"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/topology"
)

// Phase words of replacements and computes this file writes.
const (
	phaseScheduled = "Creating:Scheduled"
	phaseActive    = "Active"
)

// lockCompute reads a compute for update; ErrNotFound if none.
func (s *Store) lockCompute(ctx context.Context, tx *sql.Tx, name string) (computeRow, error) {
	r, err := scanCompute(tx.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1"+s.d.forUpdate, name))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("compute", name)
	}
	return r, err
}

func statusOf(c *unyov1.Compute) *unyov1.ComputeStatus {
	st := proto.CloneOf(c.GetStatus())
	if st == nil {
		st = &unyov1.ComputeStatus{}
	}
	return st
}

func clearReplacement(st *unyov1.ComputeStatus) {
	st.ReplacingNode, st.ReplacementPhase, st.ReplacementReason, st.ReplacementMessage = "", "", "", ""
}

func (s *Store) ReserveNext(ctx context.Context, res store.Reservation, a *unyov1.Assignment, revision int64, why string) (int64, error) {
	var gen int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.lockPlacement(ctx, tx, res)
		if err != nil {
			return err
		}
		r, err := s.lockCompute(ctx, tx, res.Compute)
		if err != nil {
			return err
		}
		switch {
		case r.deleting:
			return fmt.Errorf("compute %s is being deleted", res.Compute)
		case r.assignment == nil || r.assignment.GetDesired() == desiredDeleted:
			return fmt.Errorf("compute %s: no running instance to replace: %w", res.Compute, store.ErrNotFound)
		case r.next != nil:
			return fmt.Errorf("compute %s: %w (a next instance on node %s)", res.Compute, store.ErrExists, r.next.GetNode())
		case r.assignment.GetNode() == res.Node:
			// Both instances would be one resource to the node's agent.
			return fmt.Errorf("compute %s already runs on node %s: %w", res.Compute, res.Node, store.ErrExists)
		}
		existing, err := servicePlacements(ctx, tx, res.Service)
		if err != nil {
			return err
		}
		// The instance being replaced does not count against its
		// replacement: the two never run for long together.
		req := schedule.Request{Service: res.Service, Shape: res.Resources, Policy: res.Policy}
		for _, p := range existing {
			if p.compute != res.Compute {
				req.Existing = append(req.Existing, p.Placement)
			}
		}
		if err := schedule.Check(placement.Node(n), req); err != nil {
			return err
		}
		if res.ReservedAt.IsZero() {
			res.ReservedAt = s.clockNow()
		}
		if gen, err = insertReservation(ctx, tx, res, r.c, n.GetTopologyLabels()[topology.LabelModel]); err != nil {
			return err
		}
		agen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		r.next = proto.CloneOf(a)
		r.next.Node, r.next.Generation, r.nextRevision = res.Node, agen, revision
		st := statusOf(r.c)
		st.ReplacingNode, st.ReplacementPhase, st.ReplacementReason, st.ReplacementMessage = res.Node, phaseScheduled, why, ""
		st.UpdatedAt = timestamppb.New(res.ReservedAt)
		r.c.Status = st
		return writeCompute(ctx, tx, r, agen)
	})
	var reason *schedule.Reason
	if errors.As(err, &reason) {
		return 0, reason
	}
	if err != nil {
		return 0, fmt.Errorf("reserve a next instance of %s on node %s: %w", res.Compute, res.Node, err)
	}
	return gen, nil
}

func (s *Store) SetReplacement(ctx context.Context, compute string, u store.ReplacementUpdate) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.lockCompute(ctx, tx, compute)
		if err != nil {
			return err
		}
		if (u.Current != "" && r.assignment.GetNode() != u.Current) || (u.Next != "" && r.next.GetNode() != u.Next) {
			return nil
		}
		st := statusOf(r.c)
		if u.Phase == "" && r.next == nil {
			clearReplacement(st)
		} else {
			st.ReplacementPhase, st.ReplacementMessage = u.Phase, u.Message
			if u.Reason != "" {
				st.ReplacementReason = u.Reason
			}
		}
		gen := r.assignGen
		if u.RetireCurrent && r.assignment != nil && r.assignment.GetDesired() != desiredDeleted {
			if gen, err = bumpAssignments(ctx, tx); err != nil {
				return err
			}
			r.assignment.Desired, r.assignment.Generation = desiredDeleted, gen
		}
		if u.CancelNext && r.next != nil && r.next.GetDesired() != desiredDeleted {
			if gen, err = bumpAssignments(ctx, tx); err != nil {
				return err
			}
			r.next.Desired, r.next.Generation = desiredDeleted, gen
		}
		if !u.At.IsZero() {
			st.UpdatedAt = timestamppb.New(u.At)
		}
		r.c.Status = st
		return writeCompute(ctx, tx, r, gen)
	})
	if err != nil {
		return fmt.Errorf("set the replacement of compute %q: %w", compute, err)
	}
	return nil
}

func (s *Store) CurrentGone(ctx context.Context, compute, node string, at time.Time) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.lockCompute(ctx, tx, compute)
		if err != nil {
			return err
		}
		if r.assignment == nil || (node != "" && r.assignment.GetNode() != node) {
			return nil
		}
		if err := deleteReservation(ctx, tx, compute, r.assignment.GetNode(), at); err != nil {
			return err
		}
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		st := statusOf(r.c)
		ts := timestamppb.New(at)
		st.Handle, st.UpdatedAt = "", ts
		if r.next != nil {
			// The next instance becomes the current one.
			active := st.GetReplacementPhase() == phaseActive
			r.assignment, r.next = r.next, nil
			r.assignment.Generation = gen
			st.Node, st.ScheduledAt, st.SpecRevision = r.assignment.GetNode(), ts, r.nextRevision
			r.nextRevision = 0
			if !r.deleting {
				st.Phase, st.Reason, st.Message, st.Reasons = phaseScheduled, "", "", nil
				if active {
					st.Phase, st.ActiveAt = phaseActive, ts
				}
			}
		} else {
			// Removed without a replacement (a forced drain): the compute
			// waits to be placed again.
			r.assignment = nil
			st.Node, st.ScheduledAt, st.ActiveAt = "", nil, nil
			if !r.deleting {
				st.Phase, st.Reason, st.Message, st.Reasons = phaseInitializing, "", "", nil
			}
		}
		clearReplacement(st)
		st.Checks = nil // judged again for the instance it now runs
		r.c.Status = st
		return writeCompute(ctx, tx, r, gen)
	})
	if err != nil {
		return fmt.Errorf("end the current instance of compute %q: %w", compute, err)
	}
	return nil
}

func (s *Store) NextGone(ctx context.Context, compute string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.lockCompute(ctx, tx, compute)
		if err != nil {
			return err
		}
		if r.next == nil {
			return nil
		}
		if err := deleteReservation(ctx, tx, compute, r.next.GetNode(), s.clockNow()); err != nil {
			return err
		}
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		r.next, r.nextRevision = nil, 0
		st := statusOf(r.c)
		clearReplacement(st)
		r.c.Status = st
		return writeCompute(ctx, tx, r, gen)
	})
	if err != nil {
		return fmt.Errorf("end the next instance of compute %q: %w", compute, err)
	}
	return nil
}

func (s *Store) SetNodeDrain(ctx context.Context, node string, d *unyov1.NodeDrain) error {
	body, err := marshalOrNil(d)
	if err != nil {
		return fmt.Errorf("encode the drain of node %q: %w", node, err)
	}
	draining := 0
	if d.GetPhase() == store.DrainPhaseDraining {
		draining = 1
	}
	// Draining cordons; the generation moves when schedulability does.
	res, err := s.w.ExecContext(ctx, `UPDATE nodes SET drain = $1, draining = CAST($2 AS BIGINT),
		cordoned = CASE WHEN CAST($2 AS BIGINT) = 1 THEN 1 ELSE cordoned END,
		generation = CASE WHEN draining <> CAST($2 AS BIGINT) OR (cordoned = 0 AND CAST($2 AS BIGINT) = 1) THEN generation + 1 ELSE generation END
		WHERE name = $3`, body, draining, node)
	if err != nil {
		return fmt.Errorf("set the drain of node %q: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set the drain of node %q: %w", node, err)
	} else if n == 0 {
		return notFound("node", node)
	}
	return nil
}

func (s *Store) SetNodeAuto(ctx context.Context, node string, a *unyov1.NodeAuto) error {
	body, err := marshalOrNil(a)
	if err != nil {
		return fmt.Errorf("encode the auto settings of node %q: %w", node, err)
	}
	res, err := s.w.ExecContext(ctx, "UPDATE nodes SET auto = $1 WHERE name = $2", body, node)
	if err != nil {
		return fmt.Errorf("set the auto settings of node %q: %w", node, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set the auto settings of node %q: %w", node, err)
	} else if n == 0 {
		return notFound("node", node)
	}
	return nil
}
