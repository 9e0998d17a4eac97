package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// Credential is what a request presents: a bearer token and, over TLS, the
// client certificate chains the server verified.
type Credential struct {
	Token string
	// Chains are the verified chains of the client certificate (empty
	// without one).
	Chains [][]*x509.Certificate
}

// ErrNotMine tells Auth that an authenticator does not know a credential, so
// the next one is asked.
var ErrNotMine = errors.New("credential not recognised")

// Authenticator turns a credential into a principal: issued tokens in the
// state store, node credentials, cluster credentials, client certificates.
// It returns ErrNotMine for a credential it does not know and another
// error when it knows it but refuses it (revoked, expired) or cannot tell.
type Authenticator interface {
	Authenticate(ctx context.Context, cred Credential) (Principal, error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(ctx context.Context, cred Credential) (Principal, error)

func (f AuthenticatorFunc) Authenticate(ctx context.Context, cred Credential) (Principal, error) {
	return f(ctx, cred)
}

// Auth authenticates and authorizes every API request before its body is
// read. Admin tokens (from configuration) may do everything; join tokens may
// only enrol nodes; further credentials come from Authenticators. With no
// configured token auth is off, and a server refuses to listen beyond
// loopback that way unless Insecure is set.
type Auth struct {
	AdminTokens []string
	JoinTokens  []string
	// Authenticators are asked in order after the configured tokens.
	Authenticators []Authenticator
	// Insecure allows serving without authentication beyond loopback.
	Insecure bool
	// Denied, if set, hears of every authenticated call refused for lack
	// of rights, before its body is read (for the audit log).
	Denied func(r *http.Request, procedure string, p Principal, err error)
	// ComputeOf, if set, says whether node may speak for compute (the
	// compute is assigned to it): a node's agent forwards the calls of an
	// agent inside a compute with its own credential and HeaderCompute,
	// and the call then acts as that compute. Without it, a call naming a
	// compute is refused.
	ComputeOf func(ctx context.Context, node, compute string) error

	extra map[string]Access
}

// Enabled reports whether requests must carry a credential.
func (a *Auth) Enabled() bool { return len(a.AdminTokens)+len(a.JoinTokens) > 0 }

// TokenID names a token without revealing it: the first 12 hex digits of
// its SHA-256, as the audit log and `unyo tokens ls` show it.
func TokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// authenticate returns who presents cred.
func (a *Auth) authenticate(ctx context.Context, cred Credential) (Principal, error) {
	if cred.Token == "" && len(cred.Chains) == 0 {
		return Principal{}, connect.NewError(connect.CodeUnauthenticated, errors.New("no credential: this server needs a bearer token or a client certificate"))
	}
	if cred.Token != "" {
		if matchAny(a.AdminTokens, cred.Token) {
			return Principal{Kind: KindUser, Name: "admin-token-" + TokenID(cred.Token), Role: RoleAdmin, Commands: true}, nil
		}
		if matchAny(a.JoinTokens, cred.Token) {
			return Principal{Kind: KindJoin, Name: "join-token-" + TokenID(cred.Token)}, nil
		}
	}
	for _, au := range a.Authenticators {
		p, err := au.Authenticate(ctx, cred)
		if errors.Is(err, ErrNotMine) {
			continue
		}
		if err != nil {
			var ce *connect.Error
			if errors.As(err, &ce) {
				return Principal{}, err
			}
			return Principal{}, connect.NewError(connect.CodeUnauthenticated, err)
		}
		return p, nil
	}
	return Principal{}, connect.NewError(connect.CodeUnauthenticated, errors.New("the credential is not one this server accepts (unknown, revoked or expired token, or a certificate from another CA)"))
}

func matchAny(tokens []string, token string) bool {
	ok := 0
	for _, t := range tokens {
		ok |= subtle.ConstantTimeCompare([]byte(t), []byte(token))
	}
	return ok == 1
}

func bearer(h http.Header) string {
	v := h.Get("Authorization")
	if t, ok := strings.CutPrefix(v, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// Check authenticates and authorizes a call of procedure from r; the
// returned principal carries r's remote address.
func (a *Auth) Check(r *http.Request, procedure string) (Principal, error) {
	if !a.Enabled() {
		return Anonymous(r.RemoteAddr), nil
	}
	cred := Credential{Token: bearer(r.Header)}
	if r.TLS != nil {
		cred.Chains = r.TLS.VerifiedChains
	}
	p, err := a.authenticate(r.Context(), cred)
	if err != nil {
		return Principal{}, err
	}
	p.From = r.RemoteAddr
	if c := r.Header.Get(HeaderCompute); c != "" {
		if p, err = a.actFor(r.Context(), p, c); err != nil {
			return Principal{}, err
		}
	}
	if err := a.authorize(procedure, p); err != nil {
		if a.Denied != nil {
			a.Denied(r, procedure, p, err)
		}
		return Principal{}, err
	}
	return p, nil
}

// HeaderCompute names the compute a node's agent forwards a call for (the
// node agent's proxy sets it from the source address of the compute's
// port namespace, never from what the compute sent).
const HeaderCompute = "Unyo-Compute"

// actFor turns node p into the compute it forwards a call for: a node-like
// principal named as the compute, which only a node the compute is
// assigned to may speak for.
func (a *Auth) actFor(ctx context.Context, p Principal, compute string) (Principal, error) {
	if p.Kind != KindNode {
		return Principal{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not speak for compute %q: only the agent of the node it is assigned to may", p.describe(), compute))
	}
	if a.ComputeOf == nil {
		return Principal{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("this server takes no calls for computes (compute %q, from node %q)", compute, p.Name))
	}
	if err := a.ComputeOf(ctx, p.Name, compute); err != nil {
		return Principal{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %q may not speak for compute %q: %w", p.Name, compute, err))
	}
	return Principal{Kind: KindNode, Name: compute, Via: p.Name, From: p.From}, nil
}

// Middleware authenticates and authorizes every call of the API before any
// of its body is read, and puts the principal in the request's context.
func (a *Auth) Middleware(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Check(r, r.URL.Path)
		if err != nil {
			_ = ew.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(withForwarded(WithPrincipal(r.Context(), p), r)))
	})
}

// Authorize is Middleware's check for a handler outside the connect API
// (the Prometheus API): it authorizes r as a call of procedure, whose
// access the handler shares, and returns the context carrying the caller.
func (a *Auth) Authorize(r *http.Request, procedure string) (context.Context, error) {
	p, err := a.Check(r, procedure)
	if err != nil {
		return nil, err
	}
	return withForwarded(WithPrincipal(r.Context(), p), r), nil
}

// RequireNode checks that the caller may act as node: the node itself, or a
// user with the admin role (and anybody without authentication).
func RequireNode(ctx context.Context, node string) error {
	p := PrincipalFrom(ctx)
	switch {
	case p.Kind == KindNode && p.Name == node:
		return nil
	case p.Kind == KindNode:
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %q may act only as itself, not as node %q", p.Name, node))
	case p.IsUser() && p.Role >= RoleAdmin, p.Kind == KindRoot:
		return nil
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not act as node %q", p.describe(), node))
}

// RequireWrite checks that the caller may apply or delete an object of kind
// in cluster ("" for every cluster). command says the object makes agents
// run a command, which needs the separate commands right.
func RequireWrite(ctx context.Context, kind, cluster string, command bool) error {
	p := PrincipalFrom(ctx)
	if p.Kind == KindRoot || p.Kind == KindAnonymous {
		return nil
	}
	deny := func(format string, args ...any) error {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not %s", p.describe(), fmt.Sprintf(format, args...)))
	}
	need := RoleAdmin
	if strings.EqualFold(kind, "Maintenance") {
		need = RoleOperator
	}
	switch {
	case !p.IsUser() || p.Role < need:
		return deny("write %s objects: that needs the %s role", kind, need)
	case !p.MayWriteKind(kind):
		return deny("write %s objects: its scope is the kinds %s", kind, strings.Join(p.Kinds, ", "))
	case cluster == "" && len(p.Clusters) > 0:
		return deny("write to every cluster: its scope is the clusters %s; name one with cluster:", strings.Join(p.Clusters, ", "))
	case cluster != "" && !p.InCluster(cluster):
		return deny("write to cluster %q: its scope is the clusters %s", cluster, strings.Join(p.Clusters, ", "))
	case command && !p.Commands:
		return deny("apply a check that runs a command on agents: that needs the commands right (unyo tokens create --commands)")
	}
	return nil
}
