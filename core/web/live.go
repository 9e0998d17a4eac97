package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// view is what an alerts page was rendered from: each row's hash and
// group by key. The page's live stream diffs the API's answers against it,
// so the page gets exactly the rows that changed since it was rendered,
// nothing missed between render and connect.
type view struct {
	query alertQuery
	rows  map[string]viewRow
	added time.Time
}

type viewRow struct {
	hash  uint64
	group string
}

// maxViews bounds the views a session keeps for pages that have not
// connected their streams yet (or reconnect after a drop).
const maxViews = 4

func (s *sessions) addView(ss *session, v *view) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.added = s.now()
	id := randomID()[:16]
	for len(ss.views) >= maxViews {
		var oldest string
		for k, x := range ss.views {
			if oldest == "" || x.added.Before(ss.views[oldest].added) {
				oldest = k
			}
		}
		delete(ss.views, oldest)
	}
	ss.views[id] = v
	return id
}

// takeView hands a view to the stream that shows it; putView gives it back
// when the stream ends, so that a reconnecting page resumes from it.
func (s *sessions) takeView(ss *session, id string) *view {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := ss.views[id]
	delete(ss.views, id)
	return v
}

func (s *sessions) putView(ss *session, id string, v *view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.added = s.now()
	ss.views[id] = v
}

// liveMsg is one update of an open alerts page: rows to remove, rows to
// put (each after the row before it in its group, in order), and the
// groups with their counts in the order shown.
type liveMsg struct {
	Remove []string    `json:"remove,omitempty"`
	Upsert []liveRow   `json:"upsert,omitempty"`
	Groups []liveGroup `json:"groups"`
	Total  int         `json:"total"`
	Errors []string    `json:"errors"`
}

type liveRow struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	After string `json:"after"`
	HTML  string `json:"html"`
}

type liveGroup struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	Class string `json:"class"`
	Count int    `json:"count"`
}

// alertsLive streams an alerts page's changes as server-sent events: it
// asks the API every LiveInterval and sends what changed.
func (c *Console) alertsLive(w http.ResponseWriter, r *http.Request, q *request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	// The server's read and write timeouts would cut the stream; it ends
	// with the page instead (and a cut stream resumes from its view).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	send := func(event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	id := r.URL.Query().Get("view")
	v := c.sessions.takeView(q.sess, id)
	if v == nil {
		send("reload", "the page is older than the console's memory of it")
		return
	}
	defer c.sessions.putView(q.sess, id, v)
	// Headers go now, so that the page knows it is live before any change.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	fl.Flush()
	mayAct := q.mayAct()
	tick := time.NewTicker(c.opts.LiveInterval)
	defer tick.Stop()
	lastSent := time.Now()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		// A stream keeps its session alive (a wall display), and ends with it.
		if c.sessions.get(q.id) == nil {
			send("logout", "the session ended")
			return
		}
		as, errs, err := c.listAlerts(r, q, v.query)
		if connect.CodeOf(err) == connect.CodeUnauthenticated {
			send("logout", message(err))
			return
		}
		if err != nil {
			if !send("problem", message(err)) {
				return
			}
			continue
		}
		msg, changed := diff(v, arrange(as, v.query.Group), mayAct)
		msg.Errors = errs
		if changed {
			if !send("alerts", msg) {
				return
			}
			lastSent = time.Now()
		} else if time.Since(lastSent) > 15*time.Second {
			// A comment keeps proxies from closing an idle stream.
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
			lastSent = time.Now()
		}
	}
}

// diff turns the new grouping into the update of a page showing v, and
// makes v the new state.
func diff(v *view, groups []alertGroup, mayAct bool) (liveMsg, bool) {
	msg := liveMsg{Groups: make([]liveGroup, 0, len(groups))}
	next := make(map[string]viewRow, len(v.rows))
	var b bytes.Buffer
	for _, g := range groups {
		msg.Groups = append(msg.Groups, liveGroup{Key: g.Key, Label: g.Label, Class: g.Class, Count: len(g.Rows)})
		msg.Total += len(g.Rows)
		after := ""
		for _, row := range g.Rows {
			next[row.Key] = viewRow{hash: row.hash, group: row.Group}
			if old, ok := v.rows[row.Key]; !ok || old != next[row.Key] {
				b.Reset()
				row.MayAct = mayAct
				renderRow(&b, row)
				msg.Upsert = append(msg.Upsert, liveRow{Key: row.Key, Group: row.Group, After: after, HTML: b.String()})
			}
			after = row.Key
		}
	}
	for k := range v.rows {
		if _, ok := next[k]; !ok {
			msg.Remove = append(msg.Remove, k)
		}
	}
	v.rows = next
	return msg, len(msg.Upsert)+len(msg.Remove) > 0
}
