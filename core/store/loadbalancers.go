package store

import (
	"context"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Loadbalancers is a cluster's record of the load balancers root placed on
// it (provisioning, part 4): each with its status and, once placed on a
// node, its Assignment. The assignment's generation comes from the
// assignments counter computes use, so that one long poll serves both.
type Loadbalancers interface {
	// SyncLoadbalancers makes desired the set root wants: new ones are
	// stored Initializing; known ones take the new spec, VIP and backends
	// and keep their status, and a placed one whose VIP, ports, backends
	// or health changed gets its assignment rewritten at a new generation
	// (its agent updates it in place); those absent from desired become
	// Deleting (their assignment's desired becomes "deleted"), or go at
	// once when never placed. It returns every one held, by name.
	SyncLoadbalancers(ctx context.Context, desired []*unyov1.Loadbalancer, at time.Time) ([]*unyov1.Loadbalancer, error)
	// ListLoadbalancers returns every load balancer, by name.
	ListLoadbalancers(ctx context.Context) ([]*unyov1.Loadbalancer, error)
	// GetLoadbalancer returns one; ErrNotFound if none.
	GetLoadbalancer(ctx context.Context, name string) (*unyov1.Loadbalancer, error)
	// PlaceLoadbalancer puts a load balancer on node (replacing any node
	// it was on: its old node's agent finds it no longer assigned) with
	// its assignment at a new generation, and sets st. ErrNotFound if it
	// does not exist, ErrDeleting if it is being deleted.
	PlaceLoadbalancer(ctx context.Context, name, node string, st *unyov1.LoadbalancerStatus) error
	// SetLoadbalancerStatus sets a load balancer's status; ErrNotFound if
	// none.
	SetLoadbalancerStatus(ctx context.Context, name string, st *unyov1.LoadbalancerStatus) error
	// DropLoadbalancer removes a load balancer and its assignment; no
	// error if it does not exist.
	DropLoadbalancer(ctx context.Context, name string) error
}
