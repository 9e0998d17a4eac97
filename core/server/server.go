// Package server serves unyo's ConnectRPC handlers on one port: gRPC,
// gRPC-Web and JSON over HTTP, with authentication before any body is read,
// bounded requests and connections, and optional TLS and mTLS.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/VictoriaMetrics/metrics"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/selfmon"
)

// Limits bound what one client can make a server hold. Zero fields take
// the defaults of DefaultLimits.
type Limits struct {
	// RequestBytes bounds a request body as it arrives (compressed or not).
	RequestBytes int64
	// MessageBytes bounds one message after decompression.
	MessageBytes int
	// ReadTimeout bounds reading one request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds handling a request and writing its answer.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive and HTTP/2 connections idle this long.
	IdleTimeout time.Duration
	// HeaderTimeout bounds reading request headers (and an HTTP/2
	// preface) on a new connection.
	HeaderTimeout time.Duration
}

// DefaultLimits leave room for the largest spool record an agent forwards
// (16 MiB) and for slow links, and no more.
var DefaultLimits = Limits{
	RequestBytes:  32 << 20,
	MessageBytes:  32 << 20,
	ReadTimeout:   2 * time.Minute,
	WriteTimeout:  5 * time.Minute,
	IdleTimeout:   2 * time.Minute,
	HeaderTimeout: 10 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.RequestBytes > 0 {
		d.RequestBytes = l.RequestBytes
	}
	if l.MessageBytes > 0 {
		d.MessageBytes = l.MessageBytes
	}
	if l.ReadTimeout > 0 {
		d.ReadTimeout = l.ReadTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.HeaderTimeout > 0 {
		d.HeaderTimeout = l.HeaderTimeout
	}
	return d
}

// Options configures one listening server.
type Options struct {
	Listen   string
	CertFile string
	KeyFile  string
	// ClientCAFile, with TLS, verifies client certificates against this CA
	// (mTLS); a verified certificate is a credential for Auth's
	// authenticators. Clients without one still authenticate with tokens.
	ClientCAFile    string
	Auth            Auth
	Limits          Limits
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// Health, if set, is asked by /healthz, which answers 503 with its
	// error (a cluster: its store cannot be read).
	Health func(context.Context) error
	// Version is the build's, for unyo_build_info on /metrics.
	Version string
}

// Server is an HTTP server for connect handlers. Register handlers with
// Handle before calling Serve.
type Server struct {
	opts   Options
	auth   *Auth
	limits Limits
	mux    *http.ServeMux
	log    *slog.Logger
	self   *selfmon.Registry
	// apiMetrics holds the metrics counted finds by procedure and code
	// (apiMetric keys), so that a call does not format their names.
	apiMetrics sync.Map
	// procedures are the API's procedure paths, the only ones counted
	// under their own label.
	procedures map[string]bool
}

// apiMetric keys Server.apiMetrics: code 0 is a procedure's histogram.
type apiMetric struct {
	procedure string
	code      int
}

// New returns a server; it does not listen yet.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	s := &Server{opts: opts, limits: opts.Limits.withDefaults(), mux: http.NewServeMux(), log: opts.Logger, self: selfmon.New(opts.Version),
		procedures: apiProcedures()}
	s.auth = &s.opts.Auth
	// Self-monitoring carries the names of procedures, leases and
	// clusters: it asks for a credential, as the API does (a viewer token
	// in the scraper's authorization), where the API asks for one.
	s.mux.Handle("GET /metrics", s.authorized(unyov1connect.StatusServiceGetStatusProcedure, s.self.Handler()))
	// An unauthenticated health endpoint for load balancers and scripts.
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if opts.Health != nil {
			if err := opts.Health(r.Context()); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return s
}

// Auth is the server's authentication, for registering authenticators and
// classifying procedures before serving.
func (s *Server) Auth() *Auth { return s.auth }

// compressMinBytes is the smallest answer compressed when the caller
// accepts compression.
const compressMinBytes = 1024

// HandlerOptions are the options every connect handler of this server takes.
func (s *Server) HandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(s.limits.MessageBytes),
		StrictJSON(),
		// A heartbeat's answer is a few bytes: gzipping it costs a fresh
		// compressor state (about a tenth of a cluster's CPU at 1,000
		// heartbeats/s) and saves nothing.
		connect.WithCompressMinBytes(compressMinBytes),
	}
}

// Handler is everything the server answers (the API behind its
// authentication, and whatever else was registered): the web console and
// the Alertmanager API (core/amapi) call the server's own services through
// it in process, as the caller.
func (s *Server) Handler() http.Handler { return s.mux }

// Metrics is the server's self-monitoring registry, for the services it
// serves to add their metrics to.
func (s *Server) Metrics() *selfmon.Registry { return s.self }

// authorized serves h to callers allowed to call procedure.
func (s *Server) authorized(procedure string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := s.auth.Authorize(r, procedure)
		if err != nil {
			code := http.StatusForbidden
			if connect.CodeOf(err) == connect.CodeUnauthenticated {
				code = http.StatusUnauthorized
			}
			http.Error(w, err.Error(), code)
			return
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Handle registers a handler under its path: connect handlers (paths
// /unyo.v1.*) behind authentication, anything else as it is. Every call
// is counted on /metrics by procedure (or path prefix) and status.
func (s *Server) Handle(path string, h http.Handler) {
	if strings.HasPrefix(path, "/unyo.v1.") {
		h = s.auth.Middleware(s.bounded(h))
	}
	s.mux.Handle(path, s.counted(h))
}

// counted counts and times the calls of h: unyo_api_requests_total
// {procedure, code} and unyo_api_request_duration_seconds{procedure}. The
// procedure is the connect procedure's path, or "/api/v1" style prefixes
// for the other APIs, so that the label's values stay few.
func (s *Server) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(cw, r)
		proc := s.procedureLabel(r.URL.Path)
		s.requestsTotal(proc, cw.code).Inc()
		selfmon.Since(s.requestDuration(proc), start)
	})
}

// requestsTotal is unyo_api_requests_total{procedure, code}, looked up in
// apiMetrics first: formatting the name took a tenth of a heartbeat's
// handling.
func (s *Server) requestsTotal(proc string, code int) *metrics.Counter {
	k := apiMetric{proc, code}
	if m, ok := s.apiMetrics.Load(k); ok {
		return m.(*metrics.Counter)
	}
	m := s.self.Counter(fmt.Sprintf(`unyo_api_requests_total{procedure=%s,code="%d"}`, selfmon.Label(proc), code))
	s.apiMetrics.Store(k, m)
	return m
}

// requestDuration is unyo_api_request_duration_seconds{procedure}, as
// requestsTotal.
func (s *Server) requestDuration(proc string) *metrics.PrometheusHistogram {
	k := apiMetric{procedure: proc}
	if m, ok := s.apiMetrics.Load(k); ok {
		return m.(*metrics.PrometheusHistogram)
	}
	m := s.self.Histogram(`unyo_api_request_duration_seconds{procedure=` + selfmon.Label(proc) + `}`)
	s.apiMetrics.Store(k, m)
	return m
}

// procedureLabel is the procedure label of a request for path: the
// procedure's path when the API has it, else its /api/vN prefix, else
// "other".
func (s *Server) procedureLabel(path string) string {
	if s.procedures[path] {
		return path
	}
	if i := strings.Index(path, "/api/v"); i >= 0 && len(path) >= i+7 {
		return path[i : i+7] // /api/v1, /api/v2
	}
	return "other"
}

// apiProcedures are the paths of the procedures of the unyo.v1 services,
// from their descriptors. A path anyone may send is not a label: each
// value would be a series held for the process's life.
func apiProcedures() map[string]bool {
	procs := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage(unyov1.File_unyo_v1_unyo_proto.Package(), func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			sd := f.Services().Get(i)
			for j := range sd.Methods().Len() {
				procs["/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	return procs
}

// codeWriter notes the status code; it flushes for streaming calls.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// bounded limits the body of an authenticated call and answers a panic in
// its handler with an error instead of a dropped connection.
func (s *Server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveBounded(h, w, r)
	})
}

func (s *Server) serveBounded(h http.Handler, w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.limits.RequestBytes)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("a request handler panicked; the request failed, the server goes on",
				"procedure", r.URL.Path, "caller", PrincipalFrom(r.Context()).String(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			_ = connect.NewErrorWriter().Write(w, r, connect.NewError(connect.CodeInternal,
				fmt.Errorf("the server failed on this request (%s); its log has the details", r.URL.Path)))
		}
	}()
	h.ServeHTTP(w, r)
}

// Listen opens the listening socket, so callers (and tests binding port 0)
// know the address before serving. A server without authentication refuses
// to listen beyond loopback unless Auth.Insecure is set.
func (s *Server) Listen() (net.Listener, error) {
	if err := checkExposure(s.opts.Listen, s.auth); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.opts.Listen, err)
	}
	return ln, nil
}

// checkExposure refuses, before anything is bound, to serve without
// authentication where others can connect.
func checkExposure(listen string, a *Auth) error {
	if a.Enabled() || a.Insecure || LoopbackOnly(listen) {
		return nil
	}
	return fmt.Errorf("refusing to serve on %s without authentication: anybody who reaches it could change checks that run commands on every agent. "+
		"Set server.admin_tokens and server.join_tokens (make tokens with `unyo tokens generate`), listen on 127.0.0.1, "+
		"or set server.insecure: true to serve without authentication anyway", listen)
}

// LoopbackOnly reports whether host:port names only this machine.
func LoopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// Serve answers on ln until ctx is cancelled, then shuts down gracefully,
// letting in-flight requests finish within the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC clients without TLS speak h2c
	l := s.limits
	srv := &http.Server{
		Handler:           s.mux,
		Protocols:         protocols,
		ReadHeaderTimeout: l.HeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: 250,
			// A peer that stops answering pings is gone: drop it rather
			// than hold its streams.
			SendPingTimeout: l.IdleTimeout / 2,
			PingTimeout:     15 * time.Second,
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	tlsOn := s.opts.CertFile != ""
	if tlsOn {
		cfg, err := newTLSConfig(s.opts.CertFile, s.opts.KeyFile, s.opts.ClientCAFile, s.log)
		if err != nil {
			return err
		}
		srv.TLSConfig = cfg
	}
	errc := make(chan error, 1)
	go func() {
		if tlsOn {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	s.log.Info("serving", "addr", ln.Addr().String(), "tls", tlsOn, "mtls", tlsOn && s.opts.ClientCAFile != "", "auth", s.auth.Enabled())
	if !s.auth.Enabled() && !isLoopback(ln.Addr()) {
		s.log.Warn("serving WITHOUT AUTHENTICATION beyond loopback (server.insecure: true): anybody who reaches this address may change checks that run commands on every agent",
			"addr", ln.Addr().String())
	}
	if !tlsOn && s.auth.Enabled() && !isLoopback(ln.Addr()) {
		s.log.Warn("bearer tokens reach this server over plain HTTP beyond loopback; set server.tls so they cannot be read on the way",
			"addr", ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down server on %s: %w", ln.Addr(), err)
	}
	return nil
}
