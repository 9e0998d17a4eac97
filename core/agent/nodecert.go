package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/atomicfile"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/identity"
)

// nodeCertFile is where, in the agent's data directory, it keeps its
// node's client certificate and key (one file, so both change at once).
const nodeCertFile = "node-cert.pem"

// nodeCert is the node's client certificate from its cluster's node CA:
// once it has one, the agent presents it (mTLS) instead of a token.
type nodeCert struct {
	path string // empty: kept in memory only

	mu   sync.Mutex
	cert *tls.Certificate // with Leaf; nil: none

	// gen moves when a renewal starts and when its certificate is in
	// place: a call refused meanwhile is retried with the new one.
	gen atomic.Uint64
	// renewing is held while a renewal is in flight.
	renewing sync.Mutex
}

// load reads the certificate kept by an earlier run.
func (n *nodeCert) load() error {
	if n.path == "" {
		return nil
	}
	b, err := os.ReadFile(n.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the node's certificate %s: %w", n.path, err)
	}
	c, err := tls.X509KeyPair(b, b)
	if err != nil {
		return fmt.Errorf("the node's certificate %s does not load (%w): remove it, and an admin runs `unyo nodes delete` so the agent can enrol again", n.path, err)
	}
	n.mu.Lock()
	n.cert = &c
	n.mu.Unlock()
	return nil
}

// keep stores a certificate the cluster signed for key and presents it from
// now on.
func (n *nodeCert) keep(certPEM []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode the node's key: %w", err)
	}
	b := append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	c, err := tls.X509KeyPair(b, b)
	if err != nil {
		return fmt.Errorf("the certificate the cluster signed does not match the node's key: %w", err)
	}
	var kept error
	if n.path != "" {
		if err := atomicfile.WriteFile(n.path, b, 0o600); err != nil {
			kept = fmt.Errorf("keep the node's certificate in %s: %w", n.path, err)
		}
	}
	n.mu.Lock()
	n.cert = &c
	n.mu.Unlock()
	n.gen.Add(1)
	return kept
}

// leaf is the certificate kept, valid or not; nil if none.
func (n *nodeCert) leaf() *x509.Certificate {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cert == nil {
		return nil
	}
	return n.cert.Leaf
}

// valid is the certificate to present now; nil if there is none or it
// expired (the server would refuse the connection).
func (n *nodeCert) valid(now time.Time) *tls.Certificate {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cert == nil || now.After(n.cert.Leaf.NotAfter) || now.Before(n.cert.Leaf.NotBefore) {
		return nil
	}
	return n.cert
}

// clientCertificate is client.Options.ClientCertificate: asked on every new
// connection, so a renewed certificate is used from the next one.
func (n *nodeCert) clientCertificate() (*tls.Certificate, error) {
	if c := n.valid(time.Now()); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// renewAt is when a certificate is renewed: when 2/3 of its validity has
// passed, leaving a third to retry in.
func renewAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

func nodeCertPath(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, nodeCertFile)
}

// wantsCertificate reports whether the agent asks for a certificate when it
// registers: it talks TLS to its cluster and has no valid certificate.
func (a *Agent) wantsCertificate() bool {
	return a.tlsCluster && a.nodeCert.valid(time.Now()) == nil
}

// renewLoop renews the node's certificate when 2/3 of its validity has
// passed (at once if that is so at start), retrying until it expires.
func (a *Agent) renewLoop(ctx context.Context) {
	warnedExpired := false
	for ctx.Err() == nil {
		leaf := a.nodeCert.leaf()
		var wait <-chan time.Time
		switch {
		case leaf == nil:
			// Nothing to renew until the agent enrols.
		case time.Now().After(leaf.NotAfter):
			if !warnedExpired {
				a.log.Error("this node's certificate expired before it could be renewed, so the cluster refuses it; to enrol the node again, an admin runs `unyo nodes delete` and the agent restarts with a join token after the certificate file is removed",
					"file", a.nodeCert.path, "expired", leaf.NotAfter)
				warnedExpired = true
			}
		case time.Now().Before(renewAt(leaf)):
			wait = time.After(time.Until(renewAt(leaf)))
		default:
			if err := a.renewCertificate(ctx); err != nil && ctx.Err() == nil {
				retry := min(max(time.Until(leaf.NotAfter)/10, time.Second), 30*time.Second)
				a.log.Warn("renewing this node's certificate failed; will retry before it expires", "expires", leaf.NotAfter, "retry_in", retry, "err", err)
				ctxwait.Sleep(ctx, retry)
			}
			continue
		}
		// Wake when the certificate changes (enrolment) or renewal is due.
		select {
		case <-ctx.Done():
		case <-wait:
		case <-a.certChanged:
		}
	}
}

// renewCertificate has the cluster sign a new key's certificate,
// authenticated by the current one, and presents the new one from then on.
func (a *Agent) renewCertificate(ctx context.Context) error {
	key, csr, err := identity.NewNodeKey(a.opts.NodeName)
	if err != nil {
		return err
	}
	a.nodeCert.renewing.Lock()
	defer a.nodeCert.renewing.Unlock()
	a.nodeCert.gen.Add(1)
	resp, err := a.cl.Agent.RenewCertificate(ctx, connect.NewRequest(&unyov1.RenewCertificateRequest{Node: a.opts.NodeName, Csr: csr}))
	if err != nil {
		return fmt.Errorf("renew the node's certificate: %w", err)
	}
	kept := a.nodeCert.keep(resp.Msg.GetCertificate(), key)
	if leaf := a.nodeCert.leaf(); leaf != nil {
		a.log.Info("renewed this node's certificate", "serial", identity.Serial(leaf), "expires", leaf.NotAfter)
	}
	if kept != nil {
		a.log.Error("the renewed certificate works for this run but could not be kept; after a restart an admin must run `unyo nodes delete` before the agent can enrol again", "err", kept)
	}
	return nil
}

// retryRenewed retries once a call the cluster refused because the
// certificate it presented was replaced by a renewal meanwhile, with the
// new one: a renewal loses no call.
func (a *Agent) retryRenewed() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().Procedure == unyov1connect.AgentServiceRenewCertificateProcedure {
				return next(ctx, req)
			}
			gen := a.nodeCert.gen.Load()
			resp, err := next(ctx, req)
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				return resp, err
			}
			a.nodeCert.renewing.Lock() // wait for a renewal in flight
			a.nodeCert.renewing.Unlock()
			if a.nodeCert.gen.Load() == gen {
				return resp, err
			}
			return next(ctx, req) // on a new connection, with the new certificate
		}
	}
}
