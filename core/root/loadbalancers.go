package root

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/service"
)

// A RegionService whose spec has a loadbalancer gets one Loadbalancer
// record, SERVICE-lb, kept by the service controller beside the service's
// Computes in root's objects table (never applied by an operator):
//
//   - its VIP comes from the service's compute network through root's IPAM
//     (holder loadbalancer/NAME), allocated once and released with the
//     IPAM's quarantine when the record is gone, as replicas' addresses are;
//   - its cluster is the one holding most of the service's placed replicas
//     (ties by name); it moves only when its cluster holds none of them
//     any more; while none is placed it is Blocked (NoReplica);
//   - its backends are the service's replicas in rotation
//     (service.LoadbalancerBackends), recomputed every pass;
//   - it travels to its cluster in SyncComputes beside the Computes, and
//     the cluster's answer carries its status back;
//   - the service's deletion, or its spec losing the loadbalancer, makes it
//     Deleting; the record and its VIP go once its cluster no longer holds
//     it, and a deleted service's record goes only after its load balancer.

// ReasonNoReplica is a load balancer's reason while none of its service's
// replicas is placed: it has no cluster yet.
const ReasonNoReplica = "NoReplica"

// lbAddressHolder is the IPAM holder of a load balancer's VIP.
func lbAddressHolder(name string) string { return "loadbalancer/" + name }

// planLoadbalancer returns s's load balancer record as it must be now
// (cur, the stored one, may be nil), or nil when nothing changes.
func (c *serviceController) planLoadbalancer(ctx context.Context, s *unyov1.RegionService, cur *unyov1.Loadbalancer, records []*unyov1.Compute, now time.Time) (*unyov1.Loadbalancer, error) {
	spec := s.GetSpec().GetLoadbalancer()
	if spec == nil || deleting(s) {
		if cur != nil && markLoadbalancerDeleting(cur, now) {
			return cur, nil
		}
		return nil, nil
	}
	if cur.GetStatus().GetPhase() == service.PhaseDeleting {
		// Wanted again while being removed: made anew once it is gone.
		return nil, nil
	}
	lb := proto.CloneOf(cur)
	if lb == nil {
		lb = &unyov1.Loadbalancer{Name: service.LoadbalancerName(s.GetName()), Service: s.GetName(),
			Status: &unyov1.LoadbalancerStatus{Phase: service.PhaseInitializing, UpdatedAt: timestamppb.New(now)}}
	}
	lb.Spec = proto.CloneOf(spec)
	lb.Network = s.GetSpec().GetCompute().GetNetwork()
	lb.Backends = service.LoadbalancerBackends(records)
	setStatus := func(st *unyov1.LoadbalancerStatus) {
		if !sameLoadbalancerStatus(lb.GetStatus(), st) {
			st.UpdatedAt = timestamppb.New(now)
			lb.Status = st
		}
	}
	if lb.GetVip() == "" {
		st, err := c.allocateVIP(ctx, lb, now)
		if err != nil {
			return nil, err
		}
		if st != nil {
			setStatus(st)
			return changedLoadbalancer(cur, lb), nil
		}
	}
	if lb.GetCluster() == "" || !placedIn(records, lb.GetCluster()) {
		if cl := service.LoadbalancerCluster(records); cl != lb.GetCluster() && cl != "" {
			if lb.GetCluster() != "" {
				c.log.Info("a load balancer moves to the cluster holding its service's replicas", "loadbalancer", lb.GetName(), "from", lb.GetCluster(), "to", cl)
			}
			lb.Cluster = cl
			setStatus(&unyov1.LoadbalancerStatus{Phase: service.PhaseCreating})
		}
	}
	if lb.GetCluster() == "" {
		setStatus(&unyov1.LoadbalancerStatus{Phase: service.PhaseBlocked, Reason: ReasonNoReplica,
			Message: fmt.Sprintf("none of service %s's replicas is placed yet; it runs in the cluster holding most of them", s.GetName())})
	}
	return changedLoadbalancer(cur, lb), nil
}

// changedLoadbalancer is lb when it differs from cur, else nil.
func changedLoadbalancer(cur, lb *unyov1.Loadbalancer) *unyov1.Loadbalancer {
	if cur != nil && proto.Equal(cur, lb) {
		return nil
	}
	return lb
}

// placedIn says whether any live replica of records is placed in cluster.
func placedIn(records []*unyov1.Compute, cluster string) bool {
	return slices.ContainsFunc(records, func(r *unyov1.Compute) bool {
		return r.GetCluster() == cluster && r.GetStatus().GetNode() != "" && r.GetStatus().GetPhase() != service.PhaseDeleting
	})
}

// allocateVIP gives lb a VIP of its network; it returns the status to set
// when there is none to give (Blocked NoAddress, or Failed for a network
// that does not exist), nil when lb has its VIP.
func (c *serviceController) allocateVIP(ctx context.Context, lb *unyov1.Loadbalancer, now time.Time) (*unyov1.LoadbalancerStatus, error) {
	network := lb.GetNetwork()
	a, err := c.store.AllocateAddress(ctx, network, lbAddressHolder(lb.GetName()), now)
	switch {
	case err == nil:
		lb.Vip = a.GetAddress()
		c.log.Info("a VIP was allocated for a load balancer", "loadbalancer", lb.GetName(), "network", network, "vip", lb.Vip)
		return nil, nil
	case errors.Is(err, store.ErrFull):
		return &unyov1.LoadbalancerStatus{Phase: service.PhaseBlocked, Reason: ReasonNoAddress,
			Message: fmt.Sprintf("no address for its VIP in network %s: %v; it is made once an address is free", network, err)}, nil
	case errors.Is(err, store.ErrNotFound):
		return &unyov1.LoadbalancerStatus{Phase: service.PhaseFailed, Reason: service.ReasonUnsatisfiable,
			Message: fmt.Sprintf("network %q does not exist", network)}, nil
	}
	return nil, fmt.Errorf("allocate a VIP of network %s for load balancer %s: %w", network, lb.GetName(), err)
}

// markLoadbalancerDeleting makes lb Deleting; false if it was already.
func markLoadbalancerDeleting(lb *unyov1.Loadbalancer, now time.Time) bool {
	if lb.GetStatus().GetPhase() == service.PhaseDeleting {
		return false
	}
	lb.Status = &unyov1.LoadbalancerStatus{Phase: service.PhaseDeleting, Node: lb.GetStatus().GetNode(), UpdatedAt: timestamppb.New(now)}
	return true
}

// loadbalancerToSend is lb as root hands it to its cluster (without what
// the cluster keeps), or nil when it goes to none.
func loadbalancerToSend(lb *unyov1.Loadbalancer) *unyov1.Loadbalancer {
	if lb.GetCluster() == "" || lb.GetVip() == "" || lb.GetStatus().GetPhase() == service.PhaseDeleting {
		return nil
	}
	sent := proto.CloneOf(lb)
	sent.Status, sent.Revision, sent.CreatedAt, sent.UpdatedAt = nil, 0, nil, nil
	return sent
}

// absorbLoadbalancers copies the clusters' answers onto the load
// balancers' records and removes (VIP first) those deleted that no cluster
// holds any more; w.lbs loses them.
func (c *serviceController) absorbLoadbalancers(ctx context.Context, registered []string, answers map[string]*unyov1.SyncComputesResponse, w *world, now time.Time) []error {
	var errs []error
	for svc, lb := range w.lbs {
		cl := lb.GetCluster()
		answer, answered := answers[cl]
		var held *unyov1.Loadbalancer
		for _, x := range answer.GetLoadbalancers() {
			if x.GetName() == lb.GetName() {
				held = x
			}
		}
		if lb.GetStatus().GetPhase() == service.PhaseDeleting {
			if cl != "" && slices.Contains(registered, cl) && (!answered || held != nil) {
				continue
			}
			if err := c.releaseVIP(ctx, lb); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := c.store.DeleteObject(ctx, service.KindLoadbalancer, lb.GetName()); err != nil && !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, fmt.Errorf("remove the deleted load balancer %s: %w", lb.GetName(), err))
				continue
			}
			c.log.Info("a load balancer was deleted", "loadbalancer", lb.GetName(), "service", svc)
			delete(w.lbs, svc)
			continue
		}
		if held == nil || held.GetStatus() == nil || sameLoadbalancerStatus(lb.GetStatus(), held.GetStatus()) {
			continue
		}
		lb.Status = proto.CloneOf(held.GetStatus())
		if _, err := c.store.PutObjects(ctx, []*unyov1.Object{kinds.Wrap(lb)}); err != nil {
			errs = append(errs, fmt.Errorf("store load balancer %s's status: %w", lb.GetName(), err))
		}
	}
	return errs
}

// releaseVIP releases a gone load balancer's VIP (with the IPAM's
// quarantine); nothing to release is no error.
func (c *serviceController) releaseVIP(ctx context.Context, lb *unyov1.Loadbalancer) error {
	if lb.GetNetwork() == "" || lb.GetVip() == "" {
		return nil
	}
	_, err := c.store.ReleaseAddress(ctx, store.AddressRelease{Network: lb.GetNetwork(), Holder: lbAddressHolder(lb.GetName()),
		At: c.now(), Quarantine: c.quarantine})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("release the VIP of load balancer %s in network %s: %w", lb.GetName(), lb.GetNetwork(), err)
	}
	c.log.Info("a deleted load balancer's VIP was released", "loadbalancer", lb.GetName(), "network", lb.GetNetwork(), "vip", lb.GetVip())
	return nil
}

// sameLoadbalancerStatus compares statuses but for when they were written.
func sameLoadbalancerStatus(a, b *unyov1.LoadbalancerStatus) bool {
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	a.UpdatedAt, b.UpdatedAt = nil, nil
	return proto.Equal(a, b)
}
