package web

import (
	"fmt"
	"net/http"
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
	N      *unyov1.Node
	Events []*unyov1.Event
	Alerts []*unyov1.Alert
	Sparks []spark
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
