package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func (c *Console) listObjects(r *http.Request, q *request, kind, cluster string) ([]*unyov1.Object, []string, error) {
	resp, err := q.api.objects.List(r.Context(), connect.NewRequest(&unyov1.ListRequest{Kind: kind, Cluster: cluster}))
	if err != nil {
		return nil, nil, err
	}
	return resp.Msg.GetObjects(), clusterErrors(resp.Msg.GetClusterErrors()), nil
}

// rulesPage lists the event rules with how often each matched.
func (c *Console) rulesPage(w http.ResponseWriter, r *http.Request, q *request) {
	objs, errs, err := c.listObjects(r, q, "EventRule", r.URL.Query().Get("cluster"))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	var rules []*unyov1.EventRule
	for _, o := range objs {
		if er := o.GetEventRule(); er != nil {
			rules = append(rules, er)
		}
	}
	c.render(w, r, q, "rules.html", "Rules", "rules", rules, errs)
}

type maintRow struct {
	M      *unyov1.Maintenance
	Active bool
}

// maintenancePage lists maintenances, the open ones first, with how many
// events each silenced, and a form to start one.
func (c *Console) maintenancePage(w http.ResponseWriter, r *http.Request, q *request) {
	objs, errs, err := c.listObjects(r, q, "Maintenance", r.URL.Query().Get("cluster"))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	var open, ended []maintRow
	now := time.Now()
	for _, o := range objs {
		m := o.GetMaintenance()
		if m == nil {
			continue
		}
		over := m.GetEndedAt() != nil
		if e := m.GetSpec().GetEnd(); e != "" {
			if t, err := time.Parse(time.RFC3339, e); err == nil && t.Before(now) {
				over = true
			}
		}
		if over {
			ended = append(ended, maintRow{M: m})
		} else {
			open = append(open, maintRow{M: m, Active: true})
		}
	}
	c.render(w, r, q, "maintenance.html", "Maintenance", "maintenance", map[string]any{"Rows": append(open, ended...)}, errs)
}

// maintenanceStart applies a Maintenance object, as `unyo maintenance
// start` does.
func (c *Console) maintenanceStart(w http.ResponseWriter, r *http.Request, q *request) {
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	spec := &unyov1.MaintenanceSpec{Reason: f("reason"), Owner: q.sess.principal.String(), Nodes: fields(f("nodes")), Checks: fields(f("checks"))}
	now := time.Now().UTC()
	spec.Start = now.Format(time.RFC3339)
	if d := f("for"); d != "" {
		dd, err := time.ParseDuration(d)
		if err != nil || dd <= 0 {
			c.done(w, r, q, "/maintenance", false, fmt.Sprintf("Duration %q: give one such as 2h or 30m.", d))
			return
		}
		spec.End = now.Add(dd).Format(time.RFC3339)
	}
	if spec.Reason == "" {
		c.done(w, r, q, "/maintenance", false, "A maintenance needs a reason: say what is being done.")
		return
	}
	name := f("name")
	if name == "" {
		name = "m-" + now.Format("20060102-150405")
	}
	m := &unyov1.Maintenance{Name: name, Cluster: f("cluster"), Spec: spec}
	resp, err := q.api.objects.Apply(r.Context(), connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{{Kind: &unyov1.Object_Maintenance{Maintenance: m}}}}))
	if err != nil {
		c.done(w, r, q, "/maintenance", false, "Not started: "+message(err))
		return
	}
	msg := fmt.Sprintf("Maintenance %s started by %s.", name, q.sess.principal.String())
	if errs := clusterErrors(resp.Msg.GetClusterErrors()); len(errs) > 0 {
		msg += " " + strings.Join(errs, "; ")
	}
	c.done(w, r, q, "/maintenance", true, msg)
}

// maintenanceEnd ends an open maintenance now.
func (c *Console) maintenanceEnd(w http.ResponseWriter, r *http.Request, q *request) {
	name, cluster := r.PostFormValue("name"), r.PostFormValue("cluster")
	_, err := q.api.maintenance.EndMaintenance(r.Context(), connect.NewRequest(&unyov1.EndMaintenanceRequest{Name: name, Cluster: cluster}))
	if err != nil {
		c.done(w, r, q, "/maintenance", false, "Not ended: "+message(err))
		return
	}
	c.done(w, r, q, "/maintenance", true, fmt.Sprintf("Maintenance %s ended by %s.", name, q.sess.principal.String()))
}

// fields splits a list typed as "a, b c".
func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}
