package store

import (
	"context"
	"errors"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// ErrGeneration is returned (wrapped) by ReserveCompute when the node's
// generation moved since the placement was chosen: the caller rebuilds its
// snapshot and places again.
var ErrGeneration = errors.New("node changed since the placement was chosen")

// ErrDeleting is returned (wrapped) by ReserveCompute for a compute root
// no longer wants.
var ErrDeleting = errors.New("the compute is being deleted")

// Computes are the cluster's side of provisioning: the Computes root
// placed on the cluster (desired spec and status), the reservation each
// placed one holds on its node, its Assignment to the node's agent, and
// the nodes' scheduling state. Reservations are committed atomically
// against the node's generation with the placement re-checked (no
// overcommit, no broken hard rule), across store handles on one database.
type Computes interface {
	// SyncComputes makes desired the set of Computes root wants: new ones
	// are stored Initializing, known ones take the new spec, resources,
	// image and cluster and keep their status, and those absent from
	// desired become Deleting (their assignment's desired becomes
	// "deleted"). It returns every compute held, by name.
	SyncComputes(ctx context.Context, desired []*unyov1.Compute, at time.Time) ([]*unyov1.Compute, error)
	// ListComputes returns every compute, by name.
	ListComputes(ctx context.Context) ([]*unyov1.Compute, error)
	// GetCompute returns one compute; ErrNotFound if none.
	GetCompute(ctx context.Context, name string) (*unyov1.Compute, error)
	// SetComputeStatus replaces a compute's status; ErrNotFound if none,
	// ErrExists if the compute is placed (holds an assignment) and st
	// names no node: an unplaced status never hides a placement.
	SetComputeStatus(ctx context.Context, name string, st *unyov1.ComputeStatus) error
	// ReserveCompute commits a placement: in one transaction it re-reads
	// the node and the service's placements, refuses a moved generation
	// (ErrGeneration) or a failed schedule.Check (the *schedule.Reason),
	// writes the reservation, the assignment (its generation set by the
	// store) and st, and bumps the node's generation, which it returns.
	ReserveCompute(ctx context.Context, r Reservation, a *unyov1.Assignment, st *unyov1.ComputeStatus) (generation int64, err error)
	// ReserveComputes commits several placements in one transaction,
	// each as ReserveCompute does, in order, up to the first one refused:
	// it returns the node generations of those committed and the refusal
	// (nil when all were). Two placements on one node carry the
	// generation the node had when both were chosen. On a failure other
	// than a refusal nothing is committed.
	ReserveComputes(ctx context.Context, ps []Placement) (generations []int64, err error)
	// DropCompute removes a compute, its assignment and its reservation
	// (bumping the node's generation); no error if it does not exist.
	DropCompute(ctx context.Context, name string) error
	// ListReservations returns every reservation, by compute.
	ListReservations(ctx context.Context) ([]Reservation, error)
	// ListAssignments returns node's assignments, by compute, and the
	// assignments counter, which moves on every change of any assignment.
	ListAssignments(ctx context.Context, node string) ([]*unyov1.Assignment, int64, error)
	// AssignmentsGeneration is the assignments counter.
	AssignmentsGeneration(ctx context.Context) (int64, error)
	// SetNodeCordoned cordons or uncordons a node, bumping its generation
	// when that changes something; ErrNotFound if there is no such node.
	SetNodeCordoned(ctx context.Context, node string, cordoned bool) (changed bool, err error)
}

// Placement is one compute's placement to commit: its reservation, the
// assignment its agent receives (the store sets its node and generation)
// and its status from then on (nil: unchanged).
type Placement struct {
	Reservation Reservation
	Assignment  *unyov1.Assignment
	Status      *unyov1.ComputeStatus
}

// Reservation is the resources one placed compute holds on its node.
type Reservation struct {
	Compute, Service, Node string
	Resources              schedule.Resources
	// Generation is the node's generation the placement was chosen at
	// (ReserveCompute only).
	Generation int64
	// Policy is the service's node-stage policy, re-checked at commit
	// (ReserveCompute only).
	Policy     schedule.Policy
	ReservedAt time.Time
}
