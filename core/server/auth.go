package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// Auth holds the bearer tokens a server accepts. Admin tokens may call
// everything; join tokens only what agents and registering clusters need.
// With no tokens at all, auth is off (unyo dev on loopback).
type Auth struct {
	AdminTokens []string
	JoinTokens  []string
}

// Enabled reports whether any token is configured.
func (a Auth) Enabled() bool { return len(a.AdminTokens)+len(a.JoinTokens) > 0 }

// joinProcedures are the calls a join token may make.
var joinServices = []string{
	"/" + unyov1connect.AgentServiceName + "/",
	unyov1connect.MetricsServiceWriteMetricsProcedure,
	unyov1connect.LogsServiceWriteLogsProcedure,
	unyov1connect.ClusterServiceRegisterClusterProcedure,
	unyov1connect.StatusServiceGetStatusProcedure,
}

func (a Auth) allowed(procedure, token string) error {
	if !a.Enabled() {
		return nil
	}
	if token == "" {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("no bearer token: pass --token or set UNYO_TOKEN"))
	}
	if matchAny(a.AdminTokens, token) {
		return nil
	}
	if matchAny(a.JoinTokens, token) {
		for _, p := range joinServices {
			if strings.HasPrefix(procedure, p) {
				return nil
			}
		}
		return connect.NewError(connect.CodePermissionDenied, errors.New("a join token may not call "+procedure+"; use an admin token"))
	}
	return connect.NewError(connect.CodeUnauthenticated, errors.New("the bearer token is not one this server accepts"))
}

func matchAny(tokens []string, token string) bool {
	ok := 0
	for _, t := range tokens {
		ok |= subtle.ConstantTimeCompare([]byte(t), []byte(token))
	}
	return ok == 1
}

// Interceptor checks the bearer token of every unary and streaming call.
func (a Auth) Interceptor() connect.Interceptor { return authInterceptor{a} }

type authInterceptor struct{ auth Auth }

func bearer(h interface{ Get(string) string }) string {
	v := h.Get("Authorization")
	if t, ok := strings.CutPrefix(v, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func (i authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		if err := i.auth.allowed(req.Spec().Procedure, bearer(req.Header())); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := i.auth.allowed(conn.Spec().Procedure, bearer(conn.RequestHeader())); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
