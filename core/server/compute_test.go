package server_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/server"
)

// A node's agent forwards the calls of an agent inside a compute assigned
// to it (HeaderCompute); the call then acts as that compute. Anybody else
// naming a compute, or a node naming one not assigned to it, is refused.
func TestCallsForACompute(t *testing.T) {
	nodes := server.AuthenticatorFunc(func(_ context.Context, cred server.Credential) (server.Principal, error) {
		if name, ok := strings.CutPrefix(cred.Token, "node-"); ok {
			return server.Principal{Kind: server.KindNode, Name: name}, nil
		}
		return server.Principal{}, server.ErrNotMine
	})
	assigned := map[string]string{"web-0": "n1"}
	a := &server.Auth{AdminTokens: []string{"adm"}, JoinTokens: []string{"jn"}, Authenticators: []server.Authenticator{nodes},
		ComputeOf: func(_ context.Context, node, compute string) error {
			if assigned[compute] != node {
				return errors.New("not assigned")
			}
			return nil
		}}
	for _, tc := range []struct {
		name, token, compute string
		want                 string // principal name, "" = refused
	}{
		{"its node", "node-n1", "web-0", "web-0"},
		{"another node", "node-n2", "web-0", ""},
		{"an unknown compute", "node-n1", "web-9", ""},
		{"an admin", "adm", "web-0", ""},
		{"a join token", "jn", "web-0", ""},
		{"no compute: the node itself", "node-n1", "", "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", unyov1connect.AgentServiceHeartbeatProcedure, nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			if tc.compute != "" {
				r.Header.Set(server.HeaderCompute, tc.compute)
			}
			p, err := a.Check(r, unyov1connect.AgentServiceHeartbeatProcedure)
			if tc.want == "" {
				if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Fatalf("got %v, %v; want refused", p, err)
				}
				return
			}
			if err != nil || p.Name != tc.want || p.Kind != server.KindNode {
				t.Fatalf("got %v, %v; want node-like %s", p, err, tc.want)
			}
			if tc.compute != "" && p.Via != "n1" {
				t.Errorf("via %q, want n1", p.Via)
			}
		})
	}
	// A server that takes no calls for computes refuses them.
	b := &server.Auth{AdminTokens: []string{"adm"}, Authenticators: []server.Authenticator{nodes}}
	r := httptest.NewRequest("POST", unyov1connect.AgentServiceHeartbeatProcedure, nil)
	r.Header.Set("Authorization", "Bearer node-n1")
	r.Header.Set(server.HeaderCompute, "web-0")
	if _, err := b.Check(r, unyov1connect.AgentServiceHeartbeatProcedure); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("without ComputeOf: %v, want refused", err)
	}
}
