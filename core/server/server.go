// Package server serves unyo's ConnectRPC handlers on one port: gRPC,
// gRPC-Web and JSON over HTTP, with bearer-token auth and optional TLS.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// Options configures one listening server.
type Options struct {
	Listen          string
	CertFile        string
	KeyFile         string
	Auth            Auth
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// Server is an HTTP server for connect handlers. Register handlers with
// Handle before calling Serve.
type Server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
}

// New returns a server; it does not listen yet.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	mux := http.NewServeMux()
	// An unauthenticated health endpoint for load balancers and scripts.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return &Server{opts: opts, mux: mux, log: opts.Logger}
}

// HandlerOptions are the options every connect handler of this server takes.
func (s *Server) HandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithInterceptors(s.opts.Auth.Interceptor()), StrictJSON()}
}

// Handle registers a connect handler under its path.
func (s *Server) Handle(path string, h http.Handler) { s.mux.Handle(path, h) }

// Listen opens the listening socket, so callers (and tests binding port 0)
// know the address before serving.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.opts.Listen, err)
	}
	return ln, nil
}

// Serve answers on ln until ctx is cancelled, then shuts down gracefully,
// letting in-flight requests finish within the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC clients without TLS speak h2c
	srv := &http.Server{
		Handler:           s.mux,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	tlsOn := s.opts.CertFile != ""
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(s.opts.CertFile, s.opts.KeyFile)
		if err != nil {
			return fmt.Errorf("load TLS certificate %s and key %s: %w", s.opts.CertFile, s.opts.KeyFile, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	errc := make(chan error, 1)
	go func() {
		if tlsOn {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	s.log.Info("serving", "addr", ln.Addr().String(), "tls", tlsOn, "auth", s.opts.Auth.Enabled())
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
