package identity

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// openStore opens a SQLite store for one test, closed at its end.
func openStore(tb testing.TB) *sqlstore.Store {
	tb.Helper()
	sq, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "unyo.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sq.Close() })
	return sq
}

// countingCreds counts the single lookups that reach the store.
type countingCreds struct {
	store.Credentials
	lookups, lists atomic.Int64
}

func (c *countingCreds) LookupCredential(ctx context.Context, hash string) ([]store.Credential, error) {
	c.lookups.Add(1)
	return c.Credentials.LookupCredential(ctx, hash)
}

func (c *countingCreds) ListCredentials(ctx context.Context, kind string) ([]store.Credential, error) {
	c.lists.Add(1)
	return c.Credentials.ListCredentials(ctx, kind)
}

// TestCacheRechecksTogether: an agent presenting its credential every
// 10 s finds it verified on every call (the cache reads the credentials of
// the kinds it holds again, every recheckEvery), not read from the store each time, as
// with the 5 s TTL alone; a credential revoked through another replica
// (no Forget here) stops working at the next recheck, and in any case
// cacheTTL after it was last verified; an entry nobody presents for
// keepUnused is dropped; a failed recheck leaves entries to run out.
func TestCacheRechecksTogether(t *testing.T) {
	ctx := t.Context()
	sq := openStore(t)
	st := &countingCreds{Credentials: sq}
	tokens := map[string]string{}
	for _, node := range []string{"web1", "web2", "idle"} {
		tok, _ := NewToken("unyo-node-")
		tokens[node] = tok
		if err := sq.PutCredential(ctx, store.Credential{Kind: store.CredNode, Name: node, Hash: Hash(tok)}); err != nil {
			t.Fatal(err)
		}
	}
	c := &principalCache{}
	t0 := time.Now()
	auth := func(node string, at time.Time) bool { // as Authenticate, at a given time
		t.Helper()
		h := Hash(tokens[node])
		if p, ok := c.get(h, at); ok {
			return p.Name == node
		}
		since := c.mark()
		creds, err := st.LookupCredential(ctx, h)
		if err != nil || len(creds) == 0 {
			return false
		}
		c.put(h, cachedPrincipal{p: server.Principal{Kind: server.KindNode, Name: creds[0].Name}, hash: h, kind: creds[0].Kind, verified: at}, since)
		return true
	}
	for _, node := range []string{"web1", "web2", "idle"} {
		if !auth(node, t0) {
			t.Fatalf("%s not recognised", node)
		}
	}
	// A recheck every recheckEvery; web1 and web2 present theirs every 10 s.
	for s := 1; s <= 30; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		if s%int(recheckEvery/time.Second) == 0 {
			c.recheck(ctx, st, at)
		}
		if s%10 == 0 && (!auth("web1", at) || !auth("web2", at)) {
			t.Fatalf("at %ds: a credential in use not recognised", s)
		}
	}
	if n := st.lookups.Load(); n != 3 {
		t.Errorf("%d single lookups, want the first 3 only", n)
	}

	// web2 revoked through another replica: gone at the next recheck.
	if err := sq.DeleteCredential(ctx, store.CredNode, "web2"); err != nil {
		t.Fatal(err)
	}
	c.recheck(ctx, st, t0.Add(31*time.Second))
	if _, ok := c.get(Hash(tokens["web2"]), t0.Add(31*time.Second)); ok {
		t.Error("web2 still cached after it was revoked")
	}
	// idle, last presented at t0, is dropped after keepUnused.
	c.recheck(ctx, st, t0.Add(keepUnused+time.Second))
	if _, ok := c.cached[Hash(tokens["idle"])]; ok {
		t.Error("idle kept past keepUnused")
	}

	// A failed recheck keeps web1 until cacheTTL after its last check.
	last := t0.Add(keepUnused + time.Second)
	sq.Close()
	c.recheck(ctx, st, last.Add(time.Second))
	if _, ok := c.get(Hash(tokens["web1"]), last.Add(cacheTTL-time.Millisecond)); !ok {
		t.Error("web1 dropped by a failed recheck")
	}
	if _, ok := c.get(Hash(tokens["web1"]), last.Add(cacheTTL)); ok {
		t.Error("web1 trusted past cacheTTL without a recheck")
	}
}

// TestRecheckReadsOnlyTheGeneration: while no credential changes, a
// recheck reads only the store's credentials generation, also after an
// entry was looked up again (as Authenticate does, reading the generation
// first); a change anywhere (an enrolment, a revocation through another
// replica) makes the next recheck read the credentials of the kinds held,
// and a revoked one stops working there, as does an entry put without a
// generation.
func TestRecheckReadsOnlyTheGeneration(t *testing.T) {
	ctx := t.Context()
	sq := openStore(t)
	st := &countingCreds{Credentials: sq}
	c := &principalCache{}
	t0 := time.Now()
	step := 0
	at := func() time.Time { return t0.Add(time.Duration(step) * recheckEvery) }
	// cache caches node's credential as a lookup at the current step
	// does, reading the generation before it when withGen is set.
	cache := func(node string, withGen bool) string {
		t.Helper()
		h := Hash(node + "-token")
		e := cachedPrincipal{p: server.Principal{Kind: server.KindNode, Name: node}, hash: h, kind: store.CredNode, verified: at()}
		if withGen {
			e.gen, e.hasGen = lookupGen(ctx, st)
		}
		c.put(h, e, c.mark())
		return h
	}
	enrol := func(node string, withGen bool) string {
		t.Helper()
		if err := sq.PutCredential(ctx, store.Credential{Kind: store.CredNode, Name: node, Hash: Hash(node + "-token")}); err != nil {
			t.Fatal(err)
		}
		return cache(node, withGen)
	}
	recheck := func(wantLists int64) {
		t.Helper()
		step++
		before := st.lists.Load()
		c.recheck(ctx, st, at())
		if got := st.lists.Load() - before; got != wantLists {
			t.Errorf("recheck %d read the credentials %d times, want %d", step, got, wantLists)
		}
		for _, e := range c.cached {
			if !e.verified.Equal(at()) {
				t.Errorf("recheck %d: %s is verified as of %v, want %v", step, e.p.Name, e.verified, at())
			}
		}
	}
	web1, web2 := enrol("web1", false), enrol("web2", false)
	recheck(1) // entries without a generation: read in full
	recheck(0)
	recheck(0)
	enrol("web3", true) // the generation moves, so the others are behind it
	recheck(1)
	recheck(0)
	cache("web1", true) // looked up again, nothing changed
	recheck(0)
	cache("web1", false)
	recheck(1)
	if err := sq.DeleteCredential(ctx, store.CredNode, "web2"); err != nil { // through another replica
		t.Fatal(err)
	}
	recheck(1)
	if _, ok := c.cached[web2]; ok {
		t.Error("web2 still cached after it was revoked")
	}
	if _, ok := c.cached[web1]; !ok {
		t.Error("web1 dropped")
	}
	recheck(0)
}

// TestCachePutAfterForget: a lookup that began before a Forget does not
// put back the principal the Forget removed.
func TestCachePutAfterForget(t *testing.T) {
	c := &principalCache{}
	now := time.Now()
	p := server.Principal{Kind: server.KindNode, Name: "web1"}
	since := c.mark()
	c.forget(server.KindNode, "web1") // revoked while the lookup ran
	c.put("h", cachedPrincipal{p: p, hash: "h", kind: store.CredNode, verified: now}, since)
	if _, ok := c.get("h", now); ok {
		t.Error("a lookup from before the Forget put the principal back")
	}
	c.put("h", cachedPrincipal{p: p, hash: "h", kind: store.CredNode, verified: now}, c.mark())
	if _, ok := c.get("h", now); !ok {
		t.Error("a lookup after the Forget was not kept")
	}
}

// BenchmarkAuthenticate: a node's token presented again, as on each of
// its heartbeats: "cached" is the answer from the cache (what every
// heartbeat now costs, the background rechecks included), "store" the
// read of the store each heartbeat made when the cache's 5 s had run out
// (every heartbeat at a 10 s interval).
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	sq := openStore(b)
	const nodes = 10000
	tokens := make([]string, nodes)
	for i := range tokens {
		tokens[i], _ = NewToken("unyo-node-")
		if err := sq.PutCredential(ctx, store.Credential{Kind: store.CredNode, Name: fmt.Sprintf("sim-%05d", i), Hash: Hash(tokens[i])}); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		cached bool
	}{{"cached", true}, {"store", false}} {
		b.Run(tc.name, func(b *testing.B) {
			a := NewAuthenticator(sq, map[string]server.Kind{store.CredNode: server.KindNode})
			for _, tok := range tokens { // every node presented once
				if _, err := a.Authenticate(ctx, server.Credential{Token: tok}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !tc.cached {
					a.cache.mu.Lock()
					a.cache.cached = nil // a miss every time
					a.cache.mu.Unlock()
				}
				if _, err := a.Authenticate(ctx, server.Credential{Token: tokens[i%nodes]}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkRecheck: one recheck of a cache holding 10,000 nodes'
// credentials (every recheckEvery, in the background): "unchanged" while
// no credential changes (what nearly every recheck is), "changed" when one
// did since the last recheck, which reads them all.
func BenchmarkRecheck(b *testing.B) {
	ctx := context.Background()
	sq := openStore(b)
	c := &principalCache{}
	now := time.Now()
	for i := range 10000 {
		name, h := fmt.Sprintf("sim-%05d", i), fmt.Sprintf("hash-%05d", i)
		if err := sq.PutCredential(ctx, store.Credential{Kind: store.CredNode, Name: name, Hash: h}); err != nil {
			b.Fatal(err)
		}
		c.put(h, cachedPrincipal{p: server.Principal{Kind: server.KindNode, Name: name}, hash: h, kind: store.CredNode, verified: now}, c.mark())
	}
	c.recheck(ctx, sq, now) // the first one reads them all
	for _, changed := range []bool{false, true} {
		b.Run(map[bool]string{false: "unchanged", true: "changed"}[changed], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if changed {
					b.StopTimer()
					if err := sq.PutCredential(ctx, store.Credential{Kind: store.CredPeer, Name: "other", Hash: fmt.Sprint(b.N)}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				c.checking = true
				c.recheck(ctx, sq, now)
			}
			if len(c.cached) != 10000 {
				b.Fatalf("%d entries left", len(c.cached))
			}
		})
	}
}
