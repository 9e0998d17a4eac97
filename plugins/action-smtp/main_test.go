package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// The tests deliver to aiosmtpd (Debian's python3-aiosmtpd, installed by
// integration/install-deps.sh) started on a free loopback port.

// python finds a python3 that can import aiosmtpd: Debian's, also when
// another python3 (pyenv, venv) comes first in PATH.
func python(t *testing.T) string {
	t.Helper()
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, p := range cands {
		if exec.Command(p, "-c", "import aiosmtpd").Run() == nil {
			return p
		}
	}
	testutil.Unavailable(t, "no python3 with aiosmtpd (apt-get install -y python3-aiosmtpd, see integration/install-deps.sh)")
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// server is a running aiosmtpd delivering into a maildir.
type server struct {
	addr, maildir string
}

// startServer runs python with args (in which ADDR and MAILDIR are
// replaced) and waits for an SMTP greeting, plain or over TLS.
func startServer(t *testing.T, implicitTLS bool, args ...string) *server {
	t.Helper()
	py := python(t)
	s := &server{addr: freePort(t), maildir: filepath.Join(t.TempDir(), "maildir")}
	host, port, _ := net.SplitHostPort(s.addr)
	for i, a := range args {
		a = strings.ReplaceAll(a, "ADDR", s.addr)
		a = strings.ReplaceAll(a, "HOST", host)
		a = strings.ReplaceAll(a, "PORT", port)
		args[i] = strings.ReplaceAll(a, "MAILDIR", s.maildir)
	}
	cmd := exec.Command(py, args...)
	var out syncBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("aiosmtpd output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if greeted(s.addr, implicitTLS) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("aiosmtpd did not answer on %s:\n%s", s.addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func greeted(addr string, implicitTLS bool) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	if implicitTLS {
		return true // accepting is enough; a TLS hello would need the CA
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "220")
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// delivered is one message from the maildir, body decoded.
type delivered struct {
	h    mail.Header
	body string
}

func (s *server) messages(t *testing.T) []delivered {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(s.maildir, "new"))
	var out []delivered
	for _, e := range ents {
		f, err := os.Open(filepath.Join(s.maildir, "new", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m, err := mail.ReadMessage(f)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = m.Body
		if m.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			r = quotedprintable.NewReader(r)
		}
		b, err := io.ReadAll(r)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, delivered{h: m.Header, body: strings.ReplaceAll(string(b), "\r\n", "\n")})
	}
	return out
}

func execute(t *testing.T, c *base.Conn, req *pluginv1.ExecuteRequest) *pluginv1.Outcome {
	t.Helper()
	st, err := c.Action.Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("stream ended without an outcome: %v", err)
		}
		if o := r.GetOutcome(); o != nil {
			return o
		}
	}
}

const payload = `{"alert":{"name":"disk","state":"critical","host":"db1","value":97.5}}`

func request(t *testing.T, key string, params map[string]any) *pluginv1.ExecuteRequest {
	if params == nil {
		params = map[string]any{}
	}
	return &pluginv1.ExecuteRequest{IdempotencyKey: key, Payload: []byte(payload),
		Params: testbin.Struct(t, params), Timeout: durationpb.New(10 * time.Second)}
}

func config(addr string, extra map[string]any) map[string]any {
	c := map[string]any{
		"server": addr, "tls": "none", "from": "unyo <unyo@example.com>",
		"to":      []any{"ops@example.com", "Dev Team <dev@example.com>"},
		"subject": "{{.alert.name}} on {{.alert.host}} is {{upper .alert.state}} ✓",
		"body":    "Host {{.alert.host}}\nValue: {{.alert.value}}\n.\n.leading dot\nünïcode and a long line " + strings.Repeat("x", 100) + "\n",
		"timeout": "10s",
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

const wantBody = "Host db1\nValue: 97.5\n.\n.leading dot\nünïcode and a long line " + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + "\n"

// TestDeliveryToAiosmtpd: headers and rendered body as delivered, dry run,
// idempotency (sequential and concurrent) and params overriding the config.
func TestDeliveryToAiosmtpd(t *testing.T) {
	s := startServer(t, false, "-m", "aiosmtpd", "-n", "-l", "ADDR", "-c", "aiosmtpd.handlers.Mailbox", "MAILDIR")
	c := testbin.Serve(t, &smtpAction{}, config(s.addr, nil))

	o := execute(t, c, request(t, "a", nil))
	if o.Status != sdk.Succeeded {
		t.Fatalf("send: %v", o)
	}
	ms := s.messages(t)
	if len(ms) != 1 {
		t.Fatalf("%d messages delivered, want 1", len(ms))
	}
	m := ms[0]
	subj, err := new(mime.WordDecoder).DecodeHeader(m.h.Get("Subject"))
	if err != nil || subj != "disk on db1 is CRITICAL ✓" {
		t.Errorf("Subject %q (%q): %v", subj, m.h.Get("Subject"), err)
	}
	if got := m.h.Get("From"); got != `"unyo" <unyo@example.com>` {
		t.Errorf("From %q", got)
	}
	if got := m.h.Get("To"); got != `<ops@example.com>, "Dev Team" <dev@example.com>` {
		t.Errorf("To %q", got)
	}
	// Mailbox records the envelope.
	if got := m.h.Get("X-RcptTo"); got != "ops@example.com, dev@example.com" {
		t.Errorf("envelope recipients %q", got)
	}
	if got := m.h.Get("X-MailFrom"); got != "unyo@example.com" {
		t.Errorf("envelope sender %q", got)
	}
	if got := m.h.Get("Message-ID"); got != messageID("a", "unyo@example.com") {
		t.Errorf("Message-ID %q", got)
	}
	if d, err := m.h.Date(); err != nil || time.Since(d) > time.Minute {
		t.Errorf("Date %v %v", d, err)
	}
	if ct := m.h.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if m.body != wantBody {
		t.Errorf("body\n%q, want\n%q", m.body, wantBody)
	}

	dry := request(t, "b", nil)
	dry.DryRun = true
	if o := execute(t, c, dry); o.Status != sdk.Succeeded || !strings.Contains(o.Message, "would send") ||
		!strings.Contains(o.Message, "disk on db1 is CRITICAL") || !strings.Contains(o.Message, "Value: 97.5") {
		t.Errorf("dry run: %v", o)
	}
	if n := len(s.messages(t)); n != 1 {
		t.Errorf("dry run sent mail: %d messages", n)
	}
	if o := execute(t, c, request(t, "a", nil)); !o.Replayed || o.Status != sdk.Succeeded {
		t.Errorf("same key: %v", o)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); execute(t, c, request(t, "c", nil)) }()
	}
	wg.Wait()
	if n := len(s.messages(t)); n != 2 {
		t.Errorf("one key sent %d times (messages %d, want 2)", n-1, n)
	}

	o = execute(t, c, request(t, "d", map[string]any{"to": []any{"x@example.com"}, "subject": "about {{.alert.host}}", "body": "{{json .alert.value}}"}))
	if o.Status != sdk.Succeeded {
		t.Fatalf("params: %v", o)
	}
	var found bool
	for _, m := range s.messages(t) {
		if m.h.Get("Subject") == "about db1" {
			found = true
			if m.h.Get("X-RcptTo") != "x@example.com" || m.body != "97.5\n" {
				t.Errorf("params message: to %q body %q", m.h.Get("X-RcptTo"), m.body)
			}
		}
	}
	if !found {
		t.Error("params subject not delivered")
	}
	if o := execute(t, c, request(t, "e", map[string]any{"body": "{{.alert"})); o.Status != sdk.Failed || !strings.Contains(o.Message, "body") {
		t.Errorf("bad template in params: %v", o)
	}
	if o := execute(t, c, request(t, "f", map[string]any{"bogus": 1})); o.Status != sdk.Failed {
		t.Errorf("unknown param: %v", o)
	}
	if n := len(s.messages(t)); n != 3 {
		t.Errorf("%d messages, want 3", n)
	}
}

// tlsFiles writes a self-signed certificate for 127.0.0.1 and its key.
func tlsFiles(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "unyo test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestTLS: STARTTLS (required by the server) and implicit TLS, verified
// against the test CA; an unverifiable certificate or skipping STARTTLS
// is FAILED, not RETRYABLE.
func TestTLS(t *testing.T) {
	cert, key := tlsFiles(t)
	st := startServer(t, false, "-m", "aiosmtpd", "-n", "-l", "ADDR", "--tlscert", cert, "--tlskey", key, "-c", "aiosmtpd.handlers.Mailbox", "MAILDIR")
	c := testbin.Serve(t, &smtpAction{}, config(st.addr, map[string]any{"tls": "starttls", "ca_file": cert}))
	if o := execute(t, c, request(t, "a", nil)); o.Status != sdk.Succeeded {
		t.Fatalf("STARTTLS: %v", o)
	}
	if ms := st.messages(t); len(ms) != 1 || ms[0].body != wantBody {
		t.Fatalf("STARTTLS delivered %d messages", len(ms))
	}
	plain := testbin.Serve(t, &smtpAction{}, config(st.addr, nil))
	if o := execute(t, plain, request(t, "b", nil)); o.Status != sdk.Failed || !strings.Contains(o.Message, "530") {
		t.Errorf("no STARTTLS to a server requiring it: %v", o)
	}
	untrusted := testbin.Serve(t, &smtpAction{}, config(st.addr, map[string]any{"tls": "starttls"}))
	if o := execute(t, untrusted, request(t, "c", nil)); o.Status != sdk.Failed || !strings.Contains(o.Message, "certificate") {
		t.Errorf("unverifiable certificate: %v", o)
	}

	ss := startServer(t, true, "-m", "aiosmtpd", "-n", "-l", "ADDR", "--smtpscert", cert, "--smtpskey", key, "-c", "aiosmtpd.handlers.Mailbox", "MAILDIR")
	c = testbin.Serve(t, &smtpAction{}, config(ss.addr, map[string]any{"tls": "tls", "ca_file": cert}))
	if o := execute(t, c, request(t, "a", nil)); o.Status != sdk.Succeeded {
		t.Fatalf("implicit TLS: %v", o)
	}
	if ms := ss.messages(t); len(ms) != 1 || ms[0].h.Get("X-RcptTo") != "ops@example.com, dev@example.com" {
		t.Fatalf("implicit TLS delivered %d messages", len(ms))
	}
	if len(st.messages(t)) != 1 {
		t.Errorf("failed sends delivered mail")
	}
}

// server.py: aiosmtpd with AUTH PLAIN required (user unyo, password
// secret; allowed without TLS on loopback) and recipients whose local part
// picks the reply: tempfail 451, reject 550.
const serverPy = `
import asyncio, sys
from aiosmtpd.smtp import SMTP, AuthResult
from aiosmtpd.handlers import Mailbox

class Handler(Mailbox):
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split('@')[0]
        if local == 'tempfail':
            return '451 4.3.0 try again later'
        if local == 'reject':
            return '550 5.1.1 no such user'
        envelope.rcpt_tos.append(address)
        return '250 OK'

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = mechanism == 'PLAIN' and auth_data.login == b'unyo' and auth_data.password == b'secret'
    return AuthResult(success=ok, handled=False)

async def main():
    host, port, maildir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(
        lambda: SMTP(Handler(maildir), authenticator=authenticator, auth_required=True, auth_require_tls=False),
        host, port)
    await srv.serve_forever()

asyncio.run(main())
`

// TestAuthAndReplies: AUTH PLAIN, and how replies map to outcomes.
func TestAuthAndReplies(t *testing.T) {
	script := filepath.Join(t.TempDir(), "server.py")
	if err := os.WriteFile(script, []byte(serverPy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, false, script, "HOST", "PORT", "MAILDIR")
	auth := map[string]any{"username": "unyo", "password": "secret"}
	c := testbin.Serve(t, &smtpAction{}, config(s.addr, auth))
	if o := execute(t, c, request(t, "a", nil)); o.Status != sdk.Succeeded {
		t.Fatalf("authenticated send: %v", o)
	}
	to := func(addrs ...string) map[string]any {
		l := make([]any, len(addrs))
		for i, a := range addrs {
			l[i] = a
		}
		return map[string]any{"to": l}
	}
	o := execute(t, c, request(t, "b", to("ok@example.com", "tempfail@example.com")))
	if o.Status != sdk.Retryable || o.RetryAfter.AsDuration() != retryAfter || !strings.Contains(o.Message, "451") {
		t.Errorf("451 for one recipient: %v", o)
	}
	if o := execute(t, c, request(t, "c", to("reject@example.com"))); o.Status != sdk.Failed || !strings.Contains(o.Message, "550") {
		t.Errorf("550: %v", o)
	}
	if n := len(s.messages(t)); n != 1 {
		t.Errorf("%d messages, want only the first (refused recipients abort the transaction)", n)
	}
	wrong := testbin.Serve(t, &smtpAction{}, config(s.addr, map[string]any{"username": "unyo", "password": "wrong"}))
	if o := execute(t, wrong, request(t, "a", nil)); o.Status != sdk.Failed || !strings.Contains(o.Message, "535") {
		t.Errorf("wrong password: %v", o)
	}
	anon := testbin.Serve(t, &smtpAction{}, config(s.addr, nil))
	if o := execute(t, anon, request(t, "a", nil)); o.Status != sdk.Failed || !strings.Contains(o.Message, "530") {
		t.Errorf("no AUTH where required: %v", o)
	}
	down := testbin.Serve(t, &smtpAction{}, config(freePort(t), nil))
	if o := execute(t, down, request(t, "a", nil)); o.Status != sdk.Retryable || !strings.Contains(o.Message, "refused") {
		t.Errorf("nothing listening: %v", o)
	}
}

// TestTimeoutAndCancel against a server that accepts and never greets.
func TestTimeoutAndCancel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	c := testbin.Serve(t, &smtpAction{}, config(l.Addr().String(), nil))
	req := request(t, "slow", nil)
	req.Timeout = durationpb.New(200 * time.Millisecond)
	t0 := time.Now()
	if o := execute(t, c, req); o.Status != sdk.TimedOut || time.Since(t0) > 2*time.Second {
		t.Errorf("timeout: %v after %s", o, time.Since(t0))
	}

	done := make(chan *pluginv1.Outcome, 1)
	go func() { done <- execute(t, c, request(t, "cancel", nil)) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := c.Action.Cancel(context.Background(), &pluginv1.CancelRequest{IdempotencyKey: "cancel"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Cancel never found the action")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case o := <-done:
		if o.Status != sdk.Cancelled {
			t.Errorf("cancel: %v", o)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("cancelled action did not end")
	}

	// The config's session timeout, shorter than the action's: the server
	// is too slow, which may pass.
	short := testbin.Serve(t, &smtpAction{}, config(l.Addr().String(), map[string]any{"timeout": "200ms"}))
	t0 = time.Now()
	if o := execute(t, short, request(t, "short", nil)); o.Status != sdk.Retryable || time.Since(t0) > 2*time.Second {
		t.Errorf("session timeout: %v after %s", o, time.Since(t0))
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		field string
		extra map[string]any
	}{
		{"server", map[string]any{"server": "example.com"}},
		{"tls", map[string]any{"tls": "maybe"}},
		{"from", map[string]any{"from": "not an address"}},
		{"to", map[string]any{"to": []any{}}},
		{"to[1]", map[string]any{"to": []any{"a@example.com", "b@"}}},
		{"subject", map[string]any{"subject": "{{.x"}},
		{"body", map[string]any{"body": "{{nosuchfunc}}"}},
		{"tls", map[string]any{"server": "mail.example.com:25", "username": "u", "password": "p"}},
		{"username", map[string]any{"password": "p"}},
		{"ca_file", map[string]any{"tls": "starttls", "ca_file": "/nonexistent"}},
		{"", map[string]any{"timeout": "soon"}}, // sdk.Decode names no field for a bad duration
		{"helo", map[string]any{"helo": "a b"}},
	} {
		err := (&smtpAction{}).Configure(context.Background(), config("127.0.0.1:25", tc.extra))
		var ce *sdk.ConfigError
		if !errors.As(err, &ce) || !slices.ContainsFunc(ce.Violations, func(v sdk.Violation) bool { return v.Field == tc.field }) {
			t.Errorf("%v: got %v, want a violation of %s", tc.extra, err, tc.field)
		}
	}
	if err := (&smtpAction{}).Configure(context.Background(), map[string]any{"server": "127.0.0.1:25", "from": "a@example.com", "to": []any{"b@example.com"}, "tls": "none"}); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}
