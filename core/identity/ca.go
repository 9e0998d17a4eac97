package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/unyo-ops/unyo/core/api/validate"
)

// DefaultNodeCertTTL is how long a node certificate is valid unless
// cluster.node_cert_ttl says otherwise; agents renew at 2/3 of it.
const DefaultNodeCertTTL = 30 * 24 * time.Hour

// NodeURIPrefix starts the URI SAN of a node certificate: unyo://node/NAME.
const NodeURIPrefix = "unyo://node/"

// clockSkew backdates certificates so a node whose clock is a little behind
// the cluster's can use a fresh one at once.
const clockSkew = time.Minute

// CA is a cluster's node CA: it signs the client certificates its nodes
// present (mTLS). All replicas of a cluster share it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA reads the node CA's certificate and key (PEM), as
// cluster.node_ca.cert_file and key_file name them.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the node CA %s and its key %s: %w", certFile, keyFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse the node CA %s: %w", certFile, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("the node CA %s is not a CA certificate (it needs basic constraints CA:true and key usage certSign); make one with `unyo ca create`", certFile)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the node CA key %s cannot sign", keyFile)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// CreateCA makes a new node CA valid for ten years and writes it to dir as
// ca.crt and ca.key (the key 0600). It refuses to overwrite either file.
func CreateCA(dir, name string) (certFile, keyFile string, err error) {
	if name == "" {
		name = "unyo node CA"
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Stat(f); err == nil {
			return "", "", fmt.Errorf("%s exists already: remove it or choose another --dir (a new CA invalidates every node certificate of the old one)", f)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate the CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-clockSkew), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("sign the CA certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encode the CA key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeNew(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// newSerial returns a random 128-bit serial: unguessable, so that a
// certificate's serial identifies it among every one the CA signed.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate a certificate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never 0
}

// Serial is how a certificate's serial is stored (store.CredNodeCert).
func Serial(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// SignNode signs a client certificate for node with the key of csr (DER),
// valid for ttl from now: CN and URI SAN name the node, whatever the CSR
// asked for, and it may only authenticate a client. It returns the
// certificate (PEM) and its serial.
func (ca *CA) SignNode(csrDER []byte, node string, ttl time.Duration, now time.Time) (certPEM []byte, serial string, err error) {
	if err := validate.Name(node); err != nil {
		return nil, "", fmt.Errorf("node name %q: %w", node, err)
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, "", fmt.Errorf("csr: not a certificate signing request (DER): %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, "", fmt.Errorf("csr: its signature does not match its key: %w", err)
	}
	if err := checkNodeKey(csr.PublicKey); err != nil {
		return nil, "", fmt.Errorf("csr: %w", err)
	}
	if ttl <= 0 {
		ttl = DefaultNodeCertTTL
	}
	sn, err := newSerial()
	if err != nil {
		return nil, "", err
	}
	// A short-lived certificate is backdated less, so that most of its
	// validity lies ahead (agents renew at 2/3 of it).
	skew := min(clockSkew, ttl/4)
	notAfter := now.Add(ttl)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: node},
		URIs:         []*url.URL{{Scheme: "unyo", Host: "node", Path: "/" + node}},
		NotBefore:    now.Add(-skew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, "", fmt.Errorf("sign the certificate of node %q: %w", node, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Serial(tmpl), nil
}

// checkNodeKey accepts the keys agents make (ECDSA P-256) and other strong
// ones.
func checkNodeKey(k any) error {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return errors.New("an ECDSA key must be on curve P-256 or P-384")
	default:
		return fmt.Errorf("a %T key is not accepted: use ECDSA P-256", k)
	}
}

// NewNodeKey generates a node's private key and a CSR (DER) for it; the
// key never leaves the node.
func NewNodeKey(node string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the node's key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: node}}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make the node's certificate signing request: %w", err)
	}
	return key, csr, nil
}
