package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/testutil"
)

// whoami answers GetNode with the principal the request acts as, and
// panics for the node named "panic".
type whoami struct {
	unyov1connect.UnimplementedNodeServiceHandler
}

func (whoami) GetNode(ctx context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	if req.Msg.GetName() == "panic" {
		panic("boom")
	}
	return connect.NewResponse(&unyov1.GetNodeResponse{Nodes: []*unyov1.Node{{Name: server.PrincipalFrom(ctx).String()}}}), nil
}

func serveWhoami(t *testing.T, opts server.Options) string {
	return serveWith(t, opts, func(srv *server.Server) {
		srv.Handle(unyov1connect.NewNodeServiceHandler(whoami{}, srv.HandlerOptions()...))
	})
}

func whoIs(c *client.Clients, node string) (string, error) {
	resp, err := c.Nodes.GetNode(context.Background(), connect.NewRequest(&unyov1.GetNodeRequest{Name: node}))
	if err != nil {
		return "", err
	}
	return resp.Msg.GetNodes()[0].GetName(), nil
}

// An unauthenticated request is answered before its body is read: a body
// that never ends (or a huge one) costs nothing.
func TestAuthenticationBeforeBody(t *testing.T) {
	addr := serveWhoami(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A body announced as 1 GiB, of which only a few bytes ever come.
	_, _ = io.WriteString(conn, "POST "+unyov1connect.NodeServiceGetNodeProcedure+" HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"name\":")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the server did not answer an unauthenticated request before its body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "no credential") {
		t.Fatalf("got %d %s, want 401 naming the missing credential", resp.StatusCode, body)
	}
}

// A small gzip body that inflates to far more than the message limit is
// refused without inflating it all.
func TestGzipBombBounded(t *testing.T) {
	addr := serveWhoami(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}}, Limits: server.Limits{MessageBytes: 1 << 20}})
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	// A protobuf field 1 (name) of 64 MiB: tag, varint length, zeros.
	const size = 64 << 20
	_, _ = zw.Write([]byte{0x0a, 0x80, 0x80, 0x80, 0x20})
	zeros := make([]byte, 1<<20)
	for range size >> 20 {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	bomb := buf.Bytes()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+unyov1connect.NodeServiceGetNodeProcedure, bytes.NewReader(bomb))
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "resource_exhausted") {
		t.Fatalf("a %d-byte gzip body inflating to %d MiB: got %d %s, want resource_exhausted", len(bomb), size>>20, resp.StatusCode, body)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 32<<20 {
		t.Fatalf("refusing the bomb allocated %d MiB, want under 32 MiB", grown>>20)
	}
}

// readUntilClosed reads from conn until the server closes it, failing the
// test if that takes longer than within.
func readUntilClosed(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection after %v", within)
	}
}

func TestSlowAndSilentConnectionsAreDropped(t *testing.T) {
	limits := server.Limits{HeaderTimeout: 300 * time.Millisecond, ReadTimeout: 700 * time.Millisecond, IdleTimeout: 700 * time.Millisecond}
	addr := serveWhoami(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}}, Limits: limits})
	dial := func(t *testing.T) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	t.Run("silent before headers", func(t *testing.T) {
		readUntilClosed(t, dial(t), 10*time.Second)
	})
	t.Run("headers never finished", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "POST "+unyov1connect.NodeServiceGetNodeProcedure+" HTTP/1.1\r\nHost: x\r\n")
		readUntilClosed(t, conn, 10*time.Second)
	})
	t.Run("body trickles", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "POST "+unyov1connect.NodeServiceGetNodeProcedure+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer adm\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		readUntilClosed(t, conn, 10*time.Second)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t)
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		readUntilClosed(t, conn, 10*time.Second)
	})
	t.Run("silent h2c after its preface", func(t *testing.T) {
		conn := dial(t)
		// The HTTP/2 connection preface and an empty SETTINGS frame.
		_, _ = io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
		_, _ = conn.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
		readUntilClosed(t, conn, 10*time.Second)
	})
}

func TestPanickingHandlerAnswersAndServerGoesOn(t *testing.T) {
	addr := serveWhoami(t, server.Options{})
	c, err := client.New(client.Options{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whoIs(c, "panic"); connect.CodeOf(err) != connect.CodeInternal || !strings.Contains(err.Error(), "its log has the details") {
		t.Fatalf("a panicking handler: %v, want an internal error", err)
	}
	if who, err := whoIs(c, "x"); err != nil || who != "anonymous:anonymous" {
		t.Fatalf("the next call: %q, %v", who, err)
	}
}

func TestRefusesToServeOpenBeyondLoopback(t *testing.T) {
	srv := server.New(server.Options{Listen: "0.0.0.0:0"})
	ln, err := srv.Listen()
	if err == nil {
		ln.Close()
		t.Fatal("a server without tokens listened on 0.0.0.0")
	}
	for _, want := range []string{"refusing to serve on 0.0.0.0:0 without authentication", "unyo tokens generate", "server.insecure: true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestPrincipalsFromCredentials(t *testing.T) {
	nodeTokens := server.AuthenticatorFunc(func(_ context.Context, cred server.Credential) (server.Principal, error) {
		if name, ok := strings.CutPrefix(cred.Token, "node-"); ok {
			return server.Principal{Kind: server.KindNode, Name: name}, nil
		}
		if cred.Token == "revoked" {
			return server.Principal{}, errors.New("token revoked-1 was revoked")
		}
		return server.Principal{}, server.ErrNotMine
	})
	addr := serveWhoami(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}, JoinTokens: []string{"jn"}, Authenticators: []server.Authenticator{nodeTokens}}})
	tests := []struct {
		token, want string
		code        connect.Code
	}{
		{token: "adm", want: "admin-token-" + server.TokenID("adm")},
		{token: "jn", code: connect.CodePermissionDenied},
		{token: "node-web1", code: connect.CodePermissionDenied}, // nodes read nothing
		{token: "revoked", code: connect.CodeUnauthenticated},
		{token: "nope", code: connect.CodeUnauthenticated},
		{token: "", code: connect.CodeUnauthenticated},
	}
	for _, tt := range tests {
		c, _ := client.New(client.Options{URL: "http://" + addr, Token: tt.token})
		who, err := whoIs(c, "x")
		if connect.CodeOf(err) != tt.code && (err != nil || tt.code != 0) || who != tt.want {
			t.Errorf("token %q: got %q, %v; want %q, code %v", tt.token, who, err, tt.want, tt.code)
		}
	}
}

func TestCertificateReloadsWhenItsFilesChange(t *testing.T) {
	ca := testutil.NewCA(t, "test")
	cert, key := ca.Issue(t, "server", "127.0.0.1")
	addr := serveWhoami(t, server.Options{CertFile: cert, KeyFile: key})
	served := func() []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	first := served()
	cert2, key2 := ca.Issue(t, "renewed", "127.0.0.1")
	for _, f := range [][2]string{{key2, key}, {cert2, cert}} {
		data, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(filepath.Dir(f[1]), "tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f[1]); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the server serves the renewed certificate", func() error {
		if bytes.Equal(served(), first) {
			return errors.New("still the first certificate")
		}
		return nil
	})
}

// Requests for procedures that do not exist, authenticated or not, share
// the "other" label of the API's metrics: a label per path sent would let
// anyone grow the server's memory without bound.
func TestUnknownProceduresShareOneMetricLabel(t *testing.T) {
	addr := serveWhoami(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}}})
	for i := range 20 {
		resp, err := http.Post(fmt.Sprintf("http://%s/unyo.v1.NodeService/Bogus%d", addr, i), "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	c, err := client.New(client.Options{URL: "http://" + addr, Token: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whoIs(c, "n1"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "Bogus") {
		t.Errorf("metrics carry the unknown procedures' paths:\n%s", grepLines(string(body), "Bogus"))
	}
	for _, want := range []string{`procedure="other",code="401"`, `procedure="` + unyov1connect.NodeServiceGetNodeProcedure + `",code="200"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(body), "unyo_api_requests_total"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
