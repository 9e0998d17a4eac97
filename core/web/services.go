package web

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/provision/service"
)

// servicesPage lists the RegionServices with their status, as `unyo
// services ls` does.
func (c *Console) servicesPage(w http.ResponseWriter, r *http.Request, q *request) {
	objs, errs, err := c.listObjects(r, q, service.KindService, "")
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	var ss []*unyov1.RegionService
	for _, o := range objs {
		if s := o.GetRegionService(); s != nil {
			ss = append(ss, s)
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].GetName() < ss[j].GetName() })
	c.render(w, r, q, "services.html", "Services", "services", ss, errs)
}

// computes are the Computes root holds (`unyo computes ls`), each with
// its cluster's status, in service and index order.
func (c *Console) computes(r *http.Request, q *request) ([]*unyov1.Compute, []string, error) {
	objs, errs, err := c.listObjects(r, q, service.KindCompute, "")
	if err != nil {
		return nil, nil, err
	}
	var out []*unyov1.Compute
	for _, o := range objs {
		if cp := o.GetCompute(); cp != nil {
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetService() != out[j].GetService() {
			return out[i].GetService() < out[j].GetService()
		}
		return out[i].GetIndex() < out[j].GetIndex()
	})
	return out, errs, nil
}

// computesOn groups computes by the node they are placed on
// ("cluster/node").
func computesOn(cs []*unyov1.Compute) map[string][]*unyov1.Compute {
	m := map[string][]*unyov1.Compute{}
	for _, cp := range cs {
		if n := cp.GetStatus().GetNode(); n != "" {
			k := cp.GetCluster() + "/" + n
			m[k] = append(m[k], cp)
		}
	}
	return m
}

// computeHref is a compute's row on its service's page.
func computeHref(cp *unyov1.Compute) string {
	return "/service?" + url.Values{"name": {cp.GetService()}}.Encode() + "#c-" + cp.GetName()
}

type serviceData struct {
	S        *unyov1.RegionService
	Computes []*unyov1.Compute
	// Plan is where the replicas would go as if the service were new
	// (`unyo services plan`); PlanError says why there is none.
	Plan      []service.PlanLine
	PlanError string
	// LB is the service's load balancer (nil without one), and LBBackends
	// its backends with what its provider reports of each.
	LB         *unyov1.Loadbalancer
	LBBackends []lbBackend
}

// lbBackend is a row of a service's load-balancer backends.
type lbBackend struct {
	Compute, Address, Healthy, Reason string
	Packets, Bytes                    uint64
}

// loadbalancer reads the service's load balancer, nil when it has none.
func (c *Console) loadbalancer(r *http.Request, q *request, svc string) (*unyov1.Loadbalancer, []lbBackend, error) {
	resp, err := q.api.objects.Get(r.Context(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindLoadbalancer, Name: service.LoadbalancerName(svc)}}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var l *unyov1.Loadbalancer
	for _, o := range resp.Msg.GetObjects() {
		if x := o.GetLoadbalancer(); x != nil {
			l = x
		}
	}
	seen := map[string]*unyov1.LoadbalancerBackendStatus{}
	for _, b := range l.GetStatus().GetBackends() {
		seen[b.GetCompute()] = b
	}
	var rows []lbBackend
	for _, b := range l.GetBackends() {
		row := lbBackend{Compute: b.GetCompute(), Address: b.GetAddress(), Healthy: "unknown"}
		if st := seen[b.GetCompute()]; st != nil {
			row.Healthy, row.Reason, row.Packets, row.Bytes = "no", st.GetReason(), st.GetPackets(), st.GetBytes()
			if st.GetHealthy() {
				row.Healthy = "yes"
			}
		}
		rows = append(rows, row)
	}
	return l, rows, nil
}

// servicePage is one RegionService: its spec, every replica with where it
// is placed and why not, a plan, and (for operators) a scale form. The
// replicas' table refreshes itself while the page is open.
func (c *Console) servicePage(w http.ResponseWriter, r *http.Request, q *request) {
	name := r.URL.Query().Get("name")
	resp, err := q.api.objects.Get(r.Context(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindService, Name: name}}))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	errs := clusterErrors(resp.Msg.GetClusterErrors())
	var s *unyov1.RegionService
	if objs := resp.Msg.GetObjects(); len(objs) > 0 {
		s = objs[0].GetRegionService()
	}
	if s == nil {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, r, q, "error.html", "Service", "services", nil, append(errs, "service "+name+" was not found"))
		return
	}
	d := serviceData{S: s}
	all, cerrs, err := c.computes(r, q)
	if err != nil {
		errs = append(errs, "computes: "+message(err))
	}
	errs = append(errs, cerrs...)
	for _, cp := range all {
		if cp.GetService() == s.GetName() {
			d.Computes = append(d.Computes, cp)
		}
	}
	if d.LB, d.LBBackends, err = c.loadbalancer(r, q, s.GetName()); err != nil {
		errs = append(errs, "load balancer: "+message(err))
	}
	// A refresh redraws only the replicas: no plan to compute.
	if !q.refresh {
		if d.Plan, err = c.plan(r, q, s); err != nil {
			d.PlanError = err.Error()
		}
	}
	c.render(w, r, q, "service.html", "Service "+s.GetName(), "services", d, errs)
}

// plan runs `unyo services plan` for a stored service: the cluster and
// node stages over the clusters and nodes as they are now.
func (c *Console) plan(r *http.Request, q *request, s *unyov1.RegionService) ([]service.PlanLine, error) {
	ctx := r.Context()
	flavor := s.GetSpec().GetCompute().GetFlavor()
	fr, err := q.api.objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Flavor", Name: flavor}}))
	if err != nil {
		return nil, fmt.Errorf("flavor %q: %s", flavor, message(err))
	}
	if len(fr.Msg.GetObjects()) == 0 {
		return nil, fmt.Errorf("flavor %q was not found", flavor)
	}
	shape, err := service.Shape(fr.Msg.GetObjects()[0].GetFlavor())
	if err != nil {
		return nil, fmt.Errorf("flavor %q: %w", flavor, err)
	}
	clusters, err := q.api.clusters.ListClusters(ctx, connect.NewRequest(&unyov1.ListClustersRequest{}))
	if err != nil {
		return nil, fmt.Errorf("clusters: %s", message(err))
	}
	nodes, err := q.api.nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{}))
	if err != nil {
		return nil, fmt.Errorf("nodes: %s", message(err))
	}
	return service.Plan(s, shape, service.ClustersOf(clusters.Msg.GetClusters(), nodes.Msg.GetNodes())), nil
}

// serviceScale sets a service's replicas, as `unyo services scale`: the
// service is read, its count changed and applied back as the operator.
func (c *Console) serviceScale(w http.ResponseWriter, r *http.Request, q *request) {
	name := r.PostFormValue("name")
	back := "/service?" + url.Values{"name": {name}}.Encode()
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("replicas")))
	if err != nil || n < 0 {
		c.done(w, r, q, back, false, fmt.Sprintf("Replicas: %q is not a replica count (a whole number, 0 or more).", r.PostFormValue("replicas")))
		return
	}
	resp, err := q.api.objects.Get(r.Context(), connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindService, Name: name}}))
	if err != nil {
		c.done(w, r, q, back, false, "Not scaled: "+message(err))
		return
	}
	var s *unyov1.RegionService
	if objs := resp.Msg.GetObjects(); len(objs) > 0 {
		s = objs[0].GetRegionService()
	}
	if s.GetSpec().GetCompute() == nil {
		c.done(w, r, q, back, false, "Not scaled: service "+name+" has no compute spec to scale.")
		return
	}
	s.Spec.Compute.Replicas = int32(n)
	s.Status = nil
	if _, err := q.api.objects.Apply(r.Context(), connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(s)}})); err != nil {
		c.done(w, r, q, back, false, "Not scaled: "+message(err))
		return
	}
	if n == 0 {
		back = "/services"
	}
	c.done(w, r, q, back, true, fmt.Sprintf("Service %s scaled to %d replica(s) by %s.", name, n, q.sess.principal.String()))
}
