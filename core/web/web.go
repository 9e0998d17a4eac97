// Package web is unyo's web console, served by root at / on its API port:
// server-rendered pages over the same API the CLI uses, called in-process
// with the token the operator logged in with, so that every read is scoped
// and every action authorised and recorded exactly as the CLI's would be.
// Pages read without JavaScript; a little embedded JavaScript adds live
// alert updates (server-sent events) and in-place actions.
package web

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/server"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the console.
type Options struct {
	// API is the server's own handler (server.Server.Handler): pages call
	// the API through it in-process, with the operator's token.
	API http.Handler
	// Auth checks the token an operator logs in with, as the API does.
	Auth   *server.Auth
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SessionTTL ends a session this long after login (default 12h);
	// SessionIdle ends one unused this long (default 1h).
	SessionTTL  time.Duration
	SessionIdle time.Duration
	// LiveInterval is how often an open alerts page's stream asks the
	// API for changes (default 1s, so a change shows within 2s).
	LiveInterval time.Duration
}

// Console serves the web console.
type Console struct {
	opts     Options
	log      *slog.Logger
	sessions *sessions
	tmpl     *template.Template
	mux      *http.ServeMux
	// pageBufs are the alerts page's buffers (*bytes.Buffer), kept for
	// the next page.
	pageBufs sync.Pool
}

// New returns a console; mount it at / of the server whose API it calls.
func New(o Options) (*Console, error) {
	if o.API == nil || o.Auth == nil {
		return nil, fmt.Errorf("web console: the API handler and its authentication are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = time.Hour
	}
	if o.LiveInterval <= 0 {
		o.LiveInterval = time.Second
	}
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web console templates: %w", err)
	}
	c := &Console{opts: o, log: o.Logger.With("component", "web"), tmpl: t,
		sessions: newSessions(o.Now, o.SessionTTL, o.SessionIdle)}
	c.routes()
	return c, nil
}

// Mount serves the console at / of srv, calling srv's API.
func Mount(srv *server.Server, log *slog.Logger) error {
	c, err := New(Options{API: srv.Handler(), Auth: srv.Auth(), Logger: log})
	if err != nil {
		return err
	}
	srv.Handle("/", c)
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", cacheable(http.FileServerFS(static))))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.Handle("POST /logout", c.authed(c.logout))
	m.Handle("GET /{$}", c.authed(func(w http.ResponseWriter, r *http.Request, _ *request) {
		http.Redirect(w, r, "/alerts", http.StatusSeeOther)
	}))
	m.Handle("GET /alerts", c.authed(c.alertsPage))
	m.Handle("GET /alerts/live", c.authed(c.alertsLive))
	m.Handle("POST /alerts/act", c.authed(c.alertsAct))
	m.Handle("GET /alert", c.authed(c.alertPage))
	m.Handle("GET /events", c.authed(c.eventsPage))
	m.Handle("GET /event", c.authed(c.eventPage))
	m.Handle("GET /nodes", c.authed(c.nodesPage))
	m.Handle("GET /node", c.authed(c.nodePage))
	m.Handle("POST /node/cordon", c.authed(c.nodeCordon))
	m.Handle("POST /node/drain", c.authed(c.nodeDrain))
	m.Handle("GET /services", c.authed(c.servicesPage))
	m.Handle("GET /service", c.authed(c.servicePage))
	m.Handle("POST /service/scale", c.authed(c.serviceScale))
	m.Handle("GET /rules", c.authed(c.rulesPage))
	m.Handle("GET /maintenance", c.authed(c.maintenancePage))
	m.Handle("POST /maintenance/start", c.authed(c.maintenanceStart))
	m.Handle("POST /maintenance/end", c.authed(c.maintenanceEnd))
	m.Handle("GET /racks", c.authed(c.racksPage))
	m.Handle("GET /networks", c.authed(c.networksPage))
	m.Handle("GET /graph", c.authed(c.metricsPage)) // /metrics is the server's self-monitoring
	c.mux = m
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/unyo.v1.") {
		// An API procedure this server does not have: not a page.
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	// The console's own pages only: no framing, no foreign scripts, no
	// inline scripts (the theme and live updates are in /static/app.js).
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

func cacheable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
