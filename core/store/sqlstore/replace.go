package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// phaseUpdating is the phase of a replica whose instance is being replaced.
const phaseUpdating = "Updating"

// replaceInPlace is the spec-change branch of SyncComputes for a placed
// compute whose spec_revision moved and whose surge is false: the old
// instance goes first (its assignment's desired becomes "deleted", the
// replica Updating); when the agent reports it deleted, ReleaseCompute
// releases its reservation and the node stage places the replica again
// with the new spec, preferring the same node. r is the row with the new
// spec (from root) and the old status; it is written here.
func replaceInPlace(ctx context.Context, tx *sql.Tx, r computeRow, ts *timestamppb.Timestamp) (computeRow, error) {
	old := r.c.GetStatus()
	st := proto.CloneOf(old)
	st.Phase, st.Reason, st.Reasons, st.UpdatedAt = phaseUpdating, "", nil, ts
	st.Message = fmt.Sprintf("replacing the instance in place: spec revision %d -> %d", old.GetSpecRevision(), r.c.GetSpecRevision())
	st.Retry = &unyov1.ComputeRetry{Node: old.GetNode()}
	r.c.Status = st
	gen, err := bumpAssignments(ctx, tx)
	if err != nil {
		return r, err
	}
	r.assignment = proto.CloneOf(r.assignment)
	r.assignment.Desired, r.assignment.Generation = desiredDeleted, gen
	r.assignGen = gen
	return r, writeCompute(ctx, tx, r, gen)
}

// needsReplacement says whether root's new version of a compute asks for
// a new instance: it is placed, it was placed at another spec revision,
// and it is not already being replaced or removed.
func needsReplacement(r computeRow, next *unyov1.Compute) bool {
	a := r.assignment
	// A replica stored before revisions were kept (0) adopts root's
	// revision without a new instance.
	return a != nil && a.GetDesired() != desiredDeleted && next.GetSpecRevision() != 0 && r.c.GetSpecRevision() != 0 &&
		next.GetSpecRevision() != r.c.GetSpecRevision() && r.c.GetStatus().GetPhase() != phaseUpdating
}

func (s *Store) RecreateCompute(ctx context.Context, name string, prev, st *unyov1.ComputeStatus) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := scanCompute(tx.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1"+s.d.forUpdate, name))
		if err != nil {
			return err
		}
		if r.assignment == nil || r.deleting {
			return sql.ErrNoRows
		}
		if !proto.Equal(r.c.GetStatus(), prev) {
			return store.ErrStatusChanged
		}
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		r.assignment.Desired, r.assignment.Generation = desiredDeleted, gen
		r.c.Status = st
		return writeCompute(ctx, tx, r, gen)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("placed compute", name)
	}
	if err != nil {
		return fmt.Errorf("re-create compute %q: %w", name, err)
	}
	return nil
}

func (s *Store) ReleaseCompute(ctx context.Context, name, node string, removedOnly bool, st *unyov1.ComputeStatus) (bool, error) {
	released := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := scanCompute(tx.QueryRowContext(ctx, "SELECT "+computeColumns+" FROM computes WHERE name = $1"+s.d.forUpdate, name))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		a := r.assignment
		if a == nil || a.GetNode() != node || (removedOnly && a.GetDesired() != desiredDeleted) {
			return nil
		}
		if err := deleteReservation(ctx, tx, name, node, s.clockNow()); err != nil {
			return err
		}
		gen, err := bumpAssignments(ctx, tx)
		if err != nil {
			return err
		}
		r.assignment, r.c.Status = nil, st
		if r.deleting {
			// Root stopped wanting it meanwhile: nothing holds it now.
			_, err := tx.ExecContext(ctx, "DELETE FROM computes WHERE name = $1", name)
			released = err == nil
			return err
		}
		released = true
		return writeCompute(ctx, tx, r, gen)
	})
	if err != nil {
		return false, fmt.Errorf("release compute %q from node %q: %w", name, node, err)
	}
	return released, nil
}
