package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// alertQuery is the alerts page's filters and grouping, from its URL.
type alertQuery struct {
	Cluster, Node, Check string
	Levels               []string
	All                  bool // closed alerts too
	Group                string
}

var groupings = []string{"level", "cluster", "check", "node"}

func parseAlertQuery(v url.Values) (alertQuery, error) {
	q := alertQuery{Cluster: v.Get("cluster"), Node: v.Get("node"), Check: v.Get("check"), Group: v.Get("group"), All: v.Get("all") == "1"}
	if q.Group == "" {
		q.Group = "level"
	}
	ok := false
	for _, g := range groupings {
		ok = ok || g == q.Group
	}
	if !ok {
		return q, fmt.Errorf("group %q: group by one of %s", q.Group, strings.Join(groupings, ", "))
	}
	for _, l := range v["level"] {
		if l != "" {
			q.Levels = append(q.Levels, l)
		}
	}
	return q, nil
}

func (aq alertQuery) request() (*unyov1.ListAlertsRequest, error) {
	req := &unyov1.ListAlertsRequest{Cluster: aq.Cluster, Node: aq.Node, Check: aq.Check, Limit: 10000}
	for _, l := range aq.Levels {
		lv, err := unyov1.ParseAlertLevel(l)
		if err != nil {
			return nil, err
		}
		req.Levels = append(req.Levels, lv)
	}
	if aq.All {
		for _, s := range []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED, unyov1.AlertState_ALERT_STATE_RESOLVED, unyov1.AlertState_ALERT_STATE_CLOSED} {
			req.States = append(req.States, s)
		}
	}
	return req, nil
}

// Values is the query's URL form, for the live stream and links.
func (aq alertQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("cluster", aq.Cluster)
	set("node", aq.Node)
	set("check", aq.Check)
	set("group", aq.Group)
	if aq.All {
		v.Set("all", "1")
	}
	for _, l := range aq.Levels {
		v.Add("level", l)
	}
	return v
}

// alertRow is one alert as listed: its key (cluster/id) and group.
type alertRow struct {
	Key   string
	Group string
	A     *unyov1.Alert
	// MayAct shows the row's selection box for ack and close.
	MayAct bool
	hash   uint64
}

type alertGroup struct {
	Key   string
	Label string
	Class string
	Rows  []alertRow
}

func alertKey(a *unyov1.Alert) string { return a.GetCluster() + "/" + a.GetId() }

// groupOf is the group an alert is listed under, and its CSS class.
func groupOf(a *unyov1.Alert, by string) (key, class string) {
	switch by {
	case "cluster":
		return a.GetCluster(), "grp"
	case "check":
		return a.GetCheck(), "grp"
	case "node":
		return a.GetNode(), "grp"
	}
	n := a.GetLevel().Name()
	return n, "lvl-" + n
}

// rowHash changes whenever what a row shows changes. It is FNV-1a,
// computed inline: through hash.Hash every string would be copied.
func rowHash(a *unyov1.Alert) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for _, s := range [...]string{a.GetCluster(), a.GetId(), a.GetNode(), a.GetCheck(), a.GetSummary(), a.GetRule()} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h *= prime // the separator, a zero byte
	}
	for _, v := range [...]int64{int64(a.GetLevel()), int64(a.GetState()), a.GetCount(), a.GetFirstSeen().GetSeconds(), a.GetLastSeen().GetSeconds(), int64(len(a.GetHistory()))} {
		for i := 0; i < 8; i++ {
			h = (h ^ uint64(byte(v>>(8*i)))) * prime
		}
	}
	return h
}

// arrange sorts alerts most severe and oldest first (as `unyo alerts ls`)
// and groups them, groups in the order of their first alert.
func arrange(as []*unyov1.Alert, by string) []alertGroup {
	alerts.Sort(as)
	var groups []alertGroup
	index := map[string]int{}
	for _, a := range as {
		k, class := groupOf(a, by)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, alertGroup{Key: k, Label: k, Class: class})
		}
		groups[i].Rows = append(groups[i].Rows, alertRow{Key: alertKey(a), Group: k, A: a, hash: rowHash(a)})
	}
	for i := range groups {
		if groups[i].Label == "" {
			groups[i].Label = "(none)"
		}
	}
	return groups
}

func (c *Console) listAlerts(r *http.Request, q *request, aq alertQuery) ([]*unyov1.Alert, []string, error) {
	req, err := aq.request()
	if err != nil {
		return nil, nil, err
	}
	resp, err := q.api.alerts.ListAlerts(r.Context(), connect.NewRequest(req))
	if err != nil {
		return nil, nil, err
	}
	return resp.Msg.GetAlerts(), clusterErrors(resp.Msg.GetClusterErrors()), nil
}

type alertsData struct {
	Q         alertQuery
	Groups    []alertGroup
	Total     int
	View      string
	Levels    []string
	Groupings []string
}

func (c *Console) alertsPage(w http.ResponseWriter, r *http.Request, q *request) {
	aq, err := parseAlertQuery(r.URL.Query())
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, r, q, "error.html", "Alerts", "alerts", nil, []string{err.Error()})
		return
	}
	as, errs, err := c.listAlerts(r, q, aq)
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	groups := arrange(as, aq.Group)
	for _, g := range groups {
		for i := range g.Rows {
			g.Rows[i].MayAct = q.mayAct()
		}
	}
	v := &view{query: aq, rows: make(map[string]viewRow, len(as))}
	for _, g := range groups {
		for _, row := range g.Rows {
			v.rows[row.Key] = viewRow{hash: row.hash, group: row.Group}
		}
	}
	d := alertsData{Q: aq, Groups: groups, Total: len(as), View: c.sessions.addView(q.sess, v),
		Levels: []string{"fatal", "critical", "warning"}, Groupings: groupings}
	c.writeAlertsPage(w, q, d, errs)
}

// rowSize is about what renderRow writes for one alert.
const rowSize = 640

// writeAlertsPage renders the alerts page into one buffer sized for it:
// the template's head, then each group's rows written by renderRow
// straight into the page (not through the template, which would copy each
// group's rows twice more), then the template's end. With 10,000 alerts
// the page is 5.5 MB; growing the buffer and copying it is what cost most.
func (c *Console) writeAlertsPage(w http.ResponseWriter, q *request, d alertsData, errs []string) {
	p := c.page(q, fmt.Sprintf("Alerts (%d)", d.Total), "alerts", d, errs)
	// A page's buffer is reused by the next: a fresh 6 MB one costs its
	// zeroing and page faults every time.
	b, _ := c.pageBufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	defer func() {
		b.Reset()
		c.pageBufs.Put(b)
	}()
	b.Grow(16<<10 + d.Total*rowSize)
	if err := c.tmpl.ExecuteTemplate(b, "alerts.html", p); err != nil {
		c.renderFailed(w, "alerts.html", err)
		return
	}
	for _, g := range d.Groups {
		if err := c.tmpl.ExecuteTemplate(b, "group-open", g); err != nil {
			c.renderFailed(w, "group-open", err)
			return
		}
		for _, row := range g.Rows {
			renderRow(b, row)
		}
		b.WriteString("</tbody>\n</table>\n</section>\n")
	}
	if err := c.tmpl.ExecuteTemplate(b, "alerts-end.html", p); err != nil {
		c.renderFailed(w, "alerts-end.html", err)
		return
	}
	writePage(w, b.Bytes())
}

// htmlEscaper escapes as html.EscapeString does, writing into the page
// rather than allocating a string per value.
var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;")

// escape writes s HTML-escaped; most values need no escaping and are
// written as they are.
func escape(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '\'', '<', '>', '"':
			_, _ = htmlEscaper.WriteString(b, s)
			return
		}
	}
	b.WriteString(s)
}

// renderRow writes one alert's table row, as the page and the live
// stream both show it. It is written by hand rather than by html/template,
// whose reflection costs about 60 µs a row: the page must render 10,000
// alerts in well under 300 ms. Every value goes through escape.
func renderRow(b *bytes.Buffer, row alertRow) {
	a := row.A
	level, state := a.GetLevel().Name(), a.GetState().Name()
	b.WriteString(`<tr id="a-`)
	escape(b, row.Key)
	b.WriteString(`" class="st-`)
	b.WriteString(state)
	b.WriteString(`"><td>`)
	if row.MayAct {
		b.WriteString(`<input type="checkbox" form="bulk" name="sel" value="`)
		escape(b, row.Key)
		b.WriteString(`" aria-label="select `)
		escape(b, a.GetKey())
		b.WriteString(` in `)
		escape(b, a.GetCluster())
		b.WriteString(`">`)
	}
	b.WriteString(`</td><td><span class="badge lvl-`)
	b.WriteString(level)
	b.WriteString(`">`)
	b.WriteString(level)
	b.WriteString(`</span></td><td>`)
	b.WriteString(state)
	for _, v := range [...]string{a.GetCluster(), a.GetNode(), a.GetCheck()} {
		b.WriteString(`</td><td>`)
		escape(b, v)
	}
	// The link's query as url.Values.Encode writes it (keys sorted).
	b.WriteString(`</td><td><a href="/alert?cluster=`)
	escape(b, url.QueryEscape(a.GetCluster()))
	b.WriteString(`&amp;id=`)
	escape(b, url.QueryEscape(a.GetId()))
	b.WriteString(`">`)
	escape(b, a.GetSummary())
	b.WriteString(`</a>`)
	for _, t := range [...]*timestamppb.Timestamp{a.GetFirstSeen(), a.GetLastSeen()} {
		b.WriteString(`</td><td>`)
		writeTimes(b, t)
	}
	b.WriteString(`</td><td>`)
	b.Write(strconv.AppendInt(b.AvailableBuffer(), a.GetCount(), 10))
	b.WriteString("</td></tr>\n")
}

// writeTimes writes t's <time> element as ts and iso show it (in UTC, to
// the second), with the digits put down by hand: time.Format was a third
// of the rows' cost.
func writeTimes(b *bytes.Buffer, t *timestamppb.Timestamp) {
	b.WriteString(`<time datetime="`)
	if t != nil {
		writeUTC(b, t.AsTime(), 'T')
	}
	b.WriteString(`">`)
	if t == nil || (t.GetSeconds() == 0 && t.GetNanos() == 0) {
		b.WriteByte('-')
	} else {
		writeUTC(b, t.AsTime(), ' ')
	}
	b.WriteString(`</time>`)
}

// writeUTC writes t as 2006-01-02T15:04:05Z with sep between the date and
// the time; a year outside 0-9999 goes through time.Format.
func writeUTC(b *bytes.Buffer, t time.Time, sep byte) {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	if y < 0 || y > 9999 {
		b.WriteString(t.Format("2006-01-02" + string(sep) + "15:04:05Z"))
		return
	}
	var buf [20]byte
	two := func(i, v int) { buf[i], buf[i+1] = byte('0'+v/10), byte('0'+v%10) }
	two(0, y/100)
	two(2, y%100)
	buf[4] = '-'
	two(5, int(mo))
	buf[7] = '-'
	two(8, d)
	buf[10] = sep
	two(11, h)
	buf[13] = ':'
	two(14, mi)
	buf[16] = ':'
	two(17, s)
	buf[19] = 'Z'
	b.Write(buf[:])
}

// groupRows renders a group's rows for the page's template.
func groupRows(g alertGroup) template.HTML {
	var b bytes.Buffer
	b.Grow(len(g.Rows) * rowSize)
	for _, row := range g.Rows {
		renderRow(&b, row)
	}
	return template.HTML(b.String()) // every value escaped by renderRow
}

// alertsAct acknowledges or closes the selected alerts, each through the
// API as the operator (who is recorded in the alert's history).
func (c *Console) alertsAct(w http.ResponseWriter, r *http.Request, q *request) {
	action := r.PostFormValue("action")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	back := localPath(r.PostFormValue("back"), "/alerts")
	sel := r.PostForm["sel"]
	if len(sel) == 0 {
		c.done(w, r, q, back, false, "Select one or more alerts first.")
		return
	}
	if action == "close" && reason == "" {
		c.done(w, r, q, back, false, "Closing needs a reason: say what was done.")
		return
	}
	var failed []string
	n := 0
	for _, s := range sel {
		cluster, id, ok := strings.Cut(s, "/")
		if !ok || id == "" {
			failed = append(failed, fmt.Sprintf("%q is not an alert (cluster/id)", s))
			continue
		}
		req := connect.NewRequest(&unyov1.AlertActionRequest{Id: id, Cluster: cluster, Reason: reason})
		var err error
		switch action {
		case "ack":
			_, err = q.api.alerts.AckAlert(r.Context(), req)
		case "close":
			_, err = q.api.alerts.CloseAlert(r.Context(), req)
		default:
			c.done(w, r, q, back, false, "Unknown action "+action)
			return
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %s", s, message(err)))
			continue
		}
		n++
	}
	verb := map[string]string{"ack": "Acknowledged", "close": "Closed"}[action]
	msg := fmt.Sprintf("%s %d alert(s) as %s.", verb, n, q.sess.principal.String())
	if len(failed) > 0 {
		if n == 0 {
			msg = "Nothing done."
		}
		msg += " Refused: " + strings.Join(failed, "; ")
	}
	c.done(w, r, q, back, len(failed) == 0, msg)
}

type alertData struct {
	A      *unyov1.Alert
	Events []*unyov1.Event
}

// alertPage is one alert: what it is, its history and the events behind it.
func (c *Console) alertPage(w http.ResponseWriter, r *http.Request, q *request) {
	id, cluster := r.URL.Query().Get("id"), r.URL.Query().Get("cluster")
	resp, err := q.api.alerts.GetAlert(r.Context(), connect.NewRequest(&unyov1.GetAlertRequest{Id: id, Cluster: cluster}))
	if err != nil {
		c.apiFailed(w, r, q, err)
		return
	}
	errs := clusterErrors(resp.Msg.GetClusterErrors())
	if len(resp.Msg.GetAlerts()) == 0 {
		w.WriteHeader(http.StatusBadGateway)
		c.render(w, r, q, "error.html", "Alert", "alerts", nil, errs)
		return
	}
	a := resp.Msg.GetAlerts()[0]
	d := alertData{A: a}
	ev, err := q.api.events.ListEvents(r.Context(), connect.NewRequest(&unyov1.ListEventsRequest{
		Cluster: a.GetCluster(), Node: a.GetNode(), Check: a.GetCheck(), History: true, Limit: 50}))
	if err != nil {
		errs = append(errs, "the events behind it: "+message(err))
	} else {
		errs = append(errs, clusterErrors(ev.Msg.GetClusterErrors())...)
		since := a.GetFirstSeen().AsTime().Add(-time.Hour)
		for _, e := range ev.Msg.GetEvents() {
			if e.GetStartedAt().AsTime().After(since) || e.GetId() == a.GetLastEventId() {
				d.Events = append(d.Events, e)
			}
		}
	}
	c.render(w, r, q, "alert.html", "Alert "+a.GetKey(), "alerts", d, errs)
}
