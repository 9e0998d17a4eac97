// Package rbac issues scoped API tokens, turns them into principals, and
// keeps the audit log of every write. Root and clusters both use it, each
// over its own state store.
package rbac

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// secretPrefix marks unyo's issued tokens, so that a leaked one is easy to
// recognise in logs and by secret scanners.
const secretPrefix = "unyo_"

// NewSecret returns a new random token: 32 bytes from the system's CSPRNG.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes for a token: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Digest is what the store keeps of a secret: its SHA-256, in hex.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// DefaultCacheTTL bounds how long a revoked token still works on a server
// that has seen it recently.
const DefaultCacheTTL = 2 * time.Second

// touchEvery bounds the writes that recording a token's last use costs.
const touchEvery = time.Minute

// Authenticator turns issued tokens into principals. It remembers what the
// store said for CacheTTL so that a busy client costs one read per TTL, not
// one per request; revocation is thus effective within CacheTTL.
type Authenticator struct {
	Store store.Tokens
	// Cluster, on a cluster server, refuses tokens scoped to other clusters.
	Cluster  string
	CacheTTL time.Duration
	Logger   *slog.Logger
	Now      func() time.Time

	mu    sync.Mutex
	cache map[string]cached // by digest
}

type cached struct {
	token   *unyov1.Token // nil: no such token
	fetched time.Time
	touched time.Time
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate implements server.Authenticator.
func (a *Authenticator) Authenticate(ctx context.Context, cred server.Credential) (server.Principal, error) {
	if cred.Token == "" {
		return server.Principal{}, server.ErrNotMine
	}
	digest := Digest(cred.Token)
	now := a.now()
	t, touch, err := a.lookup(ctx, digest, now)
	if err != nil {
		return server.Principal{}, err
	}
	if t == nil {
		return server.Principal{}, server.ErrNotMine
	}
	switch {
	case t.GetRevokedAt() != nil:
		return server.Principal{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("token %q was revoked at %s; ask an admin for a new one", t.GetName(), t.GetRevokedAt().AsTime().UTC().Format(time.RFC3339)))
	case t.GetExpiresAt() != nil && !now.Before(t.GetExpiresAt().AsTime()):
		return server.Principal{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("token %q expired at %s; ask an admin for a new one", t.GetName(), t.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)))
	}
	p, err := principal(t)
	if err != nil {
		return server.Principal{}, connect.NewError(connect.CodeUnauthenticated, err)
	}
	if a.Cluster != "" && !p.InCluster(a.Cluster) {
		return server.Principal{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("token %q is scoped to the clusters %s, not to this cluster (%s)", t.GetName(), strings.Join(p.Clusters, ", "), a.Cluster))
	}
	if touch {
		if err := a.Store.TouchToken(ctx, t.GetId(), now); err != nil && a.Logger != nil {
			a.Logger.Warn("recording a token's last use failed", "token", t.GetName(), "err", err)
		}
	}
	return p, nil
}

// lookup returns the token with digest (nil if none) and whether its last
// use should be recorded now.
func (a *Authenticator) lookup(ctx context.Context, digest string, now time.Time) (*unyov1.Token, bool, error) {
	ttl := a.CacheTTL
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	a.mu.Lock()
	c, ok := a.cache[digest]
	a.mu.Unlock()
	if !ok || now.Sub(c.fetched) >= ttl || now.Before(c.fetched) {
		t, err := a.Store.TokenByDigest(ctx, digest)
		switch {
		case errors.Is(err, store.ErrNotFound):
			t = nil
		case err != nil:
			return nil, false, connect.NewError(connect.CodeUnavailable, fmt.Errorf("cannot check the token: the state store failed: %w", err))
		}
		c = cached{token: t, fetched: now, touched: c.touched}
	}
	touch := c.token != nil && now.Sub(c.touched) >= touchEvery
	if touch {
		c.touched = now
	}
	a.mu.Lock()
	if a.cache == nil {
		a.cache = map[string]cached{}
	}
	// Unknown secrets are remembered too (an attacker's guesses must not
	// each cost a read), but the cache is bounded.
	if len(a.cache) >= 10_000 {
		clear(a.cache)
	}
	a.cache[digest] = c
	a.mu.Unlock()
	return c.token, touch, nil
}

// principal is what a stored token may do.
func principal(t *unyov1.Token) (server.Principal, error) {
	role, err := server.ParseRole(t.GetRole())
	if err != nil {
		return server.Principal{}, fmt.Errorf("token %q: %w", t.GetName(), err)
	}
	return server.Principal{
		Kind: server.KindUser, Name: t.GetName(), Role: role, Commands: t.GetCommands(),
		Clusters: slices.Clone(t.GetClusters()), Kinds: slices.Clone(t.GetKinds()),
	}, nil
}

// TokenService issues, lists and revokes tokens.
type TokenService struct {
	Store store.Tokens
	Audit *Recorder
	Now   func() time.Time
}

func (s *TokenService) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// MaxExpiry bounds a token's lifetime to keep a forgotten token from living
// forever by accident; no expiry at all must be asked for (expires_in 0).
const MaxExpiry = 10 * 365 * 24 * time.Hour

func (s *TokenService) CreateToken(ctx context.Context, req *connect.Request[unyov1.CreateTokenRequest]) (*connect.Response[unyov1.CreateTokenResponse], error) {
	m := req.Msg
	t, err := s.newToken(ctx, m)
	target := Target{Kind: "Token", Name: m.GetName()}
	if err != nil {
		s.Audit.Record(ctx, "TokenService/CreateToken", target, nil, nil, err)
		return nil, err
	}
	secret, err := NewSecret()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	t.Id = server.TokenID(secret)
	err = s.Store.CreateToken(ctx, t, Digest(secret))
	switch {
	case errors.Is(err, store.ErrExists):
		err = connect.NewError(connect.CodeAlreadyExists, err)
	case err != nil:
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("store the token: %w", err))
	}
	s.Audit.Record(ctx, "TokenService/CreateToken", target, nil, t, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.CreateTokenResponse{Token: t, Secret: secret}), nil
}

// newToken validates a request and checks that the caller gives away no
// more than it has: a scoped admin cannot mint an unscoped token.
func (s *TokenService) newToken(ctx context.Context, m *unyov1.CreateTokenRequest) (*unyov1.Token, error) {
	invalid := func(format string, args ...any) error {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
	}
	if err := validate.Name(m.GetName()); err != nil {
		return nil, invalid("name: %w", err)
	}
	// Configured tokens are named so; a cluster believes forwarded names
	// only from them (server.Actor), so no issued token may look like one.
	for _, reserved := range []string{"admin-token-", "join-token-"} {
		if strings.HasPrefix(m.GetName(), reserved) {
			return nil, invalid("name: %q starts with %q, which names configured tokens; choose another name", m.GetName(), reserved)
		}
	}
	role, err := server.ParseRole(m.GetRole())
	if err != nil {
		return nil, invalid("role: %w", err)
	}
	for i, c := range m.GetClusters() {
		if err := validate.Name(c); err != nil {
			return nil, invalid("clusters[%d]: %w", i, err)
		}
	}
	reg := builtin.Kinds()
	kindNames := make([]string, len(m.GetKinds()))
	for i, k := range m.GetKinds() {
		kd, err := reg.Parse(k)
		if err != nil {
			return nil, invalid("kinds[%d]: %w", i, err)
		}
		kindNames[i] = kd.Name
	}
	exp := m.GetExpiresIn().AsDuration()
	if exp < 0 || exp > MaxExpiry {
		return nil, invalid("expires_in: must be between 0 (never) and %s, got %s", MaxExpiry, exp)
	}
	p := server.PrincipalFrom(ctx)
	deny := func(format string, args ...any) error {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not create a token that %s", server.Actor(ctx), fmt.Sprintf(format, args...)))
	}
	if p.Kind != server.KindAnonymous && p.Kind != server.KindRoot {
		switch {
		case role > p.Role:
			return nil, deny("has the %s role: its own role is %s", role, p.Role)
		case m.GetCommands() && !p.Commands:
			return nil, deny("may apply command checks: it lacks that right itself")
		case len(p.Clusters) > 0 && (len(m.GetClusters()) == 0 || slices.ContainsFunc(m.GetClusters(), func(c string) bool { return !p.InCluster(c) })):
			return nil, deny("reaches beyond its own clusters (%s); name them with --clusters", strings.Join(p.Clusters, ", "))
		case len(p.Kinds) > 0 && (len(kindNames) == 0 || slices.ContainsFunc(kindNames, func(k string) bool { return !p.MayWriteKind(k) })):
			return nil, deny("reaches beyond its own kinds (%s); name them with --kinds", strings.Join(p.Kinds, ", "))
		}
	}
	now := s.now()
	t := &unyov1.Token{
		Name: m.GetName(), Role: role.String(), Commands: m.GetCommands(), Clusters: m.GetClusters(), Kinds: kindNames,
		CreatedBy: server.Actor(ctx), CreatedAt: timestamppb.New(now),
	}
	if exp > 0 {
		t.ExpiresAt = timestamppb.New(now.Add(exp))
	}
	return t, nil
}

func (s *TokenService) ListTokens(ctx context.Context, _ *connect.Request[unyov1.ListTokensRequest]) (*connect.Response[unyov1.ListTokensResponse], error) {
	ts, err := s.Store.ListTokens(ctx)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list tokens: %w", err))
	}
	return connect.NewResponse(&unyov1.ListTokensResponse{Tokens: ts}), nil
}

func (s *TokenService) RevokeToken(ctx context.Context, req *connect.Request[unyov1.RevokeTokenRequest]) (*connect.Response[unyov1.RevokeTokenResponse], error) {
	name := req.Msg.GetName()
	t, err := s.Store.RevokeToken(ctx, name, s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		err = connect.NewError(connect.CodeNotFound, fmt.Errorf("no live token is called %q (see unyo tokens ls)", name))
	case err != nil:
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("revoke token %q: %w", name, err))
	}
	var before *unyov1.Token
	if t != nil {
		before = &unyov1.Token{Id: t.GetId(), Name: t.GetName(), Role: t.GetRole()}
	}
	s.Audit.Record(ctx, "TokenService/RevokeToken", Target{Kind: "Token", Name: name}, before, t, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&unyov1.RevokeTokenResponse{Token: t}), nil
}
