package root

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/service"
)

// Root's service controller keeps every RegionService's replicas: one
// Compute record per replica (NAME-0, NAME-1, ...) in root's objects
// table, each given a cluster by the cluster stage and handed to that
// cluster with ProvisionService.SyncComputes, which answers with the
// statuses root copies back. A pass runs every SyncInterval and right
// after a service or compute changes. Root has no lease: one root process
// runs the controller, and svcMu orders its writes against operators'
// applies and deletes of services and computes.
//
// A pass has three steps, so that no write waits on a slow cluster:
//
//  1. read every cluster's nodes (ListNodes, outside the lock);
//  2. under svcMu, bring the records in line with the services (scale up
//     at the lowest free index, scale down from the tail, mark the
//     replicas of a deleted service Deleting), run the cluster stage for
//     the replicas without a cluster, and store the records;
//  3. call SyncComputes on every cluster answering with the full list of
//     the Computes root wants there (outside the lock), then under svcMu
//     copy the statuses back onto the records as they are now, remove the
//     records of replicas the clusters no longer hold (Deleting →
//     Deleted), pass replicas a cluster turned down to the next cluster,
//     and store each service's derived status.

// ClusterCalls are the calls the service controller makes to clusters;
// tests fake them.
type ClusterCalls interface {
	// Clusters names the registered clusters.
	Clusters(ctx context.Context) ([]string, error)
	ListNodes(ctx context.Context, cluster string) ([]*unyov1.Node, error)
	// SyncComputes hands a cluster the full list of the Computes and
	// Loadbalancers root wants there and returns every one it holds, with
	// status.
	SyncComputes(ctx context.Context, cluster string, want *unyov1.SyncComputesRequest) (*unyov1.SyncComputesResponse, error)
	// RecordServiceEvent has a cluster store an event root raises about a
	// service (root has no event store).
	RecordServiceEvent(ctx context.Context, cluster string, e *unyov1.RecordServiceEventRequest) error
}

// serviceController is root's RegionService controller.
type serviceController struct {
	store   store.Store
	calls   ClusterCalls
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
	// mu orders the controller's writes against operators' writes of
	// services and computes (Root.svcMu).
	mu *sync.Mutex

	// turnedDown are, per service, the clusters that answered its
	// replicas Blocked with NoCapacity and were passed over; handoffs
	// counts the passes (bounded by service.MaxHandoffs) until the service
	// is Active. Kept in memory: a restarted root tries every cluster
	// again, which is harmless.
	turnedDown map[string][]string
	handoffs   map[string]int
	// again asks for another pass soon (replicas were passed on).
	again chan struct{}
	// rolling is set by a pass that saw a rollout running.
	rolling bool
	// quarantine is how long a deleted replica's address stays out of
	// allocation (root.address_quarantine).
	quarantine time.Duration
	// events are the cluster stage's placement events of this pass
	// (replicas it turned Blocked or Failed), recorded after the plan is
	// stored.
	events []*unyov1.RecordServiceEventRequest
}

func newServiceController(st store.Store, calls ClusterCalls, mu *sync.Mutex, timeout time.Duration, log *slog.Logger) *serviceController {
	return &serviceController{store: st, calls: calls, log: log, now: time.Now, timeout: timeout, mu: mu,
		turnedDown: map[string][]string{}, handoffs: map[string]int{}, again: make(chan struct{}, 1), quarantine: DefaultAddressQuarantine}
}

// rootCalls are ClusterCalls over root's clients, with root's own
// credential for each cluster (the one it uses for SetNodeTopology).
type rootCalls struct{ r *Root }

func (c rootCalls) Clusters(ctx context.Context) ([]string, error) {
	cs, err := c.r.store.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cs))
	for i, ci := range cs {
		names[i] = ci.GetName()
	}
	return names, nil
}

// clients returns a registered cluster and root's clients for it.
func (c rootCalls) clients(ctx context.Context, cluster string) (*unyov1.ClusterInfo, *client.Clients, error) {
	ci, err := c.r.store.GetCluster(ctx, cluster)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.r.client(ctx, ci)
	return ci, cl, err
}

func (c rootCalls) ListNodes(ctx context.Context, cluster string) ([]*unyov1.Node, error) {
	ci, cl, err := c.clients(ctx, cluster)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: cluster}))
	if err != nil {
		return nil, clusterHints.Explain(ci.GetUrl(), err)
	}
	return resp.Msg.GetNodes(), nil
}

func (c rootCalls) RecordServiceEvent(ctx context.Context, cluster string, e *unyov1.RecordServiceEventRequest) error {
	ci, cl, err := c.clients(ctx, cluster)
	if err != nil {
		return err
	}
	if _, err := cl.Provision.RecordServiceEvent(ctx, connect.NewRequest(e)); err != nil {
		return clusterHints.Explain(ci.GetUrl(), err)
	}
	return nil
}

func (c rootCalls) SyncComputes(ctx context.Context, cluster string, want *unyov1.SyncComputesRequest) (*unyov1.SyncComputesResponse, error) {
	ci, cl, err := c.clients(ctx, cluster)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Provision.SyncComputes(ctx, connect.NewRequest(want))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		// A cluster of an older version: its replicas wait for it.
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("cluster %s does not run replicas (no ProvisionService): %w", cluster, err))
	}
	if err != nil {
		return nil, clusterHints.Explain(ci.GetUrl(), err)
	}
	return resp.Msg, nil
}

// servicesChanged asks the controller for a pass soon.
func (r *Root) servicesChanged() {
	select {
	case r.nudgeServices <- struct{}{}:
	default: // one is pending already
	}
}

// serviceLoop runs the controller until ctx ends.
func (r *Root) serviceLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.SyncInterval)
	defer t.Stop()
	for {
		if err := r.services.pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("a pass of the service controller failed; the next one retries", "err", err)
		}
		// A rollout moves on when a replica turns Active: look again
		// soon rather than at the next SyncInterval.
		var soon <-chan time.Time
		if r.services.rolling {
			soon = time.After(rolloutPoll)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.nudgeServices:
		case <-r.services.again:
		case <-soon:
		}
	}
}

// serviceKinds are the kinds whose changes the controller acts on.
var serviceKinds = []string{service.KindService, service.KindCompute, service.KindLoadbalancer}

// world is what a pass read of root's objects.
type world struct {
	services map[string]*unyov1.RegionService
	computes map[string][]*unyov1.Compute    // by service
	lbs      map[string]*unyov1.Loadbalancer // by service
	attrs    map[string]*unyov1.Cluster
	flavors  map[string]*unyov1.Flavor
	images   map[string]*unyov1.Image
}

func (c *serviceController) read(ctx context.Context) (*world, error) {
	w := &world{services: map[string]*unyov1.RegionService{}, computes: map[string][]*unyov1.Compute{}, lbs: map[string]*unyov1.Loadbalancer{},
		attrs: map[string]*unyov1.Cluster{}, flavors: map[string]*unyov1.Flavor{}, images: map[string]*unyov1.Image{}}
	for _, kind := range []string{service.KindService, service.KindCompute, service.KindLoadbalancer, "Cluster", "Flavor", "Image"} {
		objs, err := c.store.ListObjects(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("list root's %s objects: %w", kind, err)
		}
		for _, o := range objs {
			switch m := kinds.Message(o).(type) {
			case *unyov1.RegionService:
				w.services[m.GetName()] = m
			case *unyov1.Compute:
				w.computes[m.GetService()] = append(w.computes[m.GetService()], m)
			case *unyov1.Loadbalancer:
				w.lbs[m.GetService()] = m
			case *unyov1.Cluster:
				w.attrs[m.GetName()] = m
			case *unyov1.Flavor:
				w.flavors[m.GetName()] = m
			case *unyov1.Image:
				w.images[m.GetName()] = m
			}
		}
	}
	return w, nil
}

// pass is one run of the controller.
func (c *serviceController) pass(ctx context.Context) error {
	if rev, err := c.store.ObjectsRevision(ctx, serviceKinds...); err != nil || rev == 0 {
		return err // never had a service: nothing to hand any cluster
	}
	names, err := c.calls.Clusters(ctx)
	if err != nil {
		return fmt.Errorf("list the clusters: %w", err)
	}
	nodes, reachable := c.listNodes(ctx, names)

	want, err := c.plan(ctx, nodes)
	if err != nil {
		return err
	}
	c.recordEvents(ctx, reachable)
	answers := c.sync(ctx, reachable, want)
	return c.absorb(ctx, names, answers)
}

// listNodes reads every cluster's nodes; a cluster that does not answer
// is left out of this pass (its records keep their last status).
func (c *serviceController) listNodes(ctx context.Context, names []string) (map[string][]schedule.Node, []string) {
	out := perCluster(ctx, c.timeout, names, func(ctx context.Context, name string) ([]schedule.Node, error) {
		ns, err := c.calls.ListNodes(ctx, name)
		if err != nil {
			c.log.Warn("a cluster's nodes could not be read; its replicas wait for the next pass", "cluster", name, "err", err)
			return nil, err
		}
		sn := make([]schedule.Node, len(ns))
		for i, n := range ns {
			sn[i] = service.Node(n)
		}
		return sn, nil
	})
	return out, slices.Sorted(maps.Keys(out))
}

// perCluster calls fn for every cluster at once, each call bounded by
// timeout, and returns the answers of the clusters whose call succeeded.
func perCluster[T any](ctx context.Context, timeout time.Duration, names []string, fn func(ctx context.Context, cluster string) (T, error)) map[string]T {
	out := map[string]T{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			got, err := fn(cctx, name)
			if err != nil {
				return
			}
			mu.Lock()
			out[name] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// plan brings the records in line with the services and gives a cluster to
// the replicas without one; it returns, per cluster, the Computes and
// Loadbalancers root wants there.
func (c *serviceController) plan(ctx context.Context, nodes map[string][]schedule.Node) (map[string]*unyov1.SyncComputesRequest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	var clusterNodes []service.ClusterNodes
	for name, ns := range nodes {
		clusterNodes = append(clusterNodes, service.ClusterNodes{Name: name, Attrs: w.attrs[name], Nodes: ns})
	}
	slices.SortFunc(clusterNodes, func(a, b service.ClusterNodes) int { return strings.Compare(a.Name, b.Name) })
	clusters := service.Clusters(clusterNodes)
	now := c.now()
	var put []*unyov1.Object
	svcNames := make([]string, 0, len(w.services))
	for name := range w.services {
		svcNames = append(svcNames, name)
	}
	slices.Sort(svcNames)
	for _, name := range svcNames {
		s := w.services[name]
		records := c.reconcile(s, w.computes[name], now)
		if revise(s, now) {
			put = append(put, kinds.Wrap(s))
		}
		if err := c.allocateAddresses(ctx, s, records); err != nil {
			return nil, err
		}
		c.resolve(s, records, w, clusters, now)
		w.computes[name] = records
		for _, r := range records {
			put = append(put, kinds.Wrap(r))
		}
		lb, err := c.planLoadbalancer(ctx, s, w.lbs[name], records, now)
		if err != nil {
			return nil, err
		}
		if lb != nil {
			w.lbs[name] = lb
			put = append(put, kinds.Wrap(lb))
		}
	}
	// Load balancers of services that are gone are deleted like their
	// replicas.
	for svc, lb := range w.lbs {
		if _, ok := w.services[svc]; !ok && markLoadbalancerDeleting(lb, now) {
			put = append(put, kinds.Wrap(lb))
		}
	}
	// Records of services that are gone (root stopped before finishing
	// a delete) are deleted like their service's.
	for svc, records := range w.computes {
		if _, ok := w.services[svc]; ok {
			continue
		}
		for _, r := range records {
			if r.GetStatus().GetPhase() != service.PhaseDeleting {
				r.Status = &unyov1.ComputeStatus{Phase: service.PhaseDeleting, UpdatedAt: timestamppb.New(now)}
				put = append(put, kinds.Wrap(r))
			}
		}
	}
	if len(put) > 0 {
		if _, err := c.store.PutObjects(ctx, put); err != nil {
			return nil, fmt.Errorf("store the service controller's compute records: %w", err)
		}
	}
	want := map[string]*unyov1.SyncComputesRequest{}
	of := func(cluster string) *unyov1.SyncComputesRequest {
		if want[cluster] == nil {
			want[cluster] = &unyov1.SyncComputesRequest{}
		}
		return want[cluster]
	}
	for _, records := range w.computes {
		for _, r := range records {
			if r.GetCluster() == "" || r.GetStatus().GetPhase() == service.PhaseDeleting {
				continue
			}
			sent := proto.Clone(r).(*unyov1.Compute)
			sent.Status, sent.Revision, sent.CreatedAt, sent.UpdatedAt = nil, 0, nil, nil
			of(r.GetCluster()).Computes = append(of(r.GetCluster()).Computes, sent)
		}
	}
	for _, lb := range w.lbs {
		if sent := loadbalancerToSend(lb); sent != nil {
			of(lb.GetCluster()).Loadbalancers = append(of(lb.GetCluster()).Loadbalancers, sent)
		}
	}
	return want, nil
}

// placementEvent is the event of a replica the cluster stage could not
// place, worded as the cluster's node stage words its own
// (compute-placement, labelled compute and service).
func placementEvent(r *unyov1.Compute) *unyov1.RecordServiceEventRequest {
	st := r.GetStatus()
	status := unyov1.CheckStatus_CHECK_STATUS_WARNING
	if st.GetPhase() == service.PhaseFailed {
		status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	}
	return &unyov1.RecordServiceEventRequest{Service: r.GetService(), Check: ingest.PlacementCheck, Status: status.Name(),
		Output: fmt.Sprintf("%s %s - compute %s: %s", st.GetPhase(), st.GetReason(), r.GetName(), st.GetMessage()),
		Labels: map[string]string{"compute": r.GetName()}}
}

// recordEvents hands the pass's placement events to a cluster to store:
// the lowest-named reachable one, since the replicas have none (an event
// that finds no cluster is logged and dropped; the status keeps the
// reason).
func (c *serviceController) recordEvents(ctx context.Context, reachable []string) {
	c.mu.Lock()
	events := c.events
	c.events = nil
	c.mu.Unlock()
	for _, e := range events {
		err := errors.New("no cluster is reachable")
		if len(reachable) > 0 {
			cctx, cancel := context.WithTimeout(ctx, c.timeout)
			err = c.calls.RecordServiceEvent(cctx, reachable[0], e)
			cancel()
		}
		if err != nil {
			c.log.Warn("a placement event could not be stored", "service", e.GetService(), "err", err, "event", e.GetOutput())
		}
	}
}

// deleting says whether a service is on its way out: deleted by an
// operator, or scaled to zero.
func deleting(s *unyov1.RegionService) bool {
	return s.GetStatus().GetPhase() == service.PhaseDeleting || s.GetSpec().GetCompute().GetReplicas() <= 0
}

// reconcile returns the service's records with as many live replicas as it
// wants: new ones at the lowest unused indexes, the highest indexes marked
// Deleting when there are too many, all of them when the service goes.
func (c *serviceController) reconcile(s *unyov1.RegionService, records []*unyov1.Compute, now time.Time) []*unyov1.Compute {
	slices.SortFunc(records, func(a, b *unyov1.Compute) int { return int(a.GetIndex() - b.GetIndex()) })
	want := int(s.GetSpec().GetCompute().GetReplicas())
	if deleting(s) {
		want = 0
	}
	used := map[int32]bool{}
	var live []*unyov1.Compute
	for _, r := range records {
		used[r.GetIndex()] = true
		if r.GetStatus().GetPhase() != service.PhaseDeleting {
			live = append(live, r)
		}
	}
	for i := len(live) - 1; i >= want; i-- {
		live[i].Status = &unyov1.ComputeStatus{Phase: service.PhaseDeleting, Node: live[i].GetStatus().GetNode(),
			Address: live[i].GetStatus().GetAddress(), Handle: live[i].GetStatus().GetHandle(), UpdatedAt: timestamppb.New(now)}
	}
	for idx := int32(0); len(live) < want; idx++ {
		if used[idx] {
			continue
		}
		r := &unyov1.Compute{Name: service.ReplicaName(s.GetName(), int(idx)), Service: s.GetName(), Index: idx,
			Status: &unyov1.ComputeStatus{Phase: service.PhaseInitializing, UpdatedAt: timestamppb.New(now)}}
		records = append(records, r)
		live = append(live, r)
	}
	return records
}

// resolve gives the live replicas the service's spec, the flavor's shape
// and the image's source, and a cluster to those without one.
func (c *serviceController) resolve(s *unyov1.RegionService, records []*unyov1.Compute, w *world, clusters []schedule.Cluster, now time.Time) {
	var live []*unyov1.Compute
	for _, r := range records {
		if r.GetStatus().GetPhase() != service.PhaseDeleting {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	spec := proto.Clone(s.GetSpec().GetCompute()).(*unyov1.ComputeSpec)
	spec.Replicas, spec.Autoscale = 0, nil
	fail := func(msg string) {
		for _, r := range live {
			if r.GetCluster() == "" {
				r.Status = &unyov1.ComputeStatus{Phase: service.PhaseFailed, Reason: service.ReasonUnsatisfiable, Message: msg, UpdatedAt: timestamppb.New(now)}
			}
		}
	}
	flavor, ok := w.flavors[spec.GetFlavor()]
	if !ok {
		fail(fmt.Sprintf("flavor %q does not exist", spec.GetFlavor()))
		return
	}
	shape, err := service.Shape(flavor)
	if err != nil {
		fail(err.Error())
		return
	}
	_, ok = w.images[spec.GetImage()]
	if !ok {
		fail(fmt.Sprintf("image %q does not exist", spec.GetImage()))
		return
	}
	roll(s, live, spec, w)
	// A replica waiting for an address (Blocked, NoAddress) is not placed.
	live = slices.DeleteFunc(live, needsAddress)
	if len(live) == 0 {
		return
	}
	where, reason := service.PlaceReplicas(s, live, clusters, shape, c.turnedDown[s.GetName()])
	if reason != nil && len(c.turnedDown[s.GetName()]) > 0 && len(where) == 0 {
		// Every cluster left turned the replicas down; the next pass
		// tries them all again (handoffs stay counted).
		delete(c.turnedDown, s.GetName())
	}
	for _, r := range live {
		if r.GetCluster() != "" {
			continue
		}
		if cl, ok := where[r.GetName()]; ok {
			r.Cluster = cl
			r.Status = &unyov1.ComputeStatus{Phase: service.PhaseCreating, UpdatedAt: timestamppb.New(now)}
			continue
		}
		if reason != nil {
			st := service.Blocked(reason)
			if !sameComputeStatus(r.GetStatus(), st) {
				st.UpdatedAt = timestamppb.New(now)
				r.Status = st
				c.events = append(c.events, placementEvent(r))
			}
		}
	}
}

// sync hands every reachable cluster the Computes and Loadbalancers root
// wants there, in parallel; an empty list tells a cluster to delete every
// one it holds.
func (c *serviceController) sync(ctx context.Context, reachable []string, want map[string]*unyov1.SyncComputesRequest) map[string]*unyov1.SyncComputesResponse {
	return perCluster(ctx, c.timeout, reachable, func(ctx context.Context, name string) (*unyov1.SyncComputesResponse, error) {
		req := want[name]
		if req == nil {
			req = &unyov1.SyncComputesRequest{}
		}
		got, err := c.calls.SyncComputes(ctx, name, req)
		switch {
		case connect.CodeOf(err) == connect.CodeUnimplemented:
			c.log.Debug("a cluster does not run replicas yet (no ProvisionService)", "cluster", name)
		case err != nil:
			c.log.Warn("handing a cluster its computes failed; the next pass retries", "cluster", name, "computes", len(req.GetComputes()), "err", err)
		}
		return got, err
	})
}

// absorb copies the clusters' answers onto the records as they are now,
// removes the records of replicas that are gone, passes turned-down
// replicas on, and stores each service's status.
func (c *serviceController) absorb(ctx context.Context, registered []string, answers map[string]*unyov1.SyncComputesResponse) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, err := c.read(ctx)
	if err != nil {
		return err
	}
	now := c.now()
	held := map[string]map[string]*unyov1.Compute{}
	for cl, a := range answers {
		held[cl] = map[string]*unyov1.Compute{}
		for _, x := range a.GetComputes() {
			held[cl][x.GetName()] = x
		}
	}
	changed := map[string]*unyov1.Compute{}
	byName := map[string]*unyov1.Compute{}
	var gone []string
	nudge := false
	for svc, records := range w.computes {
		s := w.services[svc]
		for _, r := range records {
			byName[r.GetName()] = r
			before := proto.Clone(r)
			cl := r.GetCluster()
			answer, answered := held[cl]
			switch {
			case r.GetStatus().GetPhase() == service.PhaseDeleting:
				// Deleted once no cluster holds it: never handed to one,
				// its cluster unregistered, or its cluster's answer lacks it.
				if cl == "" || !slices.Contains(registered, cl) || (answered && answer[r.GetName()] == nil) {
					gone = append(gone, r.GetName())
				}
				continue
			case cl == "" || !answered:
				continue
			case answer[r.GetName()] != nil:
				r.Status = proto.Clone(answer[r.GetName()].GetStatus()).(*unyov1.ComputeStatus)
				if r.Status == nil {
					r.Status = &unyov1.ComputeStatus{Phase: service.PhaseCreating, UpdatedAt: timestamppb.New(now)}
				}
			}
			if !proto.Equal(before, r) {
				changed[r.GetName()] = r
			}
		}
		if s != nil && c.handOff(s, records, now) {
			nudge = true
			for _, r := range records {
				if r.GetCluster() == "" && r.GetStatus().GetPhase() == service.PhaseInitializing {
					changed[r.GetName()] = r
				}
			}
		}
	}
	put := make([]*unyov1.Object, 0, len(changed))
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		put = append(put, kinds.Wrap(changed[name]))
	}
	if len(put) > 0 {
		if _, err := c.store.PutObjects(ctx, put); err != nil {
			return fmt.Errorf("store the computes' statuses: %w", err)
		}
	}
	errs := c.absorbLoadbalancers(ctx, registered, answers, w, now)
	rolling := false
	defer func() { c.rolling = rolling }()
	for _, name := range gone {
		// The address first: a failed release leaves the record, and the
		// next pass tries again, so that no address leaks.
		if err := c.releaseAddress(ctx, byName[name]); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.store.DeleteObject(ctx, service.KindCompute, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove the deleted compute %s: %w", name, err))
		} else {
			c.log.Info("a compute was deleted", "compute", name)
		}
	}
	for name, s := range w.services {
		records := slices.DeleteFunc(slices.Clone(w.computes[name]), func(r *unyov1.Compute) bool { return slices.Contains(gone, r.GetName()) })
		if deleting(s) && len(records) == 0 && w.lbs[name] == nil {
			if err := c.store.DeleteObject(ctx, service.KindService, name); err != nil && !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, fmt.Errorf("remove the deleted service %s: %w", name, err))
			} else {
				c.log.Info("a service was deleted with its computes", "service", name)
			}
			delete(c.turnedDown, name)
			delete(c.handoffs, name)
			continue
		}
		st := service.Derive(s, records, deleting(s), now)
		rolling = rolling || st.GetRollout() != ""
		if st.GetPhase() == service.PhaseActive {
			delete(c.turnedDown, name)
			delete(c.handoffs, name)
		}
		if service.SameStatus(s.GetStatus(), st) {
			continue
		}
		s.Status = st
		if _, err := c.store.PutObjects(ctx, []*unyov1.Object{kinds.Wrap(s)}); err != nil {
			errs = append(errs, fmt.Errorf("store service %s's status: %w", name, err))
		}
	}
	if nudge {
		select {
		case c.again <- struct{}{}:
		default:
		}
	}
	return errors.Join(errs...)
}

// handOff passes a service's replicas that a cluster turned down (Blocked,
// NoCapacity) to the next cluster, at most service.MaxHandoffs times per
// service until it is Active. Without allow_split a replica set moves only
// whole: when every replica of the service in that cluster is turned down.
// It reports whether it moved any.
func (c *serviceController) handOff(s *unyov1.RegionService, records []*unyov1.Compute, now time.Time) bool {
	name := s.GetName()
	if deleting(s) || c.handoffs[name] >= service.MaxHandoffs {
		return false
	}
	per := map[string][]*unyov1.Compute{}
	for _, r := range records {
		if r.GetCluster() != "" && r.GetStatus().GetPhase() != service.PhaseDeleting {
			per[r.GetCluster()] = append(per[r.GetCluster()], r)
		}
	}
	moved := false
	for cl, rs := range per {
		var blocked []*unyov1.Compute
		for _, r := range rs {
			if r.GetStatus().GetPhase() == service.PhaseBlocked && r.GetStatus().GetReason() == service.ReasonNoCapacity {
				blocked = append(blocked, r)
			}
		}
		if len(blocked) == 0 || (!s.GetSpec().GetCompute().GetSchedule().GetAllowSplit() && len(blocked) < len(rs)) {
			continue
		}
		for _, r := range blocked {
			c.log.Info("a cluster turned a replica down for lack of capacity; passing it to the next cluster", "compute", r.GetName(), "cluster", cl, "reason", r.GetStatus().GetMessage())
			r.Cluster = ""
			r.Status = &unyov1.ComputeStatus{Phase: service.PhaseInitializing, Message: fmt.Sprintf("cluster %s turned it down: %s", cl, r.GetStatus().GetMessage()), UpdatedAt: timestamppb.New(now)}
		}
		c.turnedDown[name] = append(c.turnedDown[name], cl)
		c.handoffs[name]++
		moved = true
		if c.handoffs[name] >= service.MaxHandoffs {
			break
		}
	}
	return moved
}

// sameComputeStatus compares statuses but for when they were written.
func sameComputeStatus(a, b *unyov1.ComputeStatus) bool {
	a, b = proto.Clone(a).(*unyov1.ComputeStatus), proto.Clone(b).(*unyov1.ComputeStatus)
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	a.UpdatedAt, b.UpdatedAt = nil, nil
	return proto.Equal(a, b)
}
