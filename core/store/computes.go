package store

import (
	"context"
	"errors"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/billing"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// ErrGeneration is returned (wrapped) by ReserveCompute when the node's
// generation moved since the placement was chosen: the caller rebuilds its
// snapshot and places again.
var ErrGeneration = errors.New("node changed since the placement was chosen")

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
	// SetComputeStatus replaces a compute's status; ErrNotFound if none.
	SetComputeStatus(ctx context.Context, name string, st *unyov1.ComputeStatus) error
	// ReserveCompute commits a placement: in one transaction it re-reads
	// the node and the service's placements, refuses a moved generation
	// (ErrGeneration) or a failed schedule.Check (the *schedule.Reason),
	// writes the reservation, the assignment (its generation set by the
	// store) and st, and bumps the node's generation, which it returns.
	ReserveCompute(ctx context.Context, r Reservation, a *unyov1.Assignment, st *unyov1.ComputeStatus) (generation int64, err error)
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
	// Ledger returns the billing ledger's rows with any time in [since,
	// until): one per reservation ever held, open (no End) while held,
	// in the order they were opened.
	Ledger(ctx context.Context, since, until time.Time) ([]billing.Entry, error)
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
