package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/server"
)

// request is what an authenticated page handler gets: the session and the
// API as its operator.
type request struct {
	id   string
	sess *session
	api  *api
	// refresh marks a page's script redrawing part of the page (the
	// X-Unyo-Refresh header): it leaves the flash for the next page, and
	// pages may skip what the part does not show.
	refresh bool
}

// mayAct says whether the operator's role allows acknowledging, closing and
// maintenance; the API decides in the end, the page only hides buttons.
func (q *request) mayAct() bool {
	p := q.sess.principal
	return p.Kind == server.KindAnonymous || (p.IsUser() && p.Role >= server.RoleOperator)
}

type pageHandler func(w http.ResponseWriter, r *http.Request, q *request)

// authed serves h only within a session; every state-changing request
// must also carry the session's CSRF token and come from this site.
func (c *Console) authed(h pageHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(sessionCookie)
		var ss *session
		if err == nil {
			ss = c.sessions.get(ck.Value)
		}
		if ss == nil {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "not logged in: log in at /login", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			token := r.Header.Get(csrfHeader)
			if token == "" {
				token = r.PostFormValue(csrfField)
			}
			if !equal(token, ss.csrf) || !sameOrigin(r) {
				http.Error(w, "refused: the request does not carry this session's CSRF token (reload the page and try again)", http.StatusForbidden)
				return
			}
		}
		q := &request{id: ck.Value, sess: ss, api: newAPI(c.opts.API, ss.token, r.RemoteAddr), refresh: r.Header.Get(refreshHeader) != ""}
		h(w, r, q)
	})
}

// refreshHeader marks a request of a page's script for the page again,
// to redraw the parts marked data-refresh.
const refreshHeader = "X-Unyo-Refresh"

// page is what every page template gets.
type page struct {
	Title  string
	Nav    string
	User   string
	Role   string
	CSRF   string
	Flash  string
	MayAct bool
	// Errors are clusters that did not answer, or what the API refused.
	Errors []string
	Data   any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, q *request, name, title, nav string, data any, errs []string) {
	p := c.page(q, title, nav, data, errs)
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.renderFailed(w, name, err)
		return
	}
	writePage(w, b.Bytes())
}

// page is what the templates get for a page of q's session.
func (c *Console) page(q *request, title, nav string, data any, errs []string) page {
	p := page{Title: title, Nav: nav, Data: data, Errors: errs}
	if q != nil {
		p.User = q.sess.principal.String()
		p.Role = q.sess.principal.Role.String()
		p.CSRF = q.sess.csrf
		p.MayAct = q.mayAct()
		if !q.refresh {
			var problem string
			p.Flash, problem = c.sessions.takeFlash(q.sess)
			if problem != "" {
				p.Errors = append(p.Errors, problem)
			}
		}
	}
	return p
}

func (c *Console) renderFailed(w http.ResponseWriter, name string, err error) {
	c.log.Error("render a console page", "page", name, "err", err)
	http.Error(w, "the console failed to render this page; root's log has the details", http.StatusInternalServerError)
}

// writePage sends a rendered page. Pages are rendered whole before the
// first byte goes out, so that a failure is an error page, not half a page.
func writePage(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// apiFailed answers a failed API call: a lost session goes back to the
// login, anything else is shown with what the API said.
func (c *Console) apiFailed(w http.ResponseWriter, r *http.Request, q *request, err error) {
	code := connect.CodeOf(err)
	if code == connect.CodeUnauthenticated {
		c.sessions.drop(q.id)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	status := http.StatusBadGateway
	switch code {
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeNotFound:
		status = http.StatusNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		status = http.StatusBadRequest
	}
	w.WriteHeader(status)
	c.render(w, r, q, "error.html", "Error", "", nil, []string{message(err)})
}

// message is an API error as an operator reads it.
func message(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

func clusterErrors(errs []*unyov1.ClusterError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, "cluster "+e.GetCluster()+": "+e.GetError())
	}
	return out
}

// done ends an action: JSON for the page's script, otherwise a flash
// message and a redirect back (reading and acting work without scripts).
func (c *Console) done(w http.ResponseWriter, r *http.Request, q *request, back string, ok bool, msg string) {
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": ok, "message": msg})
		return
	}
	c.sessions.setFlash(q.sess, msg, ok)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// localPath keeps a redirect target on this site.
func localPath(s, def string) string {
	if s == "" || !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") {
		return def
	}
	return s
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	nonce := randomID()
	setCookie(w, r, loginCookie, nonce, 600)
	c.render(w, r, nil, "login.html", "Log in", "", map[string]any{
		"Nonce": nonce, "Next": localPath(r.URL.Query().Get("next"), "/alerts"), "Open": !c.opts.Auth.Enabled(),
	}, nil)
}

// login checks the token as the API would and starts a session. The form
// carries a nonce that must match a cookie set with it (login CSRF).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(loginCookie)
	if err != nil || !equal(ck.Value, r.PostFormValue(csrfField)) || !sameOrigin(r) {
		http.Error(w, "refused: the login form expired or came from another site; reload /login", http.StatusForbidden)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	fail := func(msg string) {
		nonce := randomID()
		setCookie(w, r, loginCookie, nonce, 600)
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, r, nil, "login.html", "Log in", "", map[string]any{"Nonce": nonce, "Next": localPath(r.PostFormValue("next"), "/alerts"), "Open": !c.opts.Auth.Enabled()}, []string{msg})
	}
	check := r.Clone(r.Context())
	check.Header = http.Header{}
	if token != "" {
		check.Header.Set("Authorization", "Bearer "+token)
	}
	p, err := c.opts.Auth.Check(check, "/unyo.v1.AlertService/ListAlerts")
	if err != nil {
		c.log.Info("console login refused", "from", r.RemoteAddr, "err", message(err))
		fail("That token was refused: " + message(err))
		return
	}
	if !p.IsUser() {
		fail("That is a " + string(p.Kind) + " credential; log in with an operator's token (unyo tokens create).")
		return
	}
	id, _ := c.sessions.create(token, p)
	setCookie(w, r, sessionCookie, id, int(c.opts.SessionTTL.Seconds()))
	setCookie(w, r, loginCookie, "", -1)
	c.log.Info("console login", "who", p.String(), "role", p.Role.String(), "from", r.RemoteAddr)
	http.Redirect(w, r, localPath(r.PostFormValue("next"), "/alerts"), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, q *request) {
	c.sessions.drop(q.id)
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
