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

// recheckEvery is how often the cache verifies again the credentials it
// holds, well before cacheTTL runs out: an agent heartbeating every 10 s
// then finds its credential verified (at most cacheTTL ago) on every call,
// where each call read the store. A recheck reads the store's credentials
// generation, one row; only when that moved, or the cache holds entries no
// recheck has confirmed yet, does it read every credential of the kinds it
// holds (50,000 nodes' in 0.1 s), which costs less than looking up the
// ones in use by hash.
const recheckEvery = 2 * time.Second

// keepUnused is how long an entry nobody presents is still verified
// again; after it, it is dropped and its next use reads the store.
const keepUnused = time.Minute

// principalCache remembers recognised credentials so that not every call
// reads the store, without letting one work longer than cacheTTL after it
// was revoked: an entry is trusted for cacheTTL after it was last found in
// the store, and the entries used within keepUnused are looked up again
// together every recheckEvery (maintain), well before that runs out.
type principalCache struct {
	mu     sync.Mutex
	cached map[string]*cachedPrincipal
	// forgets counts Forget calls, so that a lookup that raced with one
	// does not put back what it removed.
	forgets uint64
	// checking is set while a recheck runs; lastCheck is when the latest
	// began.
	checking  bool
	lastCheck time.Time
	// gen is the store's credentials generation as a recheck first read
	// it, valid when haveGen is set: an entry marked checked was in the
	// store at or after that read, so while the generation reads the same
	// it still is.
	gen     int64
	haveGen bool
}

type cachedPrincipal struct {
	p server.Principal
	// hash and kind are what the store must still hold for p: the
	// credential of this stored kind and p's name with this hash.
	hash, kind string
	// verified is when the store last had it (when that read began);
	// used when it was last presented.
	verified, used time.Time
	// checked is set once a recheck found it in the store (principalCache.gen).
	checked bool
}

func (c *principalCache) get(key string, now time.Time) (server.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cached[key]
	if !ok || now.Sub(e.verified) >= cacheTTL {
		return server.Principal{}, false
	}
	e.used = now
	return e.p, true
}

// mark is the state a lookup starts from, for put.
func (c *principalCache) mark() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgets
}

// put remembers p, found in the store by a read that began at verified
// (after mark returned since), unless a Forget came in between.
func (c *principalCache) put(key string, e cachedPrincipal, since uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets != since {
		return
	}
	if c.cached == nil || len(c.cached) >= maxCached {
		c.cached = map[string]*cachedPrincipal{}
	}
	e.used, e.checked = e.verified, false
	c.cached[key] = &e
}

func (c *principalCache) forget(kind server.Kind, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgets++
	for k, e := range c.cached {
		if e.p.Kind == kind && e.p.Name == name {
			delete(c.cached, k)
		}
	}
}

// maintain starts a recheck in the background when one is due and none
// runs; callers never wait for it.
func (c *principalCache) maintain(ctx context.Context, st store.Credentials, now time.Time) {
	c.mu.Lock()
	due := !c.checking && len(c.cached) > 0 && now.Sub(c.lastCheck) >= recheckEvery
	if due {
		c.checking, c.lastCheck = true, now
	}
	c.mu.Unlock()
	if due {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cacheTTL)
			defer cancel()
			c.recheck(ctx, st, now)
		}()
	}
}

// recheck verifies the entries again as of now (before its reads begin)
// and drops those not used within keepUnused. It reads the store's
// credentials generation first: when it is the one the last recheck read
// and every entry is checked, no credential changed since they were found
// in the store, and that one read is the recheck. Otherwise it reads the
// credentials of the kinds the cache holds and drops the entries the store
// no longer holds. An entry a Forget removed meanwhile stays removed. A
// failed read changes nothing: the entries run out after cacheTTL, and
// each call then reads the store.
func (c *principalCache) recheck(ctx context.Context, st store.Credentials, now time.Time) {
	defer func() {
		c.mu.Lock()
		c.checking = false
		c.mu.Unlock()
	}()
	c.mu.Lock()
	kinds := map[string]bool{}
	unchecked := false
	for k, e := range c.cached {
		if now.Sub(e.used) > keepUnused {
			delete(c.cached, k)
			continue
		}
		kinds[e.kind] = true
		unchecked = unchecked || !e.checked
	}
	since, known, haveGen := c.forgets, c.gen, c.haveGen
	c.mu.Unlock()
	gen, err := st.CredentialsGeneration(ctx)
	if err != nil {
		return
	}
	if haveGen && gen == known && !unchecked {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.forgets != since {
			return // what the read found may be from before the Forget
		}
		for _, e := range c.cached {
			// Not one put since the loop above: its lookup may have begun
			// before the generation was read.
			if e.checked && now.After(e.verified) {
				e.verified = now
			}
		}
		return
	}
	type held struct{ kind, name, hash string }
	still := map[held]bool{}
	for kind := range kinds {
		creds, err := st.ListCredentials(ctx, kind)
		if err != nil {
			return
		}
		for _, sc := range creds {
			still[held{sc.Kind, sc.Name, sc.Hash}] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.cached {
		switch {
		case !still[held{e.kind, e.p.Name, e.hash}]:
			delete(c.cached, k)
		case c.forgets == since && kinds[e.kind]:
			// Not when a Forget came in between: what the reads found of
			// it may be from before. The reads began after the
			// generation's, so the entry was in the store since then.
			if now.After(e.verified) {
				e.verified = now
			}
			e.checked = true
		}
	}
	if c.forgets == since {
		c.gen, c.haveGen = gen, true
	}
}

// Authenticator recognises the tokens a store keeps hashes of, as
// server.Authenticator, for the credential kinds it maps to principals.
type Authenticator struct {
	st store.Credentials
	// kinds maps a stored credential kind to the principal kind it stands for.
	kinds map[string]server.Kind

	cache principalCache // by hash
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
	a.cache.maintain(ctx, a.st, now)
	if p, ok := a.cache.get(h, now); ok {
		return p, nil
	}
	since := a.cache.mark()
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
		a.cache.put(h, cachedPrincipal{p: p, hash: h, kind: sc.Kind, verified: now}, since)
		return p, nil
	}
	return server.Principal{}, server.ErrNotMine
}

// Forget makes a revoked credential of kind and name stop working at once.
func (a *Authenticator) Forget(kind server.Kind, name string) { a.cache.forget(kind, name) }
