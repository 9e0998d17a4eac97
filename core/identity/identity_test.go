package identity_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

func TestNewTokenIsRandomAndHashed(t *testing.T) {
	a, err := identity.NewToken("unyo-node-")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := identity.NewToken("unyo-node-")
	if a == b || !strings.HasPrefix(a, "unyo-node-") || len(a) < 40 {
		t.Errorf("tokens %q and %q", a, b)
	}
	if h := identity.Hash(a); len(h) != 64 || strings.Contains(h, a) || h != identity.Hash(a) {
		t.Errorf("hash %q", h)
	}
}

func TestAuthenticator(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "unyo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, _ := identity.NewToken("unyo-node-")
	rootTok, _ := identity.NewToken("unyo-root-")
	for _, c := range []store.Credential{
		{Kind: store.CredNode, Name: "web1", Hash: identity.Hash(tok)},
		{Kind: store.CredRoot, Name: "root", Hash: identity.Hash(rootTok)},
		// Root's copy of its own token in a shared database (unyo dev).
		{Kind: store.CredRootToCluster, Name: "c1", Hash: identity.Hash(rootTok), Secret: rootTok},
	} {
		if err := st.PutCredential(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	a := identity.NewAuthenticator(st, map[string]server.Kind{store.CredNode: server.KindNode, store.CredRoot: server.KindRoot})
	for _, tc := range []struct {
		name, token string
		want        server.Principal
		err         error
	}{
		{"node", tok, server.Principal{Kind: server.KindNode, Name: "web1"}, nil},
		{"root", rootTok, server.Principal{Kind: server.KindRoot, Name: "root"}, nil},
		{"unknown", "unyo-node-nope", server.Principal{}, server.ErrNotMine},
		{"none", "", server.Principal{}, server.ErrNotMine},
	} {
		p, err := a.Authenticate(t.Context(), server.Credential{Token: tc.token})
		if !errors.Is(err, tc.err) || p.Kind != tc.want.Kind || p.Name != tc.want.Name {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, p, err, tc.want, tc.err)
		}
	}
	// A revoked credential stops working at once on the replica that
	// revoked it.
	if err := st.DeleteCredential(t.Context(), store.CredNode, "web1"); err != nil {
		t.Fatal(err)
	}
	a.Forget(server.KindNode, "web1")
	if _, err := a.Authenticate(t.Context(), server.Credential{Token: tok}); !errors.Is(err, server.ErrNotMine) {
		t.Errorf("revoked credential: %v", err)
	}
	// A store that fails is Unavailable, not "unknown credential".
	st.Close()
	_, err = a.Authenticate(t.Context(), server.Credential{Token: "unyo-node-other"})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("closed store: %v, want Unavailable", err)
	}
}
