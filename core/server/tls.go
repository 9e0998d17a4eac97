package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certReloader serves the key pair and client CA in their files, and reads
// them again when a file changes, so renewed certificates take effect
// without a restart. A renewal that does not load (a key written before
// its certificate) keeps the previous pair and is tried again.
type certReloader struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string
	cert    *tls.Certificate
	pool    *x509.CertPool
}

// reloadEvery bounds how often the files are looked at.
const reloadEvery = time.Second

func newTLSConfig(certFile, keyFile, caFile string, log *slog.Logger) (*tls.Config, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			c := base.Clone()
			c.Certificates = []tls.Certificate{*cert}
			if pool != nil {
				c.ClientCAs = pool
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}, nil
}

// stampOf identifies the files' current versions.
func (r *certReloader) stampOf() string {
	s := ""
	for _, f := range []string{r.certFile, r.keyFile, r.caFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

func (r *certReloader) load() error {
	stamp := r.stampOf()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	var pool *x509.CertPool
	if r.caFile != "" {
		pem, err := os.ReadFile(r.caFile)
		if err != nil {
			return fmt.Errorf("read the client CA file %s: %w", r.caFile, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("the client CA file %s holds no PEM certificate", r.caFile)
		}
	}
	r.mu.Lock()
	r.cert, r.pool, r.stamp, r.checked = &cert, pool, stamp, time.Now()
	r.mu.Unlock()
	return nil
}

func (r *certReloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	due := time.Since(r.checked) >= reloadEvery
	if due {
		r.checked = time.Now()
	}
	stamp := r.stamp
	r.mu.Unlock()
	if due && r.stampOf() != stamp {
		if err := r.load(); err != nil {
			r.mu.Lock()
			r.stamp = r.stampOf() // warn once per change, not every second
			r.mu.Unlock()
			r.log.Warn("the TLS files changed but do not load; still serving the previous certificate", "err", err)
		} else {
			r.log.Info("reloaded the TLS certificate", "cert_file", r.certFile)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, r.pool
}

// CheckTLS loads the server's certificate, key and client CA the way Serve
// will, so that a process can refuse to start on a missing or bad file
// before it creates anything (a database, a data directory).
func (s *Server) CheckTLS() error {
	if s.opts.CertFile == "" {
		return nil
	}
	r := &certReloader{certFile: s.opts.CertFile, keyFile: s.opts.KeyFile, caFile: s.opts.ClientCAFile, log: s.log}
	if err := r.load(); err != nil {
		return fmt.Errorf("server.tls: %w (set server.tls.cert_file and key_file to readable PEM files, or leave them empty to serve plain HTTP on loopback)", err)
	}
	return nil
}
