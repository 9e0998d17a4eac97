package web_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

var pages = []string{"/alerts", "/events", "/nodes", "/rules", "/maintenance", "/racks", "/networks", "/graph",
	"/alert?id=a1&cluster=c1", "/event?id=ev-a1&cluster=c1", "/node?name=n1&cluster=c1",
	"/racks?floor=floor-1-1-1", "/networks?from=rack-1-1-server1", "/graph?q=node_load1", "/events?history=1&level=critical",
	"/services", "/service?name=web", "/racks?cluster=c1"}

func fixture(t testing.TB) *fakeAPI {
	now := time.Now()
	f := &fakeAPI{objects: append(inventory(t), services(now)...)}
	f.alerts = []*unyov1.Alert{
		alert("c1", "a1", unyov1.AlertLevel_ALERT_LEVEL_WARNING, now.Add(-3*time.Hour), "n1", "disk"),
		alert("c2", "a2", unyov1.AlertLevel_ALERT_LEVEL_CRITICAL, now.Add(-time.Hour), "n2", "load"),
		alert("c1", "a3", unyov1.AlertLevel_ALERT_LEVEL_CRITICAL, now.Add(-2*time.Hour), "n1", "load"),
		alert("c1", "a4", unyov1.AlertLevel_ALERT_LEVEL_FATAL, now.Add(-time.Minute), "n3", "ping"),
	}
	f.events = []*unyov1.Event{{Id: "ev-a1", Cluster: "c1", Node: "n1", Check: "disk", Level: unyov1.Level_LEVEL_WARNING,
		Status: unyov1.CheckStatus_CHECK_STATUS_WARNING, Output: "DISK WARNING - 91% used", StartedAt: timestamppb.New(now), Duration: durationpb.New(time.Second),
		Explanation: &unyov1.Explanation{Outcome: "alerted", Steps: []*unyov1.ExplanationStep{
			{Stage: "maintenance", Outcome: "no maintenance matched"},
			{Stage: "action", Rule: "page-oncall", Outcome: "create_alert: opened alert n1/disk"},
			{Stage: "webhook", Rule: "page-oncall", Outcome: "api_hook https://hooks.example/x: 200 OK after 1 attempt"},
		}}}}
	f.nodes = []*unyov1.Node{{Name: "n1", Cluster: "c1", State: unyov1.NodeState_NODE_STATE_READY, Resource: "rack-1-1-server1",
		Capacity: &unyov1.Capacity{Cpus: 8, MemoryBytes: 16 << 30, DiskBytes: 500 << 30}, Reserved: &unyov1.Capacity{Cpus: 2, MemoryBytes: 4 << 30},
		TopologyLabels: map[string]string{"topology.unyo.dev/rack": "rack-1-1"}, LastHeartbeat: timestamppb.New(now)}}
	return f
}

// Issue 18 item 1: no page is readable without a session, and the login
// checks the token as the API does.
func TestNoPageWithoutASession(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	for _, p := range append(pages, "/") {
		resp, body := b.get(p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
			t.Errorf("GET %s without a session: %d %s, want a redirect to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
		if strings.Contains(body, "failing") {
			t.Errorf("GET %s without a session showed data", p)
		}
	}
	if resp, _ := b.do("GET", "/alerts/live", nil, map[string]string{"Accept": "text/event-stream"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the live stream without a session: %d, want 401", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/alerts/act", map[string][]string{"action": {"ack"}, "sel": {"c1/a1"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an action without a session: %d, want 401", resp.StatusCode)
	}
	if resp := b.login("wrong-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	if _, ok := b.cookies["unyo_session"]; ok {
		t.Error("a refused login set a session cookie")
	}
}

func TestLoginSetsASecureHTTPOnlyCookie(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	_, page := b.get("/login")
	nonce := between(page, `name="csrf" value="`, `"`)
	// Without the login form's nonce (login CSRF), refused.
	if resp, _ := b.do("POST", "/login", map[string][]string{"csrf": {"forged"}, "token": {adminTok}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login without the form's nonce: %d, want 403", resp.StatusCode)
	}
	_, page = b.get("/login")
	nonce = between(page, `name="csrf" value="`, `"`)
	resp, _ := b.do("POST", "/login", map[string][]string{"csrf": {nonce}, "token": {adminTok}, "next": {"//evil.example/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/alerts" {
		t.Fatalf("login: %d to %q, want a redirect to /alerts (never off the site)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var found bool
	for _, c := range resp.Cookies() {
		if c.Name == "unyo_session" {
			found = true
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
				t.Errorf("session cookie %+v: want HttpOnly, Secure (loopback), SameSite=Lax, Path=/", c)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie")
	}
	if resp, body := b.get("/alerts"); resp.StatusCode != 200 || !strings.Contains(body, "admin-token-") {
		t.Errorf("after login /alerts: %d, and the page should name the operator", resp.StatusCode)
	}
	// Logging out ends the session on the server, not only the cookie.
	sid := b.cookies["unyo_session"]
	_, page = b.get("/alerts")
	b.do("POST", "/logout", map[string][]string{"csrf": {between(page, `name="csrf" value="`, `"`)}}, nil)
	b.cookies["unyo_session"] = sid
	if resp, _ := b.get("/alerts"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the session still works after logout: %d", resp.StatusCode)
	}
}

func TestEveryStateChangeNeedsTheCSRFToken(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	posts := []struct {
		path string
		form map[string][]string
	}{
		{"/alerts/act", map[string][]string{"action": {"ack"}, "sel": {"c1/a1"}}},
		{"/maintenance/start", map[string][]string{"reason": {"x"}}},
		{"/maintenance/end", map[string][]string{"name": {"m"}}},
		{"/service/scale", map[string][]string{"name": {"web"}, "replicas": {"5"}}},
		{"/node/cordon", map[string][]string{"name": {"n1"}, "cluster": {"c1"}, "cordoned": {"1"}}},
		{"/node/drain", map[string][]string{"name": {"n1"}, "cluster": {"c1"}}},
		{"/logout", map[string][]string{}},
	}
	for _, p := range posts {
		if resp, _ := b.do("POST", p.path, p.form, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without the CSRF token: %d, want 403", p.path, resp.StatusCode)
		}
		p.form["csrf"] = []string{"wrong"}
		if resp, _ := b.do("POST", p.path, p.form, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s with a wrong CSRF token: %d, want 403", p.path, resp.StatusCode)
		}
		p.form["csrf"] = []string{b.csrf}
		if resp, _ := b.do("POST", p.path, p.form, map[string]string{"Sec-Fetch-Site": "cross-site"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s from another site: %d, want 403", p.path, resp.StatusCode)
		}
	}
	if st := e.api.alerts[0].GetState(); st != unyov1.AlertState_ALERT_STATE_OPEN {
		t.Errorf("a refused request changed the alert: %v", st)
	}
	if len(e.api.actedBy) > 0 || e.api.nodes[0].GetCordoned() {
		t.Errorf("a refused request acted: %v", e.api.actedBy)
	}
}

// Item 2: most severe and oldest first, grouped by level or cluster.
func TestAlertsPageOrderAndGroups(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	_, body := b.get("/alerts")
	order := []string{`id="a-c1/a4"`, `id="a-c1/a3"`, `id="a-c2/a2"`, `id="a-c1/a1"`}
	assertOrder(t, body, order)
	assertOrder(t, body, []string{`id="g-fatal"`, `id="g-critical"`, `id="g-warning"`})
	_, body = b.get("/alerts?group=cluster")
	assertOrder(t, body, []string{`id="g-c1"`, `id="a-c1/a4"`, `id="a-c1/a3"`, `id="a-c1/a1"`, `id="g-c2"`, `id="a-c2/a2"`})
	if resp, _ := b.get("/alerts?group=nonsense"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("group=nonsense: %d, want 400", resp.StatusCode)
	}
}

func assertOrder(t *testing.T, body string, order []string) {
	t.Helper()
	last := -1
	for _, s := range order {
		i := strings.Index(body, s)
		if i < 0 {
			t.Errorf("%s is not on the page", s)
			continue
		}
		if i < last {
			t.Errorf("%s is out of order (want %v)", s, order)
		}
		last = i
	}
}

// Item 2: acknowledge and close from the page, recorded under the token's
// identity; closing needs a reason; a viewer gets no buttons and the API
// refuses it anyway.
func TestAckAndCloseAsTheOperator(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	resp, _ := b.do("POST", "/alerts/act", map[string][]string{"csrf": {b.csrf}, "action": {"ack"}, "sel": {"c1/a1", "c2/a2"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ack: %d", resp.StatusCode)
	}
	_, page := b.get("/alerts")
	if !strings.Contains(page, "Acknowledged 2 alert(s) as admin-token-") {
		t.Errorf("no confirmation on the page after ack")
	}
	for _, a := range e.api.alerts[:2] {
		if a.GetState() != unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED || !strings.HasPrefix(a.GetHistory()[0].GetBy(), "admin-token-") {
			t.Errorf("alert %s: %v by %q, want acknowledged by the admin token's name", a.GetId(), a.GetState(), a.GetHistory())
		}
	}
	// Close without a reason: refused before the API, with why.
	resp, body := b.do("POST", "/alerts/act", map[string][]string{"csrf": {b.csrf}, "action": {"close"}, "sel": {"c1/a1"}}, map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "needs a reason") {
		t.Errorf("close without a reason: %d %s", resp.StatusCode, body)
	}
	resp, body = b.do("POST", "/alerts/act", map[string][]string{"csrf": {b.csrf}, "action": {"close"}, "sel": {"c1/a1"}, "reason": {"replaced the disk"}}, map[string]string{"Accept": "application/json"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok":true`) {
		t.Errorf("close: %d %s", resp.StatusCode, body)
	}
	h := e.api.alerts[0].GetHistory()
	if last := h[len(h)-1]; last.GetTo() != unyov1.AlertState_ALERT_STATE_CLOSED || last.GetReason() != "replaced the disk" {
		t.Errorf("close recorded %v", last)
	}
	_, alertPage := b.get("/alert?id=a1&cluster=c1")
	if !strings.Contains(alertPage, "replaced the disk") || !strings.Contains(alertPage, "DISK WARNING") {
		t.Errorf("the alert's page lacks its history or the events behind it")
	}

	v := e.browser()
	v.login(viewerTok)
	_, page = v.get("/alerts")
	if strings.Contains(page, `id="bulk"`) || strings.Contains(page, `name="sel"`) {
		t.Error("a viewer's page offers ack and close")
	}
	resp, body = v.do("POST", "/alerts/act", map[string][]string{"csrf": {v.csrf}, "action": {"ack"}, "sel": {"c1/a3"}}, map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `may not call AlertService/AckAlert`) {
		t.Errorf("a viewer's ack: %d %s, want the API's refusal", resp.StatusCode, body)
	}
}

// Item 2: a change reaches an open page's stream within 2 s, as the rows
// that changed.
func TestLiveStreamSendsChangedRows(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	_, page := b.get("/alerts")
	viewID := between(page, `data-view="`, `"`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/alerts/live?view="+viewID+"&group=level", nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev string
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "event: ") {
				ev = strings.TrimPrefix(l, "event: ")
			}
			if strings.HasPrefix(l, "data: ") {
				events <- ev + " " + strings.TrimPrefix(l, "data: ")
			}
		}
		close(events)
	}()
	changed := time.Now()
	as := e.api.alerts
	fresh := alert("c3", "a9", unyov1.AlertLevel_ALERT_LEVEL_CRITICAL, time.Now(), "n9", "http")
	e.api.setAlerts(as[0], as[2], as[3], fresh) // a2 went, a9 came
	select {
	case ev := <-events:
		if !strings.HasPrefix(ev, "alerts ") || !strings.Contains(ev, `"remove":["c2/a2"]`) || !strings.Contains(ev, `"key":"c3/a9"`) ||
			!strings.Contains(ev, `"after":"c1/a3"`) || strings.Contains(ev, `"key":"c1/a1"`) {
			t.Errorf("update %s: want a2 removed and only a9 put, after a3", ev)
		}
		if d := time.Since(changed); d > 2*time.Second {
			t.Errorf("the update took %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no update within 3s of the change")
	}
}

// Item 3: an event's page explains it.
func TestEventPageExplains(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	_, body := b.get("/event?id=ev-a1&cluster=c1")
	for _, want := range []string{"DISK WARNING - 91% used", "alerted", "page-oncall", "create_alert: opened alert n1/disk", "200 OK after 1 attempt", "no maintenance matched"} {
		if !strings.Contains(body, want) {
			t.Errorf("the event page lacks %q", want)
		}
	}
	if resp, _ := b.get("/event?id=nope&cluster=c1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown event: %d, want 404", resp.StatusCode)
	}
}

// Items 4, 5, 7, 8: nodes, rules, maintenance, racks, metrics render.
func TestPagesRender(t *testing.T) {
	e := newEnv(t, fixture(t))
	b := e.browser()
	b.login(adminTok)
	want := map[string][]string{
		"/node?name=n1&cluster=c1":        {"rack-1-1-server1", "8 CPUs", "16.0 GiB", "topology.unyo.dev/rack", `class="spark"`, "DISK WARNING"},
		"/racks?floor=floor-1-1-1":        {`<g id="rack-rack-1-1">`, "rack-1-1-server1", "state-critical", `href="/node?cluster=c1&amp;name=n1"`},
		"/networks?from=rack-1-1-server1": {"<svg", "rack-1-1-server1"},
		"/graph?q=node_load1&range=1h":    {`class="chart"`, "node_load1{cluster=&#34;c1&#34;"},
		"/graph?q=((&range=1h":            {"cannot parse"},
		"/maintenance":                    {"Start a maintenance"},
		"/rules":                          {"<h1>Rules</h1>"},
	}
	for p, ws := range want {
		resp, body := b.get(p)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
		for _, w := range ws {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", p, w)
			}
		}
	}
	// Start a maintenance from the page: applied as the operator.
	resp, _ := b.do("POST", "/maintenance/start", map[string][]string{"csrf": {b.csrf}, "reason": {"kernel upgrade"}, "nodes": {"n1, n2"}, "for": {"2h"}, "name": {"m1"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start maintenance: %d", resp.StatusCode)
	}
	_, body := b.get("/maintenance")
	if !strings.Contains(body, "Maintenance m1 started") || !strings.Contains(body, "kernel upgrade") || !strings.Contains(body, "n1, n2") {
		t.Errorf("the maintenance page does not show the started maintenance")
	}
}
