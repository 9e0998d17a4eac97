package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func (c *Console) nodesPage(w http.ResponseWriter, r *http.Request, q *request) {
	cluster := r.URL.Query().Get("cluster")
	resp, err := q.api.nodes.ListNodes(r.Context(), connect.NewRequest(&unyov1.ListNodesRequest{Cluster: cluster}))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	c.render(w, r, q, "nodes.html", "Nodes", "nodes", map[string]any{"Cluster": cluster, "Nodes": resp.Msg.GetNodes()},
		clusterErrors(resp.Msg.GetClusterErrors()))
}

// sparkMetrics are the node page's sparklines: MetricsQL over the node's
// series in the cluster's TSDB (names from core/sysmetrics).
var sparkMetrics = []struct{ Label, Expr, Unit string }{
	{"CPU", `node_cpu_average_usage_ratio{node=%q}`, "ratio"},
	{"Memory", `1 - node_memory_MemAvailable_bytes{node=%q} / node_memory_MemTotal_bytes{node=%q}`, "ratio"},
	{"Load", `node_load1{node=%q}`, ""},
}

type spark struct {
	Label string
	Last  string
	SVG   string
	Error string
}

type nodeData struct {
	N        *unyov1.Node
	Events   []*unyov1.Event
	Alerts   []*unyov1.Alert
	Sparks   []spark
	Computes []*unyov1.Compute
}

// nodePage is one node: state, capacity and reservations, topology, last
// heartbeat, its checks' latest results, its alerts and sparklines.
func (c *Console) nodePage(w http.ResponseWriter, r *http.Request, q *request) {
	name, cluster := r.URL.Query().Get("name"), r.URL.Query().Get("cluster")
	resp, err := q.api.nodes.GetNode(r.Context(), connect.NewRequest(&unyov1.GetNodeRequest{Name: name, Cluster: cluster}))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	errs := clusterErrors(resp.Msg.GetClusterErrors())
	if len(resp.Msg.GetNodes()) == 0 {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, r, q, "error.html", "Node", "nodes", nil, append(errs, "node "+name+" was not found"))
		return
	}
	n := resp.Msg.GetNodes()[0]
	d := nodeData{N: n}
	ctx := r.Context()
	if ev, err := q.api.events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{Cluster: n.GetCluster(), Node: n.GetName(), Limit: 1000})); err != nil {
		errs = append(errs, "checks: "+message(err))
	} else {
		d.Events = ev.Msg.GetEvents()
	}
	if al, err := q.api.alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Cluster: n.GetCluster(), Node: n.GetName(), Limit: 1000})); err != nil {
		errs = append(errs, "alerts: "+message(err))
	} else {
		d.Alerts = al.Msg.GetAlerts()
	}
	if cs, cerrs, err := c.computes(r, q); err != nil {
		errs = append(errs, "computes: "+message(err))
	} else {
		errs = append(errs, cerrs...)
		d.Computes = computesOn(cs)[n.GetCluster()+"/"+n.GetName()]
	}
	end := time.Now()
	start := end.Add(-time.Hour)
	for _, m := range sparkMetrics {
		expr := fmt.Sprintf(m.Expr, n.GetName())
		if m.Label == "Memory" {
			expr = fmt.Sprintf(m.Expr, n.GetName(), n.GetName())
		}
		s := spark{Label: m.Label}
		res, err := q.api.metrics.QueryRange(ctx, connect.NewRequest(&unyov1.QueryRangeRequest{Cluster: n.GetCluster(), Expr: expr,
			Start: timestamppb.New(start), End: timestamppb.New(end), Step: durationpb.New(time.Minute)}))
		switch {
		case err != nil:
			s.Error = message(err)
		case len(res.Msg.GetSeries()) == 0:
			s.Error = "no samples in the last hour"
		default:
			pts := res.Msg.GetSeries()[0].GetPoints()
			s.SVG = sparkline(pts, 160, 32, m.Label+" over the last hour")
			if len(pts) > 0 {
				s.Last = formatValue(pts[len(pts)-1].GetValue(), m.Unit)
			}
		}
		d.Sparks = append(d.Sparks, s)
	}
	c.render(w, r, q, "node.html", "Node "+n.GetName(), "nodes", d, errs)
}

// nodeBack is a node's page, where its buttons return.
func nodeBack(r *http.Request) string {
	return "/node?" + url.Values{"name": {r.PostFormValue("name")}, "cluster": {r.PostFormValue("cluster")}}.Encode()
}

// nodeCordon cordons or uncordons a node (cordoned=1 or 0) as the
// operator, as `unyo nodes cordon|uncordon`.
func (c *Console) nodeCordon(w http.ResponseWriter, r *http.Request, q *request) {
	name, cordoned := r.PostFormValue("name"), r.PostFormValue("cordoned") == "1"
	verb := map[bool]string{true: "cordoned", false: "uncordoned"}[cordoned]
	resp, err := q.api.nodes.CordonNode(r.Context(), connect.NewRequest(&unyov1.CordonNodeRequest{Name: name, Cluster: r.PostFormValue("cluster"), Cordoned: cordoned}))
	if err != nil {
		c.done(w, r, q, nodeBack(r), false, "Node "+name+" not "+verb+": "+message(err))
		return
	}
	c.nodeActed(w, r, q, name, verb, resp.Msg.GetFound(), resp.Msg.GetChanged(), resp.Msg.GetClusterErrors())
}

// nodeDrain drains a node (or stops its drain, cancel=1) as the operator:
// NodeService.DrainNode, with the deadline and force the form gives.
func (c *Console) nodeDrain(w http.ResponseWriter, r *http.Request, q *request) {
	name, cancel := r.PostFormValue("name"), r.PostFormValue("cancel") == "1"
	deadline := strings.TrimSpace(r.PostFormValue("deadline"))
	if deadline != "" {
		if d, err := time.ParseDuration(deadline); err != nil || d <= 0 {
			c.done(w, r, q, nodeBack(r), false, fmt.Sprintf("Deadline: %q is not a duration (1h, 30m).", deadline))
			return
		}
	}
	verb := map[bool]string{true: "stopped draining", false: "draining"}[cancel]
	resp, err := q.api.nodes.DrainNode(r.Context(), connect.NewRequest(&unyov1.DrainNodeRequest{Name: name, Cluster: r.PostFormValue("cluster"),
		Deadline: deadline, Force: r.PostFormValue("force") == "1", Cancel: cancel}))
	if err != nil {
		c.done(w, r, q, nodeBack(r), false, "Node "+name+" not "+verb+": "+message(err))
		return
	}
	c.nodeActed(w, r, q, name, verb, resp.Msg.GetFound(), resp.Msg.GetChanged(), resp.Msg.GetClusterErrors())
}

// nodeActed reports a node action's answer: not found, already so, or
// done; a cluster that did not answer is a failure.
func (c *Console) nodeActed(w http.ResponseWriter, r *http.Request, q *request, name, verb string, found, changed int32, cerrs []*unyov1.ClusterError) {
	problems := clusterErrors(cerrs)
	switch {
	case len(problems) > 0:
		c.done(w, r, q, nodeBack(r), false, "Node "+name+" not "+verb+": "+strings.Join(problems, "; "))
	case found == 0:
		c.done(w, r, q, nodeBack(r), false, "Node "+name+" was not found.")
	case changed == 0:
		c.done(w, r, q, nodeBack(r), true, "Node "+name+" was already "+verb+".")
	default:
		c.done(w, r, q, nodeBack(r), true, "Node "+name+" "+verb+" by "+q.sess.principal.String()+".")
	}
}
