package server

import (
	"context"
	"net/http"
	"strings"
)

// Root forwards operators' requests to clusters with its own credential and
// names the operator in these headers, so that a cluster records who acted,
// not "root". A cluster believes them only from root (see Actor).
const (
	HeaderOnBehalfOf = "Unyo-On-Behalf-Of"
	HeaderForwardFor = "Unyo-Forwarded-For"
)

// SetOnBehalfOf names the principal of ctx on a request root forwards.
func SetOnBehalfOf(ctx context.Context, h http.Header) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	if !ok {
		return
	}
	h.Set(HeaderOnBehalfOf, p.String())
	if p.From != "" {
		h.Set(HeaderForwardFor, p.From)
	}
}

type forwardedKey struct{}

type forwarded struct{ who, from string }

// withForwarded keeps what the forwarding headers of r say, for Actor.
func withForwarded(ctx context.Context, r *http.Request) context.Context {
	who := clean(r.Header.Get(HeaderOnBehalfOf))
	if who == "" {
		return ctx
	}
	return context.WithValue(ctx, forwardedKey{}, forwarded{who: who, from: clean(r.Header.Get(HeaderForwardFor))})
}

// clean bounds a header value and keeps it on one printable line, since it
// ends up in the audit log and in alert history.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// forwardingTrusted says whether p may act for another principal: root with
// a cluster's credential, or an admin token (what root presents to clusters
// until it has per-cluster credentials).
func forwardingTrusted(p Principal) bool {
	return p.Kind == KindRoot || (p.Kind == KindUser && p.Role >= RoleAdmin && strings.HasPrefix(p.Name, "admin-token-"))
}

// Actor is who a write is recorded as: the operator root acted for when the
// caller is root, otherwise the caller's own name. It never comes from the
// request's body (the CLI's --by).
func Actor(ctx context.Context) string {
	who, _ := ActorFrom(ctx)
	return who
}

// ActorFrom is Actor and where the actor's request came from: the remote
// address, and for a forwarded request also the operator's address at root.
func ActorFrom(ctx context.Context) (who, from string) {
	p := PrincipalFrom(ctx)
	if f, ok := ctx.Value(forwardedKey{}).(forwarded); ok && forwardingTrusted(p) {
		from = p.From + " (forwarded by " + p.String() + ")"
		if f.from != "" {
			from = f.from + " via " + from
		}
		return f.who, from
	}
	if p.Kind == KindAnonymous {
		return p.Name, p.From
	}
	return p.String(), p.From
}

// ActorOr is Actor, except that a server without authentication has no
// identity to record and takes the name the client claims (--by), if any.
// With authentication the claim is ignored: the credential says who acts.
func ActorOr(ctx context.Context, claimed string) string {
	if PrincipalFrom(ctx).Kind == KindAnonymous && claimed != "" {
		return clean(claimed)
	}
	return Actor(ctx)
}
