package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// Enrolment with a CSR gives a certificate instead of a token; a join token
// cannot enrol the node again; renewal replaces the serial; nodes delete
// revokes it.
func TestNodeCertificateLifecycle(t *testing.T) {
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "unyo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	caCert, caKey, err := identity.CreateCA(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := identity.LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c := New(st, Options{Name: "c1", NodeCA: ca, NodeCertTTL: time.Hour})
	agents, nodes := &agentService{c}, &nodeService{c}
	as := func(p server.Principal) *server.Principal { p.From = "127.0.0.1:5000"; return &p }
	join := as(server.Principal{Kind: server.KindJoin, Name: "join"})
	web1 := as(server.Principal{Kind: server.KindNode, Name: "web1"})
	web2 := as(server.Principal{Kind: server.KindNode, Name: "web2"})
	admin := as(server.Principal{Kind: server.KindUser, Name: "ops", Role: server.RoleAdmin})
	parse := func(b []byte) *x509.Certificate {
		t.Helper()
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("no PEM certificate in %q", b)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	authenticate := func(cert *x509.Certificate) error {
		_, err := c.certAuth.Authenticate(t.Context(), server.Credential{Chains: [][]*x509.Certificate{{cert, ca.Cert}}})
		return err
	}
	register := func(p *server.Principal) (*unyov1.RegisterResponse, error) {
		_, csr, err := identity.NewNodeKey("web1")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := agents.Register(server.WithPrincipal(t.Context(), *p), connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}, Csr: csr}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	renew := func(p *server.Principal, node string) ([]byte, error) {
		_, csr, _ := identity.NewNodeKey(node)
		resp, err := agents.RenewCertificate(server.WithPrincipal(t.Context(), *p), connect.NewRequest(&unyov1.RenewCertificateRequest{Node: node, Csr: csr}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetCertificate(), nil
	}

	got, err := register(join)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNodeToken() != "" || len(got.GetNodeCertificate()) == 0 {
		t.Fatalf("enrolment with a CSR: token %q, certificate %d bytes; want a certificate and no token", got.GetNodeToken(), len(got.GetNodeCertificate()))
	}
	first := parse(got.GetNodeCertificate())
	if err := authenticate(first); err != nil {
		t.Fatalf("the enrolled certificate: %v", err)
	}
	if _, err := register(join); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a join token enrolling web1 again: %v, want PermissionDenied", err)
	}
	if _, err := renew(web2, "web1"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("web2 renewing web1's certificate: %v, want PermissionDenied", err)
	}
	if _, err := renew(web1, "web9"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("web1 renewing for web9: %v, want PermissionDenied", err)
	}
	renewed, err := renew(web1, "web1")
	if err != nil {
		t.Fatal(err)
	}
	second := parse(renewed)
	if err := authenticate(second); err != nil {
		t.Errorf("the renewed certificate: %v", err)
	}
	if err := authenticate(first); err == nil {
		t.Error("the replaced certificate still authenticates")
	}
	_, err = nodes.DeleteNode(server.WithPrincipal(t.Context(), *admin), connect.NewRequest(&unyov1.DeleteNodeRequest{Name: "web1"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := authenticate(second); err == nil {
		t.Error("the certificate of a deleted node still authenticates")
	}
	if _, err := register(join); err != nil {
		t.Errorf("enrolling web1 again after nodes delete: %v", err)
	}
}
