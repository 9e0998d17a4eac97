package web

import (
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

type eventsData struct {
	Cluster, Node, Check string
	Levels               []string
	History              bool
	Limit                int
	Events               []*unyov1.Event
	AllLevels            []string
}

// eventsPage lists the latest event per node and check (or the history),
// filtered as `unyo events ls` is.
func (c *Console) eventsPage(w http.ResponseWriter, r *http.Request, q *request) {
	v := r.URL.Query()
	d := eventsData{Cluster: v.Get("cluster"), Node: v.Get("node"), Check: v.Get("check"), History: v.Get("history") == "1",
		AllLevels: []string{"success", "warning", "critical"}}
	d.Limit, _ = strconv.Atoi(v.Get("limit"))
	if d.Limit <= 0 || d.Limit > 10000 {
		d.Limit = 500
	}
	req := &unyov1.ListEventsRequest{Cluster: d.Cluster, Node: d.Node, Check: d.Check, History: d.History, Limit: int32(d.Limit)}
	for _, l := range v["level"] {
		if l == "" {
			continue
		}
		lv, err := unyov1.ParseLevel(l)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			c.render(w, r, q, "error.html", "Events", "events", nil, []string{err.Error()})
			return
		}
		d.Levels = append(d.Levels, l)
		req.Levels = append(req.Levels, lv)
	}
	resp, err := q.api.events.ListEvents(r.Context(), connect.NewRequest(req))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	d.Events = resp.Msg.GetEvents()
	c.render(w, r, q, "events.html", "Events", "events", d, clusterErrors(resp.Msg.GetClusterErrors()))
}

// eventPage is one event and its explanation: which rules and
// maintenance matched, what was done, how webhooks fared.
func (c *Console) eventPage(w http.ResponseWriter, r *http.Request, q *request) {
	id, cluster := r.URL.Query().Get("id"), r.URL.Query().Get("cluster")
	resp, err := q.api.events.GetEvent(r.Context(), connect.NewRequest(&unyov1.GetEventRequest{Id: id, Cluster: cluster}))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	errs := clusterErrors(resp.Msg.GetClusterErrors())
	if len(resp.Msg.GetEvents()) == 0 {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, r, q, "error.html", "Event", "events", nil, append(errs, "event "+id+" was not found"))
		return
	}
	c.render(w, r, q, "event.html", "Event "+id, "events", resp.Msg.GetEvents()[0], errs)
}
