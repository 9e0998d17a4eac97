// Package identity issues the credentials that let nodes, clusters and root
// act as themselves, and recognises them again: a random token handed out
// once, of which the issuing server keeps only the SHA-256.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// NewToken returns a new random token; prefix says what it is for, so that
// one found in a file or a log can be told apart (unyo-node-, unyo-cluster-).
func NewToken(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a token: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash is what a store keeps of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// cacheTTL bounds how long a credential revoked through another replica
// still works here; revocations through this replica apply at once.
const cacheTTL = 5 * time.Second

// maxCached bounds the cache; it starts over when full.
const maxCached = 100_000

// Authenticator recognises the tokens a store keeps hashes of, as
// server.Authenticator, for the credential kinds it maps to principals.
type Authenticator struct {
	st store.Credentials
	// kinds maps a stored credential kind to the principal kind it stands for.
	kinds map[string]server.Kind

	cache principalCache // by hash
}

// principalCache remembers recognised credentials for cacheTTL, so that
// not every call reads the store.
type principalCache struct {
	mu     sync.Mutex
	cached map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p  server.Principal
	at time.Time
}

func (c *principalCache) get(key string, now time.Time) (server.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cached[key]
	if !ok || now.Sub(e.at) >= cacheTTL {
		return server.Principal{}, false
	}
	return e.p, true
}

func (c *principalCache) put(key string, p server.Principal, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached == nil || len(c.cached) >= maxCached {
		c.cached = map[string]cachedPrincipal{}
	}
	c.cached[key] = cachedPrincipal{p: p, at: now}
}

func (c *principalCache) forget(kind server.Kind, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.cached {
		if e.p.Kind == kind && e.p.Name == name {
			delete(c.cached, k)
		}
	}
}

// NewAuthenticator returns an authenticator of the stored credentials of the
// given kinds (store.CredNode: server.KindNode, ...).
func NewAuthenticator(st store.Credentials, kinds map[string]server.Kind) *Authenticator {
	return &Authenticator{st: st, kinds: kinds}
}

// Authenticate implements server.Authenticator.
func (a *Authenticator) Authenticate(ctx context.Context, cred server.Credential) (server.Principal, error) {
	if cred.Token == "" {
		return server.Principal{}, server.ErrNotMine
	}
	h := Hash(cred.Token)
	now := time.Now()
	if p, ok := a.cache.get(h, now); ok {
		return p, nil
	}
	creds, err := a.st.LookupCredential(ctx, h)
	if err != nil {
		return server.Principal{}, connect.NewError(connect.CodeUnavailable, fmt.Errorf("cannot check the credential now (the state store failed); retry: %w", err))
	}
	for _, sc := range creds {
		kind, ok := a.kinds[sc.Kind]
		if !ok {
			continue
		}
		p := server.Principal{Kind: kind, Name: sc.Name}
		a.cache.put(h, p, now)
		return p, nil
	}
	return server.Principal{}, server.ErrNotMine
}

// Forget makes a revoked credential of kind and name stop working at once.
func (a *Authenticator) Forget(kind server.Kind, name string) { a.cache.forget(kind, name) }
