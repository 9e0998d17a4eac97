package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
)

func TestRequireWrite(t *testing.T) {
	user := func(r Role, mod func(*Principal)) Principal {
		p := Principal{Kind: KindUser, Name: "u", Role: r}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	commands := func(p *Principal) { p.Commands = true }
	inEU := func(p *Principal) { p.Clusters = []string{"eu"} }
	onlyMaint := func(p *Principal) { p.Kinds = []string{"Maintenance"} }
	cases := []struct {
		name    string
		p       Principal
		kind    string
		cluster string
		command bool
		allowed bool
	}{
		{"viewer applies maintenance", user(RoleViewer, nil), "Maintenance", "eu", false, false},
		{"operator applies maintenance", user(RoleOperator, nil), "Maintenance", "eu", false, true},
		{"operator applies maintenance everywhere", user(RoleOperator, nil), "Maintenance", "", false, true},
		{"operator applies a check", user(RoleOperator, nil), "Check", "eu", false, false},
		{"operator with commands applies a command check", user(RoleOperator, commands), "Check", "eu", true, false},
		{"admin applies a check", user(RoleAdmin, nil), "Check", "eu", false, true},
		{"admin applies an event rule", user(RoleAdmin, nil), "EventRule", "", false, true},
		{"admin without commands applies a command check", user(RoleAdmin, nil), "Check", "eu", true, false},
		{"admin with commands applies a command check", user(RoleAdmin, commands), "Check", "eu", true, true},
		{"admin scoped to eu writes in eu", user(RoleAdmin, inEU), "Check", "eu", false, true},
		{"admin scoped to eu writes in us", user(RoleAdmin, inEU), "Check", "us", false, false},
		{"admin scoped to eu writes everywhere", user(RoleAdmin, inEU), "Check", "", false, false},
		{"admin scoped to maintenance applies a check", user(RoleAdmin, onlyMaint), "Check", "eu", false, false},
		{"admin scoped to maintenance applies maintenance", user(RoleAdmin, onlyMaint), "maintenance", "eu", false, true},
		{"root", Principal{Kind: KindRoot, Name: "root"}, "Check", "", true, true},
		{"anonymous", Anonymous(""), "Check", "", true, true},
		{"node", Principal{Kind: KindNode, Name: "web1"}, "Maintenance", "eu", false, false},
		{"cluster", Principal{Kind: KindCluster, Name: "eu"}, "Check", "eu", false, false},
		{"join token", Principal{Kind: KindJoin, Name: "j"}, "Check", "eu", false, false},
		{"no principal", Principal{Kind: KindUser, Name: "unauthenticated"}, "Maintenance", "eu", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := RequireWrite(WithPrincipal(context.Background(), c.p), c.kind, c.cluster, c.command)
			if (err == nil) != c.allowed {
				t.Fatalf("allowed=%v, want %v (%v)", err == nil, c.allowed, err)
			}
			if err != nil && connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("code %v, want permission_denied", connect.CodeOf(err))
			}
		})
	}
}

// A forwarded operator's name is believed from root only; anybody else
// naming someone in the header is recorded as themselves.
func TestActor(t *testing.T) {
	a := &Auth{AdminTokens: []string{"admin-secret"}}
	a.Authenticators = []Authenticator{AuthenticatorFunc(func(_ context.Context, c Credential) (Principal, error) {
		switch c.Token {
		case "alice-secret":
			return Principal{Kind: KindUser, Name: "alice", Role: RoleOperator}, nil
		case "root-secret":
			return Principal{Kind: KindRoot, Name: "root"}, nil
		}
		return Principal{}, ErrNotMine
	})}
	cases := []struct {
		token, onBehalf, claimed string
		want                     string
	}{
		{"alice-secret", "", "", "alice"},
		{"alice-secret", "", "mallory", "alice"},
		{"alice-secret", "bob", "", "alice"},
		{"root-secret", "bob", "", "bob"},
		{"admin-secret", "bob", "", "bob"},
		{"admin-secret", "", "", "admin-token-" + TokenID("admin-secret")},
		{"root-secret", "bob\r\nInjected: 1", "", "bobInjected: 1"},
	}
	for _, c := range cases {
		var got string
		h := a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got = ActorOr(r.Context(), c.claimed)
		}))
		req := httptest.NewRequest(http.MethodPost, "/unyo.v1.AlertService/AckAlert", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header[HeaderOnBehalfOf] = []string{c.onBehalf}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got != c.want {
			t.Errorf("token %s, on behalf of %q, --by %q: actor %q, want %q", c.token, c.onBehalf, c.claimed, got, c.want)
		}
	}
	// Without authentication the client's claim is all there is.
	anon := WithPrincipal(context.Background(), Anonymous("127.0.0.1:1"))
	if got := ActorOr(anon, "carol"); got != "carol" {
		t.Errorf("anonymous with --by carol: %q", got)
	}
}
