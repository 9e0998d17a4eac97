package root

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/objects"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/provision/service"
)

type clusterService struct{ r *Root }

func (s *clusterService) ListClusters(ctx context.Context, _ *connect.Request[unyov1.ListClustersRequest]) (*connect.Response[unyov1.ListClustersResponse], error) {
	all, err := s.r.targets(ctx, "")
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, all, func(ctx context.Context, name string, c *client.Clients) (*unyov1.GetStatusResponse, error) {
		resp, err := c.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	})
	reachable := map[string]bool{}
	plugins := map[string][]*unyov1.PluginStatus{}
	statuses := map[string]*unyov1.GetStatusResponse{}
	for _, a := range answers {
		reachable[a.cluster] = true
		plugins[a.cluster] = a.value.GetPlugins()
		statuses[a.cluster] = a.value
	}
	failed := map[string]string{}
	for _, e := range errs {
		failed[e.GetCluster()] = e.GetError()
	}
	attrs, err := s.attributes(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range all {
		c.Reachable = reachable[c.GetName()]
		c.Error = failed[c.GetName()]
		c.Plugins = plugins[c.GetName()]
		c.Version = statuses[c.GetName()].GetVersion()
		c.Attributes = attrs[c.GetName()]
		delete(attrs, c.GetName())
	}
	// Clusters with attributes that have not registered yet, in the
	// caller's scope, after the registered ones.
	p := server.PrincipalFrom(ctx)
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if p.InCluster(name) {
			all = append(all, &unyov1.ClusterInfo{Name: name, Attributes: attrs[name], Error: "not registered yet"})
		}
	}
	s.r.watchedBy(ctx, all, statuses)
	return connect.NewResponse(&unyov1.ListClustersResponse{Clusters: all}), nil
}

// attributes returns the Cluster objects root keeps, by name: what an
// operator applied about each cluster, registered or not.
func (s *clusterService) attributes(ctx context.Context) (map[string]*unyov1.Cluster, error) {
	objs, err := s.r.store.ListObjects(ctx, "Cluster")
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("read the clusters' attributes: %w", err))
	}
	out := make(map[string]*unyov1.Cluster, len(objs))
	for _, o := range objs {
		out[o.GetCluster().GetName()] = o.GetCluster()
	}
	return out, nil
}

// objectService serves objects: the kinds root owns from root's own
// store, the cluster-owned kinds by routing. An object naming a cluster
// goes there, one naming none goes to every cluster.
type objectService struct {
	r     *Root
	local *objects.Local
}

func newObjectService(r *Root) *objectService {
	return &objectService{r: r, local: &objects.Local{
		Kinds: r.opts.Kinds, Store: r.store, Audit: r.audit, Log: r.log, Tier: kinds.RootTier,
	}}
}

// own says whether root keeps objects of kind k itself.
func own(k kinds.Kind) bool { return k.Owner == kinds.RootTier }

func (s *objectService) Apply(ctx context.Context, req *connect.Request[unyov1.ApplyRequest]) (*connect.Response[unyov1.ApplyResponse], error) {
	objs := req.Msg.GetObjects()
	if err := s.r.opts.Kinds.Validate(objs, time.Now()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := s.authorizeApply(ctx, objs); err != nil {
		return nil, err
	}
	if err := s.r.checkNetworks(ctx, objs); err != nil {
		return nil, err
	}
	mine, per, all, err := s.route(ctx, objs)
	if err != nil {
		return nil, err
	}
	resp := &unyov1.ApplyResponse{}
	// Root's own objects and its copies of the objects meant for every
	// cluster are stored first: a cluster down now converges on them later.
	dryRun := req.Msg.GetDryRun()
	if len(mine) > 0 {
		results, err := s.applyMine(ctx, mine, dryRun)
		if err != nil {
			return nil, err
		}
		resp.Results = results
		if !dryRun {
			s.noteInventory(results)
			if touchesServices(results) {
				s.r.servicesChanged()
			}
		}
	}
	var clusters []*unyov1.ClusterInfo
	for _, c := range all {
		if len(per[c.GetName()]) > 0 {
			clusters = append(clusters, c)
		}
	}
	// Each cluster stores its part in one transaction, all or nothing. A
	// large apply may take longer than a read: it gets the caller's whole
	// time-out rather than the per-cluster one, and a cluster still busy
	// when the caller gives up rolls its part back.
	answers, errs := split(askWithin(ctx, s.r, clusters, 0, func(ctx context.Context, name string, c *client.Clients) (*unyov1.ApplyResponse, error) {
		resp, err := c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: withCluster(per[name], name), DryRun: dryRun}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}))
	for _, e := range errs {
		if slices.ContainsFunc(per[e.GetCluster()], func(o *unyov1.Object) bool { return kinds.Origin(o) == kinds.OriginRoot }) {
			e.Error += "; root keeps the objects meant for every cluster and brings this cluster up to date when it answers again"
		}
	}
	resp.ClusterErrors = errs
	for _, a := range answers {
		resp.Results = append(resp.Results, a.value.GetResults()...)
	}
	return connect.NewResponse(resp), nil
}

// applyMine stores root's own objects; services keep the status root
// derived, written in turn with the service controller's writes.
func (s *objectService) applyMine(ctx context.Context, mine []*unyov1.Object, dryRun bool) ([]*unyov1.ApplyResult, error) {
	s.r.svcMu.Lock()
	defer s.r.svcMu.Unlock()
	if err := s.r.keepServiceStatus(ctx, mine); err != nil {
		return nil, err
	}
	if dryRun {
		return s.local.Try(ctx, mine)
	}
	return s.local.Apply(ctx, mine)
}

// noteInventory has root bring node topology up to date when an inventory
// object was created, changed or deleted.
func (s *objectService) noteInventory(results []*unyov1.ApplyResult) {
	for _, res := range results {
		switch res.GetAction() {
		case "unchanged", "not found":
			continue
		}
		if isInventoryKind(res.GetRef().GetKind()) {
			s.r.inventoryChanged()
			return
		}
	}
}

// route splits an apply: the objects root stores (mine: the kinds root
// owns, and its copy of every object of an Everywhere kind meant for every
// cluster), and per cluster those it forwards, out of all the clusters root
// knows (read only when some object goes to clusters). Objects meant for
// every cluster are marked as root's (origin "root"), those naming a
// cluster as that cluster's own (origin "").
func (s *objectService) route(ctx context.Context, objs []*unyov1.Object) (mine []*unyov1.Object, per map[string][]*unyov1.Object, all []*unyov1.ClusterInfo, err error) {
	per = map[string][]*unyov1.Object{}
	listed := false
	for i, o := range objs {
		k, _, _ := s.r.opts.Kinds.Of(o)
		if own(k) {
			mine = append(mine, o)
			continue
		}
		name := kinds.Cluster(o)
		global := name == "" && k.Everywhere
		if global {
			kinds.SetOrigin(o, kinds.OriginRoot)
			mine = append(mine, o)
		} else {
			kinds.SetOrigin(o, "")
		}
		if !listed {
			if all, err = s.r.targets(ctx, ""); err != nil {
				return nil, nil, nil, err
			}
			listed = true
		}
		if len(all) == 0 && !global {
			return nil, nil, nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("objects[%d] (%s %q): no cluster is registered with root yet; start a cluster server with cluster.root_url set", i, k.Name, kinds.Name(o)))
		}
		// Group per cluster so each cluster gets one request.
		if name == "" {
			for _, c := range all {
				per[c.GetName()] = append(per[c.GetName()], o)
			}
			continue
		}
		if _, err := s.r.targets(ctx, name); err != nil {
			return nil, nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("objects[%d]: %w", i, err))
		}
		per[name] = append(per[name], o)
	}
	return mine, per, all, nil
}

// withCluster copies objects with their cluster set, leaving the request's
// objects untouched for the other clusters.
func withCluster(objs []*unyov1.Object, name string) []*unyov1.Object {
	out := make([]*unyov1.Object, len(objs))
	for i, o := range objs {
		c := proto.Clone(o).(*unyov1.Object)
		kinds.SetCluster(c, name)
		out[i] = c
	}
	return out
}

func (s *objectService) Delete(ctx context.Context, req *connect.Request[unyov1.DeleteRequest]) (*connect.Response[unyov1.DeleteResponse], error) {
	refs := req.Msg.GetRefs()
	ks := make([]kinds.Kind, len(refs))
	for i, ref := range refs {
		k, err := refKind(s.r.opts.Kinds, fmt.Sprintf("refs[%d]", i), ref)
		if err := invalid(err); err != nil {
			return nil, err
		}
		ks[i] = k
	}
	if err := s.authorizeDelete(ctx, refs); err != nil {
		return nil, err
	}
	resp := &unyov1.DeleteResponse{}
	for i, ref := range refs {
		if own(ks[i]) || (ks[i].Everywhere && ref.GetCluster() == "") {
			if ks[i].Name == networkKind {
				if err := s.r.checkNetworkDelete(ctx, ref.GetName()); err != nil {
					return nil, err
				}
			}
			// Root's copy goes first: the clusters that miss the delete
			// below drop theirs when root next brings them up to date.
			// Services and computes are deleted by the service
			// controller, after their clusters removed the replicas.
			del := s.local.Delete
			switch ks[i].Name {
			case service.KindService:
				del = func(ctx context.Context, _ kinds.Kind, name string) (*unyov1.ApplyResult, error) {
					return s.r.deleteService(ctx, name)
				}
			case service.KindCompute:
				del = func(ctx context.Context, _ kinds.Kind, name string) (*unyov1.ApplyResult, error) {
					return s.r.deleteCompute(ctx, name)
				}
			}
			result, err := del(ctx, ks[i], ref.GetName())
			if err != nil {
				return nil, err
			}
			if own(ks[i]) || result.GetAction() != "not found" {
				resp.Results = append(resp.Results, result)
			}
			s.noteInventory([]*unyov1.ApplyResult{result})
			if own(ks[i]) {
				continue
			}
		}
		targets, err := s.r.targets(ctx, ref.GetCluster())
		if err != nil {
			return nil, err
		}
		answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) (*unyov1.DeleteResponse, error) {
			r := proto.Clone(ref).(*unyov1.ObjectRef)
			r.Cluster = name
			out, err := c.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{r}}))
			if err != nil {
				return nil, err
			}
			return out.Msg, nil
		})
		for _, a := range answers {
			resp.Results = append(resp.Results, a.value.GetResults()...)
		}
		if ks[i].Everywhere && ref.GetCluster() == "" {
			for _, e := range errs {
				e.Error += "; root no longer keeps the object and deletes this cluster's copy when it answers again"
			}
		}
		resp.ClusterErrors = append(resp.ClusterErrors, errs...)
	}
	return connect.NewResponse(resp), nil
}

func (s *objectService) Get(ctx context.Context, req *connect.Request[unyov1.GetRequest]) (*connect.Response[unyov1.GetResponse], error) {
	ref := req.Msg.GetRef()
	k, err := refKind(s.r.opts.Kinds, "ref", ref)
	if err := invalid(err); err != nil {
		return nil, err
	}
	if own(k) {
		if k.Name == networkKind {
			if o, ok, err := s.r.nodeLocal(ctx, ref.GetName()); ok {
				if err != nil {
					return nil, err
				}
				return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{o}}), nil
			}
		}
		o, err := s.local.Get(ctx, k, ref.GetName())
		if err == nil {
			err = s.r.showUsage(ctx, []*unyov1.Object{o})
		}
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{o}}), nil
	}
	targets, err := s.r.targets(ctx, ref.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Object, error) {
		r := proto.Clone(ref).(*unyov1.ObjectRef)
		r.Cluster = ""
		out, err := c.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: r}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil // absent there is not a failure of that cluster
		}
		if err != nil {
			return nil, err
		}
		return out.Msg.GetObjects(), nil
	})
	resp := &unyov1.GetResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Objects = append(resp.Objects, a.value...)
	}
	if len(resp.Objects) == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q not found in any cluster", ref.GetKind(), ref.GetName()))
	}
	return connect.NewResponse(resp), nil
}

func (s *objectService) List(ctx context.Context, req *connect.Request[unyov1.ListRequest]) (*connect.Response[unyov1.ListResponse], error) {
	k, err := kindOf(s.r.opts.Kinds, "kind", req.Msg.GetKind())
	if err := invalid(err); err != nil {
		return nil, err
	}
	if own(k) {
		objs, err := s.local.List(ctx, k)
		if err == nil {
			err = s.r.showUsage(ctx, objs)
		}
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&unyov1.ListResponse{Objects: objs}), nil
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Object, error) {
		out, err := c.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: req.Msg.GetKind()}))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetObjects(), nil
	})
	resp := &unyov1.ListResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Objects = append(resp.Objects, a.value...)
	}
	return connect.NewResponse(resp), nil
}

type nodeService struct{ r *Root }

func (s *nodeService) ListNodes(ctx context.Context, req *connect.Request[unyov1.ListNodesRequest]) (*connect.Response[unyov1.ListNodesResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Node, error) {
		out, err := c.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{}))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetNodes(), nil
	})
	resp := &unyov1.ListNodesResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Nodes = append(resp.Nodes, a.value...)
	}
	return connect.NewResponse(resp), nil
}

func (s *nodeService) GetNode(ctx context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	if err := invalid(limits.Required("name", req.Msg.GetName())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Node, error) {
		out, err := c.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: req.Msg.GetName()}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return out.Msg.GetNodes(), nil
	})
	resp := &unyov1.GetNodeResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Nodes = append(resp.Nodes, a.value...)
	}
	if len(resp.Nodes) == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found in any cluster", req.Msg.GetName()))
	}
	return connect.NewResponse(resp), nil
}

type eventService struct{ r *Root }

func (s *eventService) ListEvents(ctx context.Context, req *connect.Request[unyov1.ListEventsRequest]) (*connect.Response[unyov1.ListEventsResponse], error) {
	if err := invalid(limits.ListLimit("limit", req.Msg.GetLimit())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Event, error) {
		q := proto.Clone(req.Msg).(*unyov1.ListEventsRequest)
		q.Cluster = ""
		out, err := c.Events.ListEvents(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetEvents(), nil
	})
	resp := &unyov1.ListEventsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Events = append(resp.Events, a.value...)
	}
	if req.Msg.GetHistory() {
		// Merge the clusters' newest-first histories into one.
		sort.SliceStable(resp.Events, func(i, j int) bool {
			return resp.Events[i].GetStartedAt().AsTime().After(resp.Events[j].GetStartedAt().AsTime())
		})
		if l := int(req.Msg.GetLimit()); l > 0 && len(resp.Events) > l {
			resp.Events = resp.Events[:l]
		}
	}
	return connect.NewResponse(resp), nil
}

func (s *eventService) GetEvent(ctx context.Context, req *connect.Request[unyov1.GetEventRequest]) (*connect.Response[unyov1.GetEventResponse], error) {
	if err := invalid(limits.Required("id", req.Msg.GetId())); err != nil {
		return nil, err
	}
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	answers, errs := fanout(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Event, error) {
		out, err := c.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{Id: req.Msg.GetId()}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return out.Msg.GetEvents(), nil
	})
	resp := &unyov1.GetEventResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Events = append(resp.Events, a.value...)
	}
	if len(resp.Events) == 0 && len(errs) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("event %q not found in any cluster", req.Msg.GetId()))
	}
	return connect.NewResponse(resp), nil
}

type statusService struct{ r *Root }

func (s *statusService) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	return connect.NewResponse(&unyov1.GetStatusResponse{
		Role: "root", Version: s.r.opts.Version, StartedAt: timestamppb.New(s.r.started),
	}), nil
}
