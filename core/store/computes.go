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

// ErrDeleting is returned (wrapped) by ReserveCompute for a compute root
// no longer wants.
var ErrDeleting = errors.New("the compute is being deleted")

// ErrStatusChanged is returned by SwapComputeStatus and RecreateCompute
// when the compute's status changed since the caller read it.
var ErrStatusChanged = errors.New("the compute's status changed since it was read")

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
	// names no node: an unplaced status never hides a placement. The
	// replacement's fields (replacing_node, replacement_*) are kept as
	// stored, and a status naming another node than the stored one is
	// stale and dropped (a replacement took over meanwhile).
	SetComputeStatus(ctx context.Context, name string, st *unyov1.ComputeStatus) error
	// SwapComputeStatus is SetComputeStatus on condition that the stored
	// status is still prev, the one the caller read and decided on
	// (compare-and-swap); ErrStatusChanged when it is not, so that a loop
	// never overwrites what another writer (an agent's report, the node
	// stage) wrote since it read.
	SwapComputeStatus(ctx context.Context, name string, prev, st *unyov1.ComputeStatus) error
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
	// RecreateCompute asks the agent of a placed compute to remove its
	// instance (its assignment's desired becomes "deleted") and sets st,
	// on condition that the stored status is still prev, the one the
	// caller decided on (compare-and-swap, as SwapComputeStatus):
	// ErrStatusChanged when it is not, so that a retry decided on a
	// failure never removes an instance an agent reported running since.
	// The reservation stays until ReleaseCompute. ErrNotFound if the
	// compute does not exist or has no assignment.
	RecreateCompute(ctx context.Context, name string, prev, st *unyov1.ComputeStatus) error
	// ReleaseCompute takes a placed compute back to the node stage: it
	// releases its reservation, drops its assignment and sets st, all in
	// one transaction, but only when the assignment is still on node and,
	// with removedOnly, is one RecreateCompute asked removed. It reports
	// whether it released anything.
	ReleaseCompute(ctx context.Context, name, node string, removedOnly bool, st *unyov1.ComputeStatus) (bool, error)
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

	// Replacements: a placed compute's next instance on another node
	// (a drain, a surge update), with its own reservation and assignment,
	// while the current instance runs.

	// ReserveNext commits a next instance like ReserveCompute (generation,
	// capacity and hard rules re-checked; the compute's own current
	// instance does not count against it) and marks the compute's status
	// (ReplacingNode, ReplacementPhase Creating:Scheduled, ReplacementReason
	// why). ErrExists when the compute already has a next instance or runs
	// on that node; ErrNotFound when it has no running instance.
	ReserveNext(ctx context.Context, r Reservation, a *unyov1.Assignment, revision int64, why string) (generation int64, err error)
	// SetReplacement records a replacement's phase and message (Phase ""
	// without a next instance clears the replacement), and can turn the
	// current or the next instance's assignment to deleted.
	SetReplacement(ctx context.Context, compute string, u ReplacementUpdate) error
	// CurrentGone is the current instance deleted by its agent (or its node
	// gone): its reservation is released and the next instance becomes the
	// current one (its spec revision the status's), or, without one, the
	// compute waits Initializing to be placed again.
	// node, when set, is the current instance's node as the caller saw it:
	// when the compute's differs, the call is stale and does nothing.
	CurrentGone(ctx context.Context, compute, node string, at time.Time) error
	// NextGone is the next instance deleted (a cancelled replacement): its
	// reservation is released and the replacement cleared.
	NextGone(ctx context.Context, compute string) error
	// SetNodeDrain records a node's drain (nil clears it); a Draining one
	// marks the node draining and cordoned, anything else clears draining.
	// ErrNotFound if there is no such node.
	SetNodeDrain(ctx context.Context, node string, d *unyov1.NodeDrain) error
	// SetNodeAuto records a node's automatic cordon/drain settings.
	SetNodeAuto(ctx context.Context, node string, a *unyov1.NodeAuto) error
	// Ledger returns the billing ledger's rows with any time in [since,
	// until): one per reservation ever held, open (no End) while held,
	// in the order they were opened.
	Ledger(ctx context.Context, since, until time.Time) ([]billing.Entry, error)
}

// DrainPhaseDraining is the phase of a drain that runs.
const DrainPhaseDraining = "Draining"

// ReplacementUpdate is a change to a compute's replacement.
type ReplacementUpdate struct {
	Phase, Reason, Message string
	// RetireCurrent turns the current instance's assignment to deleted
	// (the next one is Active, or a forced drain evicts it).
	RetireCurrent bool
	// CancelNext turns the next instance's assignment to deleted.
	CancelNext bool
	// Current and Next, when set, are the nodes of the instances the
	// update was decided for: when the compute's differ (a replacement
	// took over meanwhile), the update is stale and dropped.
	Current, Next string
	At            time.Time
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
