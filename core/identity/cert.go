package identity

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// CertAuthenticator recognises node certificates its cluster's node CA
// signed, as server.Authenticator: a verified client certificate whose CN
// names a node and whose serial is that node's current one (store kind
// CredNodeCert) is that node. The TLS layer verified the chain against
// server.tls.client_ca_file; this checks that the node CA itself signed the
// leaf, so another CA trusted there cannot make node certificates.
type CertAuthenticator struct {
	ca    *x509.Certificate
	st    store.Credentials
	cache principalCache // by the leaf's SHA-256
}

// NewCertAuthenticator returns an authenticator of the node certificates
// ca signs, whose current serials st keeps.
func NewCertAuthenticator(ca *x509.Certificate, st store.Credentials) *CertAuthenticator {
	return &CertAuthenticator{ca: ca, st: st}
}

// Authenticate implements server.Authenticator.
func (a *CertAuthenticator) Authenticate(ctx context.Context, cred server.Credential) (server.Principal, error) {
	if len(cred.Chains) == 0 || len(cred.Chains[0]) == 0 {
		return server.Principal{}, server.ErrNotMine
	}
	leaf := cred.Chains[0][0]
	sum := sha256.Sum256(leaf.Raw)
	key := hex.EncodeToString(sum[:])
	now := time.Now()
	a.cache.maintain(ctx, a.st, now)
	if p, ok := a.cache.get(key, now); ok {
		return p, nil
	}
	if err := leaf.CheckSignatureFrom(a.ca); err != nil {
		return server.Principal{}, server.ErrNotMine // another CA's certificate: maybe another authenticator's
	}
	node := leaf.Subject.CommonName
	if err := validate.Name(node); err != nil {
		return server.Principal{}, fmt.Errorf("the client certificate's CN %q is not a node name: %w", node, err)
	}
	serial := Serial(leaf)
	since := a.cache.mark()
	gen, hasGen := lookupGen(ctx, a.st)
	cur, err := a.st.GetCredential(ctx, store.CredNodeCert, node)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return server.Principal{}, fmt.Errorf("certificate serial %s of node %q was revoked (the node was deleted with `unyo nodes delete`, or never enrolled here): enrol the node again with a join token", serial, node)
	case err != nil:
		return server.Principal{}, connect.NewError(connect.CodeUnavailable, fmt.Errorf("cannot check the client certificate now (the state store failed); retry: %w", err))
	case cur.Hash != serial:
		return server.Principal{}, fmt.Errorf("certificate serial %s of node %q was revoked or replaced (its current certificate has serial %s)", serial, node, cur.Hash)
	}
	p := server.Principal{Kind: server.KindNode, Name: node}
	// The store keeps a node's current serial as its credential's hash.
	a.cache.put(key, cachedPrincipal{p: p, hash: serial, kind: store.CredNodeCert, verified: now, gen: gen, hasGen: hasGen}, since)
	return p, nil
}

// Forget makes a replaced or revoked certificate of node stop working at once.
func (a *CertAuthenticator) Forget(node string) { a.cache.forget(server.KindNode, node) }
