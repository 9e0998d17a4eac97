package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSOptions say how a client verifies the https server it calls and, for
// mutual TLS, which certificate it presents. Every unyo client (agent, root
// calling clusters, a cluster calling root, the CLI) takes these.
type TLSOptions struct {
	// CAFile holds the PEM certificates of the CAs that sign the server's
	// certificate. They replace the system roots rather than add to them:
	// a private CA names who may serve unyo, and any public CA that would
	// sign a certificate for the same host name should not be trusted too.
	// Empty uses the system roots (and SSL_CERT_FILE).
	CAFile string
	// ServerName is the name the server's certificate must carry, when it
	// is not the host of the URL (a cluster reached by IP address).
	ServerName string
	// CertFile and KeyFile are a PEM client certificate and its key, for a
	// server that asks for one (mTLS). Both or neither.
	CertFile, KeyFile string
}

// Config returns the TLS configuration for o, or nil when o sets nothing
// (Go's defaults then apply).
func (o TLSOptions) Config() (*tls.Config, error) {
	if o == (TLSOptions{}) {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", o.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case o.CertFile != "" && o.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the client certificate %s and key %s: %w", o.CertFile, o.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case o.CertFile != "" || o.KeyFile != "":
		return nil, errors.New("a client certificate needs both cert_file and key_file")
	}
	return c, nil
}
