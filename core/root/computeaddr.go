package root

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

// Every replica of a service whose compute spec names a network holds one
// address of it from root's IPAM, under the holder compute/NAME: allocated
// before the replica is given a cluster (so that its cluster, its agent and
// its provider get it with the replica), and released with the IPAM's
// quarantine only when the replica is gone for good. The IPAM hands a
// holder the address it already holds, so a second pass or a restarted
// root never allocates twice.

// ReasonNoAddress is a replica's reason when its network has no address
// left: it stays Blocked, unplaced, and is tried again every pass.
const ReasonNoAddress = "NoAddress"

// addressHolder is the IPAM holder of a replica's address.
func addressHolder(compute string) string { return "compute/" + compute }

// needsAddress says whether a live replica waits for an address.
func needsAddress(r *unyov1.Compute) bool {
	return r.GetSpec().GetNetwork() != "" && r.GetAddress() == ""
}

// allocateAddresses gives the live replicas of s an address of the
// service's network where they have none. A replica whose network is full
// is Blocked (NoAddress); one whose network does not exist Fails.
func (c *serviceController) allocateAddresses(ctx context.Context, s *unyov1.RegionService, records []*unyov1.Compute) error {
	network := s.GetSpec().GetCompute().GetNetwork()
	if network == "" {
		return nil
	}
	now := c.now()
	for _, r := range records {
		if r.GetStatus().GetPhase() == service.PhaseDeleting || r.GetAddress() != "" {
			continue
		}
		a, err := c.store.AllocateAddress(ctx, network, addressHolder(r.GetName()), now)
		var st *unyov1.ComputeStatus
		switch {
		case err == nil:
			r.Address = a.GetAddress()
			if r.Spec == nil {
				// Released by the record's network: keep it even when the
				// rest of the spec cannot be resolved yet.
				r.Spec = &unyov1.ComputeSpec{Network: network}
			}
			c.log.Info("an address was allocated for a compute", "compute", r.GetName(), "network", network, "address", r.Address)
			continue
		case errors.Is(err, store.ErrFull):
			st = &unyov1.ComputeStatus{Phase: service.PhaseBlocked, Reason: ReasonNoAddress,
				Message: fmt.Sprintf("no address for it in network %s: %v; it is placed once an address is free", network, err)}
		case errors.Is(err, store.ErrNotFound):
			st = &unyov1.ComputeStatus{Phase: service.PhaseFailed, Reason: service.ReasonUnsatisfiable,
				Message: fmt.Sprintf("network %q does not exist", network)}
		default:
			return fmt.Errorf("allocate an address of network %s for compute %s: %w", network, r.GetName(), err)
		}
		if !sameComputeStatus(r.GetStatus(), st) {
			st.UpdatedAt = timestamppb.New(now)
			r.Status = st
		}
	}
	return nil
}

// releaseAddress releases a gone replica's address (with the IPAM's
// quarantine); nothing to release is no error.
func (c *serviceController) releaseAddress(ctx context.Context, r *unyov1.Compute) error {
	network := r.GetSpec().GetNetwork()
	if network == "" {
		return nil
	}
	a, err := c.store.ReleaseAddress(ctx, store.AddressRelease{Network: network, Holder: addressHolder(r.GetName()),
		At: c.now(), Quarantine: c.quarantine})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("release the address of compute %s in network %s: %w", r.GetName(), network, err)
	}
	c.log.Info("a deleted compute's address was released", "compute", r.GetName(), "network", network, "address", a.GetAddress())
	return nil
}
