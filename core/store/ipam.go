package store

import (
	"context"
	"errors"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// ErrFull is returned (wrapped) when a network has no address left to
// allocate; the error says how many it has and why none is free.
var ErrFull = errors.New("no address left")

// ErrInUse is returned (wrapped) when a Network cannot be deleted, or its
// addresses changed, because addresses are allocated from it; the error
// names the holders.
var ErrInUse = errors.New("addresses allocated")

// Addresses is IP address management (provision/ipam decides which
// addresses a network has): addresses of networks, the Network objects
// and each node's built-in "node-local/NODE" network, handed out one /32
// at a time to named holders. Every allocation is atomic across store
// handles on one database (root replicas): an address is never held twice.
// A Network cannot be deleted while addresses are held from it, nor put
// with a spec whose pool no longer contains a held address (ErrInUse).
type Addresses interface {
	// AllocateAddress gives holder an address of network at time at. A
	// holder holds at most one address per network: allocating again
	// returns the one it holds, so a retried request does not leak. A
	// released address comes back only after its quarantine. ErrNotFound
	// if network is neither a Network nor node-local; ErrFull when every
	// address is held or in quarantine.
	AllocateAddress(ctx context.Context, network, holder string, at time.Time) (*unyov1.AddressAllocation, error)
	// ReleaseAddress releases the address r names (by address, or by
	// holder) and returns it with released_at set; it blocks the address
	// until r.At + r.Quarantine. ErrNotFound if it is not held.
	ReleaseAddress(ctx context.Context, r AddressRelease) (*unyov1.AddressAllocation, error)
	// ListAllocations returns the addresses of network ("" for every
	// network) that are held or in quarantine at time at, by network and
	// address.
	ListAllocations(ctx context.Context, network string, at time.Time) ([]*unyov1.AddressAllocation, error)
}

// AddressRelease names an address to release: Address, or else the one
// Holder holds.
type AddressRelease struct {
	Network, Address, Holder string
	At                       time.Time
	Quarantine               time.Duration
}
