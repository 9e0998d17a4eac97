package agent

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/identity"
)

func TestRenewAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		valid time.Duration
		want  time.Duration // after NotBefore
	}{
		{"30 days", 30 * 24 * time.Hour, 20 * 24 * time.Hour},
		{"30 seconds", 30 * time.Second, 20 * time.Second},
		{"3 hours", 3 * time.Hour, 2 * time.Hour},
	} {
		c := &x509.Certificate{NotBefore: start, NotAfter: start.Add(tc.valid)}
		if got := renewAt(c).Sub(start); got != tc.want {
			t.Errorf("%s: renews %s after it starts, want %s", tc.name, got, tc.want)
		}
	}
}

// A certificate the cluster signed is kept beside the key (0600), loads
// again after a restart, and is presented only while valid.
func TestNodeCertKeepLoadAndExpiry(t *testing.T) {
	caCert, caKey, err := identity.CreateCA(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := identity.LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, csr, err := identity.NewNodeKey("web1")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, serial, err := ca.SignNode(csr, "web1", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), nodeCertFile)
	n := &nodeCert{path: path}
	if c, _ := n.clientCertificate(); len(c.Certificate) != 0 {
		t.Fatal("a certificate is presented before one was kept")
	}
	if err := n.keep(certPEM, key); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept file: %v, %v; want mode 0600", fi, err)
	}
	again := &nodeCert{path: path}
	if err := again.load(); err != nil {
		t.Fatal(err)
	}
	if c, _ := again.clientCertificate(); len(c.Certificate) == 0 || identity.Serial(c.Leaf) != serial {
		t.Fatalf("after load, presents %v; want the kept certificate %s", c.Leaf, serial)
	}
	if again.valid(time.Now().Add(2*time.Hour)) != nil {
		t.Error("an expired certificate is still presented; the server would refuse the connection")
	}
	// A certificate for another key is refused, and the old one stays.
	other, _, _ := identity.NewNodeKey("web1")
	if err := again.keep(certPEM, other); err == nil {
		t.Error("keeping a certificate for another key: want an error")
	}
	if identity.Serial(again.leaf()) != serial {
		t.Error("a refused certificate replaced the kept one")
	}
}
