package root

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/printer/cell"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/catalog"
	"github.com/unyo-ops/unyo/provision/ipam"
)

// Root's part of IP address management: the NetworkService, the usage
// shown with every Network it serves, the node-local networks it answers
// for, and the checks of an apply or delete of Networks against the
// stored networks and their allocations. The store makes allocations
// atomic and guards Networks itself (a change racing an allocation); the
// checks here come first to refuse with the operator's error code.

// DefaultAddressQuarantine is how long a released address stays out of
// allocation: long enough for caches (ARP, DNS, firewall rules) that still
// name its previous holder to forget it.
const DefaultAddressQuarantine = time.Hour

// maxHolder bounds a holder's name.
const maxHolder = 512

const networkKind = "Network"

type networkService struct{ r *Root }

func (s *networkService) AllocateAddress(ctx context.Context, req *connect.Request[unyov1.AllocateAddressRequest]) (*connect.Response[unyov1.AllocateAddressResponse], error) {
	net, holder := req.Msg.GetNetwork(), req.Msg.GetHolder()
	if err := invalid(limits.Required("network", net), limits.Required("holder", holder), limits.Text("holder", holder, maxHolder)); err != nil {
		return nil, err
	}
	a, err := s.r.store.AllocateAddress(ctx, net, holder, time.Now())
	s.r.audit.Record(ctx, "NetworkService/AllocateAddress", rbac.Target{Kind: networkKind, Name: net}, nil, a, err)
	if err != nil {
		return nil, addressError(err)
	}
	return connect.NewResponse(&unyov1.AllocateAddressResponse{Allocation: a}), nil
}

func (s *networkService) ReleaseAddress(ctx context.Context, req *connect.Request[unyov1.ReleaseAddressRequest]) (*connect.Response[unyov1.ReleaseAddressResponse], error) {
	m := req.Msg
	if err := invalid(limits.Required("network", m.GetNetwork())); err != nil {
		return nil, err
	}
	if (m.GetAddress() == "") == (m.GetHolder() == "") {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name either the address or its holder"))
	}
	if m.GetAddress() != "" {
		if _, err := ipam.ParseAddr(m.GetAddress()); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("address: %w", err))
		}
	}
	a, err := s.r.store.ReleaseAddress(ctx, store.AddressRelease{Network: m.GetNetwork(), Address: m.GetAddress(), Holder: m.GetHolder(),
		At: time.Now(), Quarantine: s.r.opts.AddressQuarantine})
	s.r.audit.Record(ctx, "NetworkService/ReleaseAddress", rbac.Target{Kind: networkKind, Name: m.GetNetwork()}, a, nil, err)
	if err != nil {
		return nil, addressError(err)
	}
	return connect.NewResponse(&unyov1.ReleaseAddressResponse{Allocation: a}), nil
}

// addressError gives a store error of IPAM its status code.
func addressError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, store.ErrFull):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, store.ErrInUse):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// showUsage fills in the usage of networks from IPAM, reading every
// network's allocations with one query when there are several.
func (r *Root) showUsage(ctx context.Context, objs []*unyov1.Object) error {
	var nets []*unyov1.Network
	for _, o := range objs {
		if n := o.GetNetwork(); n != nil {
			nets = append(nets, n)
		}
	}
	if len(nets) == 0 {
		return nil
	}
	now := time.Now()
	which := ""
	if len(nets) == 1 {
		which = nets[0].GetName()
	}
	allocs, err := r.store.ListAllocations(ctx, which, now)
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	byNet := map[string][]*unyov1.AddressAllocation{}
	for _, a := range allocs {
		byNet[a.GetNetwork()] = append(byNet[a.GetNetwork()], a)
	}
	for _, n := range nets {
		size := int64(0)
		if p, err := ipam.PoolOf(n.GetName(), n.GetSpec()); err == nil {
			size = p.Size()
		}
		n.Usage = ipam.Usage(size, byNet[n.GetName()])
	}
	return nil
}

// nodeLocal answers a get of a node's node-local network, which is built
// in rather than stored; ok is false for any other name.
func (r *Root) nodeLocal(ctx context.Context, name string) (o *unyov1.Object, ok bool, err error) {
	node, ok := ipam.NodeLocal(name)
	if !ok {
		return nil, false, nil
	}
	o = kinds.Wrap(ipam.NodeLocalNetwork(node))
	return o, true, r.showUsage(ctx, []*unyov1.Object{o})
}

// checkNetworks refuses an apply whose Networks overlap other networks of
// their scope (stored, or in the apply), or move addresses that are
// allocated out of a network's pool.
func (r *Root) checkNetworks(ctx context.Context, objs []*unyov1.Object) error {
	applied := map[string]*unyov1.Network{}
	for _, o := range objs {
		if n := o.GetNetwork(); n != nil {
			applied[n.GetName()] = n
		}
	}
	if len(applied) == 0 {
		return nil
	}
	stored, err := r.store.ListObjects(ctx, networkKind)
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("read the stored networks: %w", err))
	}
	changed := map[string]bool{}
	var all []*unyov1.Network
	for name, n := range applied {
		changed[name] = true
		all = append(all, n)
	}
	for _, o := range stored {
		if n := o.GetNetwork(); !changed[n.GetName()] {
			all = append(all, n)
		}
	}
	if err := catalog.Overlaps(all, changed); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	// A few networks are read one by one; many with one read of every
	// allocation (node-local ones included).
	var allocs []*unyov1.AddressAllocation
	if len(applied) <= 50 {
		for name := range applied {
			as, err := r.store.ListAllocations(ctx, name, time.Now())
			if err != nil {
				return connect.NewError(connect.CodeInternal, err)
			}
			allocs = append(allocs, as...)
		}
	} else if allocs, err = r.store.ListAllocations(ctx, "", time.Now()); err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	var errs []string
	outside := map[string][]string{}
	for _, a := range allocs {
		n, ok := applied[a.GetNetwork()]
		if !ok || a.GetReleasedAt() != nil {
			continue
		}
		pool, err := ipam.NewPool(n.GetSpec())
		addr, aerr := ipam.ParseAddr(a.GetAddress())
		if err == nil && aerr == nil && !pool.Contains(addr) {
			outside[n.GetName()] = append(outside[n.GetName()], a.GetAddress()+" ("+a.GetHolder()+")")
		}
	}
	for name, held := range outside {
		errs = append(errs, fmt.Sprintf("network %q: %d allocated addresses would no longer be allocatable under the new spec: %s; release them first",
			name, len(held), cell.FirstFew(held, 5)))
	}
	slices.Sort(errs)
	if len(errs) > 0 {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// checkNetworkDelete refuses to delete a network addresses are allocated
// from, naming their holders.
func (r *Root) checkNetworkDelete(ctx context.Context, name string) error {
	allocs, err := r.store.ListAllocations(ctx, name, time.Now())
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	var holders []string
	for _, a := range allocs {
		if a.GetReleasedAt() == nil {
			holders = append(holders, a.GetHolder()+" ("+a.GetAddress()+")")
		}
	}
	if len(holders) == 0 {
		return nil
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("network %q still has %d allocated addresses, held by %s; release them first (unyo networks release %s --holder HOLDER)",
		name, len(holders), cell.FirstFew(holders, 5), name))
}
