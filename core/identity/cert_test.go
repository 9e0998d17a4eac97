package identity_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

func newCA(t *testing.T) *identity.CA {
	t.Helper()
	certFile, keyFile, err := identity.CreateCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := identity.LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// sign has ca sign a fresh key's certificate for node.
func sign(t *testing.T, ca *identity.CA, node string, ttl time.Duration) (*x509.Certificate, string) {
	t.Helper()
	_, csr, err := identity.NewNodeKey(node)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, serial, err := ca.SignNode(csr, node, ttl, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatalf("SignNode returned no PEM: %q", certPEM)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c, serial
}

func TestCreateCARefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := identity.CreateCA(dir, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := identity.CreateCA(dir, ""); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second CreateCA in the same dir: %v, want a refusal", err)
	}
}

func TestSignNode(t *testing.T) {
	ca := newCA(t)
	c, serial := sign(t, ca, "web1", 20*time.Second)
	if c.Subject.CommonName != "web1" {
		t.Errorf("CN = %q, want web1", c.Subject.CommonName)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "unyo://node/web1" {
		t.Errorf("URIs = %v, want unyo://node/web1", c.URIs)
	}
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || c.IsCA {
		t.Errorf("ExtKeyUsage = %v, IsCA = %v: want only clientAuth", c.ExtKeyUsage, c.IsCA)
	}
	if ttl := c.NotAfter.Sub(time.Now()); ttl > 21*time.Second || ttl < 15*time.Second {
		t.Errorf("valid for %s more, want about 20s", ttl)
	}
	if serial != identity.Serial(c) {
		t.Errorf("serial %s, certificate's %s", serial, identity.Serial(c))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the node certificate does not verify as a client against its CA: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool}); err == nil {
		t.Error("the node certificate verifies as a server certificate; want client use only")
	}
	// The CSR's subject does not choose the name.
	_, csr, _ := identity.NewNodeKey("db1")
	certPEM, _, err := ca.SignNode(csr, "web2", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	if c2, _ := x509.ParseCertificate(b.Bytes); c2.Subject.CommonName != "web2" {
		t.Errorf("CN = %q, want the node name web2, not the CSR's", c2.Subject.CommonName)
	}

	for _, bad := range []struct {
		name, node string
		csr        []byte
		want       string
	}{
		{"garbage CSR", "web1", []byte("not a csr"), "not a certificate signing request"},
		{"bad node name", "web 1", csr, "node name"},
	} {
		if _, _, err := ca.SignNode(bad.csr, bad.node, time.Hour, time.Now()); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error saying %q", bad.name, err, bad.want)
		}
	}
}

func TestCertAuthenticator(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "unyo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ca, other := newCA(t), newCA(t)
	good, serial := sign(t, ca, "web1", time.Hour)
	old, _ := sign(t, ca, "web1", time.Hour) // replaced by good
	gone, goneSerial := sign(t, ca, "web2", time.Hour)
	foreign, foreignSerial := sign(t, other, "web3", time.Hour)
	notNode, notNodeSerial := sign(t, ca, "web4", time.Hour)
	notNode.Subject.CommonName = "not a node" // as if the CA had signed a person's certificate
	for _, c := range []store.Credential{
		{Kind: store.CredNodeCert, Name: "web1", Hash: serial},
		{Kind: store.CredNodeCert, Name: "web2", Hash: goneSerial},
		{Kind: store.CredNodeCert, Name: "web3", Hash: foreignSerial},
		{Kind: store.CredNodeCert, Name: "web4", Hash: notNodeSerial},
	} {
		if err := st.PutCredential(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	a := identity.NewCertAuthenticator(ca.Cert, st)
	chain := func(c *x509.Certificate) server.Credential {
		return server.Credential{Chains: [][]*x509.Certificate{{c, ca.Cert}}}
	}

	p, err := a.Authenticate(t.Context(), chain(good))
	if err != nil || p.Kind != server.KindNode || p.Name != "web1" {
		t.Errorf("current certificate of web1: %+v, %v; want node web1", p, err)
	}
	// Revoke web2 (as unyo nodes delete does) after its certificate was seen once.
	if _, err := a.Authenticate(t.Context(), chain(gone)); err != nil {
		t.Fatalf("web2 before revocation: %v", err)
	}
	if err := st.DeleteCredential(t.Context(), store.CredNodeCert, "web2"); err != nil {
		t.Fatal(err)
	}
	a.Forget("web2")

	for _, tc := range []struct {
		name string
		cred server.Credential
		want string // "" wants ErrNotMine
	}{
		{"no certificate", server.Credential{Token: "x"}, ""},
		{"replaced serial", chain(old), "of node \"web1\" was revoked or replaced"},
		{"revoked serial", chain(gone), "certificate serial " + goneSerial + " of node \"web2\" was revoked"},
		{"another CA", server.Credential{Chains: [][]*x509.Certificate{{foreign, other.Cert}}}, ""},
		{"CN not a node", chain(notNode), "not a node name"},
	} {
		p, err := a.Authenticate(t.Context(), tc.cred)
		switch {
		case tc.want == "" && !errors.Is(err, server.ErrNotMine):
			t.Errorf("%s: %+v, %v; want ErrNotMine", tc.name, p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.name, p, err, tc.want)
		case tc.want != "" && connect.CodeOf(err) == connect.CodeUnavailable:
			t.Errorf("%s: %v is Unavailable; want a refusal", tc.name, err)
		}
	}
}
