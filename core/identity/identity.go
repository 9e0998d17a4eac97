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
}

type cachedPrincipal struct {
	p server.Principal
	// hash and kind are what the store must still hold for p: the
	// credential of this stored kind and p's name with this hash.
	hash, kind string
	// verified is when the store last had it (when that read began);
	// used when it was last presented.
	verified, used time.Time
	// gen is the store's credentials generation read before the read
	// that last found it (when hasGen): it was in the store at or after
	// that, so while the generation reads the same it still is.
	gen    int64
	hasGen bool
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
	e.used = e.verified
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
// credentials generation first: an entry found in the store after the
// same generation was read is still there, and for a cache of such entries
// that one read is the recheck. Otherwise (a credential changed, or an
// entry was put without a generation) it reads the credentials of the
// kinds the cache holds, drops the entries the store no longer holds and
// gives the rest the generation. An entry a Forget removed meanwhile stays
// removed. A failed read changes nothing: the entries run out after
// cacheTTL, and each call then reads the store.
func (c *principalCache) recheck(ctx context.Context, st store.Credentials, now time.Time) {
	defer func() {
		c.mu.Lock()
		c.checking = false
		c.mu.Unlock()
	}()
	gen, err := st.CredentialsGeneration(ctx)
	if err != nil {
		return
	}
	c.mu.Lock()
	kinds := map[string]bool{}
	behind := false // an entry not known to be in the store as of gen
	for k, e := range c.cached {
		if now.Sub(e.used) > keepUnused {
			delete(c.cached, k)
			continue
		}
		kinds[e.kind] = true
		behind = behind || !e.hasGen || e.gen != gen
	}
	since := c.forgets
	if !behind {
		for _, e := range c.cached {
			if now.After(e.verified) {
				e.verified = now
			}
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
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
			e.gen, e.hasGen = gen, true
		}
	}
}

// lookupGen reads the credentials generation before a lookup, for the
// entry the lookup puts (cachedPrincipal.gen); ok is false when it cannot.
func lookupGen(ctx context.Context, st store.Credentials) (gen int64, ok bool) {
	gen, err := st.CredentialsGeneration(ctx)
	return gen, err == nil
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
	gen, hasGen := lookupGen(ctx, a.st)
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
		a.cache.put(h, cachedPrincipal{p: p, hash: h, kind: sc.Kind, verified: now, gen: gen, hasGen: hasGen}, since)
		return p, nil
	}
	return server.Principal{}, server.ErrNotMine
}

// Forget makes a revoked credential of kind and name stop working at once.
func (a *Authenticator) Forget(kind server.Kind, name string) { a.cache.forget(kind, name) }
