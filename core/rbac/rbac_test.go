package rbac_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// clock is a settable time for the authenticator's cache and expiry.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func admin() context.Context {
	return server.WithPrincipal(context.Background(), server.Principal{Kind: server.KindUser, Name: "boss", Role: server.RoleAdmin, Commands: true})
}

func create(t *testing.T, svc *rbac.TokenService, ctx context.Context, req *unyov1.CreateTokenRequest) string {
	t.Helper()
	resp, err := svc.CreateToken(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create token %s: %v", req.GetName(), err)
	}
	return resp.Msg.GetSecret()
}

func TestAuthenticator(t *testing.T) {
	st := openStore(t)
	clk := &clock{now: time.Now()}
	svc := &rbac.TokenService{Store: st, Audit: &rbac.Recorder{Store: st}, Now: clk.Now}
	au := &rbac.Authenticator{Store: st, Cluster: "eu", CacheTTL: 2 * time.Second, Now: clk.Now}

	ops := create(t, svc, admin(), &unyov1.CreateTokenRequest{Name: "ops", Role: "operator", Kinds: []string{"maintenance"}, Clusters: []string{"eu"}})
	us := create(t, svc, admin(), &unyov1.CreateTokenRequest{Name: "us-viewer", Role: "viewer", Clusters: []string{"us"}})
	short := create(t, svc, admin(), &unyov1.CreateTokenRequest{Name: "short", Role: "viewer", ExpiresIn: durationpb.New(time.Hour)})

	p, err := au.Authenticate(t.Context(), server.Credential{Token: ops})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != server.KindUser || p.Name != "ops" || p.Role != server.RoleOperator || p.Kinds[0] != "Maintenance" || p.Commands {
		t.Errorf("principal %+v", p)
	}
	if _, err := au.Authenticate(t.Context(), server.Credential{Token: "unyo_guess"}); !errors.Is(err, server.ErrNotMine) {
		t.Errorf("unknown token: %v, want ErrNotMine", err)
	}
	if _, err := au.Authenticate(t.Context(), server.Credential{Token: us}); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "us") {
		t.Errorf("a token scoped to cluster us at cluster eu: %v", err)
	}

	// Revoked: refused once the cache turned over, and no later.
	if _, err := svc.RevokeToken(admin(), connect.NewRequest(&unyov1.RevokeTokenRequest{Name: "ops"})); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(2 * time.Second)
	if _, err := au.Authenticate(t.Context(), server.Credential{Token: ops}); connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked token after the cache TTL: %v", err)
	}

	// Expired.
	if _, err := au.Authenticate(t.Context(), server.Credential{Token: short}); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(time.Hour)
	if _, err := au.Authenticate(t.Context(), server.Credential{Token: short}); connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}

	// The store holds no secret, and listing names the last use.
	ts, err := st.ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		for _, secret := range []string{ops, us, short} {
			if strings.Contains(tk.String(), secret) {
				t.Errorf("token %s holds a secret", tk.GetName())
			}
		}
		if tk.GetName() == "short" && tk.GetLastUsedAt() == nil {
			t.Error("a used token has no last use")
		}
	}
}

// A token can give away no more than its creator has.
func TestCreateTokenNoEscalation(t *testing.T) {
	st := openStore(t)
	svc := &rbac.TokenService{Store: st, Audit: &rbac.Recorder{Store: st}}
	scoped := server.WithPrincipal(context.Background(), server.Principal{Kind: server.KindUser, Name: "eu-admin", Role: server.RoleAdmin, Clusters: []string{"eu"}, Kinds: []string{"Maintenance"}})
	cases := []struct {
		name string
		req  *unyov1.CreateTokenRequest
		code connect.Code
	}{
		{"unscoped", &unyov1.CreateTokenRequest{Name: "a", Role: "viewer", Kinds: []string{"Maintenance"}}, connect.CodePermissionDenied},
		{"another cluster", &unyov1.CreateTokenRequest{Name: "b", Role: "viewer", Clusters: []string{"eu", "us"}, Kinds: []string{"Maintenance"}}, connect.CodePermissionDenied},
		{"every kind", &unyov1.CreateTokenRequest{Name: "c", Role: "viewer", Clusters: []string{"eu"}}, connect.CodePermissionDenied},
		{"commands", &unyov1.CreateTokenRequest{Name: "d", Role: "viewer", Commands: true, Clusters: []string{"eu"}, Kinds: []string{"Maintenance"}}, connect.CodePermissionDenied},
		{"bad role", &unyov1.CreateTokenRequest{Name: "e", Role: "root", Clusters: []string{"eu"}}, connect.CodeInvalidArgument},
		{"bad kind", &unyov1.CreateTokenRequest{Name: "f", Role: "viewer", Clusters: []string{"eu"}, Kinds: []string{"Pod"}}, connect.CodeInvalidArgument},
		{"bad name", &unyov1.CreateTokenRequest{Name: "Has Space", Role: "viewer"}, connect.CodeInvalidArgument},
		{"a configured token's name", &unyov1.CreateTokenRequest{Name: "admin-token-1234", Role: "viewer", Clusters: []string{"eu"}, Kinds: []string{"Maintenance"}}, connect.CodeInvalidArgument},
		{"within scope", &unyov1.CreateTokenRequest{Name: "g", Role: "operator", Clusters: []string{"eu"}, Kinds: []string{"maintenance"}}, 0},
	}
	for _, c := range cases {
		_, err := svc.CreateToken(scoped, connect.NewRequest(c.req))
		if c.code == 0 && err != nil || c.code != 0 && connect.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want code %v", c.name, err, c.code)
		}
	}
	// Every attempt is audited, refused ones included, without a secret.
	recs, err := st.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(cases) {
		t.Errorf("%d audit records, want %d", len(recs), len(cases))
	}
	for _, r := range recs {
		if r.GetWho() != "eu-admin" || r.GetProcedure() != "TokenService/CreateToken" {
			t.Errorf("record %v", r)
		}
		if strings.Contains(r.GetAfter(), "unyo_") {
			t.Errorf("a secret in the audit log: %s", r.GetAfter())
		}
	}
}

func TestObjectJSONRedactsSecrets(t *testing.T) {
	c := &unyov1.Check{Name: "db", Spec: &unyov1.CheckSpec{Command: []string{"check_pg"}, Env: map[string]string{"PGPASSWORD": "hunter2"}}}
	got := rbac.ObjectJSON(&unyov1.Object{Kind: &unyov1.Object_Check{Check: c}})
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "PGPASSWORD") || !strings.HasPrefix(got, `{"name":"db"`) {
		t.Errorf("ObjectJSON = %s", got)
	}
	big := &unyov1.Check{Name: "big", Spec: &unyov1.CheckSpec{Command: []string{strings.Repeat("x", 100<<10)}}}
	if got := rbac.ObjectJSON(big); len(got) > rbac.MaxObjectJSON+100 || !strings.HasSuffix(got, "(truncated)") {
		t.Errorf("a 100 KiB object: %d bytes in the audit log", len(got))
	}
	var none *unyov1.Check
	if got := rbac.ObjectJSON(none); got != "" {
		t.Errorf("a nil object: %q", got)
	}
}

// BenchmarkAuthenticate is the cost of an issued token on a request once
// the token is cached (all but one request per CacheTTL).
func BenchmarkAuthenticate(b *testing.B) {
	st, err := sqlstore.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc := &rbac.TokenService{Store: st}
	resp, err := svc.CreateToken(admin(), connect.NewRequest(&unyov1.CreateTokenRequest{Name: "bench", Role: "viewer"}))
	if err != nil {
		b.Fatal(err)
	}
	au := &rbac.Authenticator{Store: st, CacheTTL: time.Hour}
	cred := server.Credential{Token: resp.Msg.GetSecret()}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := au.Authenticate(b.Context(), cred); err != nil {
			b.Fatal(err)
		}
	}
}
