package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// statusServer answers GetStatus when the call carries token "t".
type statusServer struct {
	unyov1connect.UnimplementedStatusServiceHandler
}

func (statusServer) GetStatus(_ context.Context, req *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	if req.Header().Get("Authorization") != "Bearer t" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no bearer token"))
	}
	return connect.NewResponse(&unyov1.GetStatusResponse{Role: "cluster"}), nil
}

// startTLS serves statusServer over TLS with certFile/keyFile; clientCA, if
// set, makes the server require a client certificate it signed.
func startTLS(t *testing.T, certFile, keyFile, clientCA string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewStatusServiceHandler(statusServer{}))
	srv := httptest.NewUnstartedServer(mux)
	// Refused handshakes are what some cases test.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		srv.TLS.ClientCAs, srv.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL // https://127.0.0.1:port
}

func TestTLS(t *testing.T) {
	t.Parallel()
	ca, other := testutil.NewCA(t, "unyo-test"), testutil.NewCA(t, "someone-else")
	ipCert, ipKey := ca.Issue(t, "server-ip", "127.0.0.1")
	nameCert, nameKey := ca.Issue(t, "server-name", "cluster.unyo.test")
	clientCert, clientKey := ca.Issue(t, "node-1", "node-1")
	strangerCert, strangerKey := other.Issue(t, "stranger", "node-1")
	byIP := startTLS(t, ipCert, ipKey, "")
	byName := startTLS(t, nameCert, nameKey, "")
	mutual := startTLS(t, ipCert, ipKey, ca.CertFile)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	hints := client.Hints{Token: "agent.token", CAFile: "agent.tls.ca_file", ClientCert: "agent.tls.cert_file and key_file"}

	for _, tc := range []struct {
		name    string
		url     string
		tls     client.TLSOptions
		newErr  string // New fails with this
		callErr string // the call fails with this, as Explain words it
	}{
		{name: "private CA", url: byIP, tls: client.TLSOptions{CAFile: ca.CertFile}},
		{name: "no CA setting", url: byIP, callErr: "signed by an authority this client does not trust; give this client the CA that signed it with agent.tls.ca_file"},
		{name: "another CA", url: byIP, tls: client.TLSOptions{CAFile: other.CertFile}, callErr: "authority this client does not trust"},
		{name: "host not in the certificate", url: byName, tls: client.TLSOptions{CAFile: ca.CertFile}, callErr: "not valid for the host in the URL"},
		{name: "server_name names it", url: byName, tls: client.TLSOptions{CAFile: ca.CertFile, ServerName: "cluster.unyo.test"}},
		{name: "mTLS with a client certificate", url: mutual, tls: client.TLSOptions{CAFile: ca.CertFile, CertFile: clientCert, KeyFile: clientKey}},
		{name: "mTLS without a client certificate", url: mutual, tls: client.TLSOptions{CAFile: ca.CertFile}, callErr: "certificate required); if it asks for a client certificate, set agent.tls.cert_file and key_file"},
		{name: "mTLS with a certificate of another CA", url: mutual, tls: client.TLSOptions{CAFile: ca.CertFile, CertFile: strangerCert, KeyFile: strangerKey}, callErr: "if it asks for a client certificate, set agent.tls.cert_file and key_file"},
		{name: "missing CA file", url: byIP, tls: client.TLSOptions{CAFile: "/nonexistent/ca.pem"}, newErr: "read the CA file: open /nonexistent/ca.pem"},
		{name: "CA file not PEM", url: byIP, tls: client.TLSOptions{CAFile: notPEM}, newErr: "holds no PEM certificate"},
		{name: "certificate without key", url: byIP, tls: client.TLSOptions{CertFile: clientCert}, newErr: "needs both cert_file and key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := client.New(client.Options{URL: tc.url, Token: "t", TLS: tc.tls, Hints: hints})
			if tc.newErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.newErr) {
					t.Fatalf("New = %v, want an error containing %q", err, tc.newErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{}))
			if tc.callErr == "" {
				if err != nil {
					t.Fatalf("GetStatus: %v", c.Explain(err))
				}
				if resp.Msg.GetRole() != "cluster" {
					t.Fatalf("GetStatus answered %v", resp.Msg)
				}
				return
			}
			if err == nil {
				t.Fatal("GetStatus succeeded; want it refused")
			}
			if got := c.Explain(err).Error(); !strings.Contains(got, tc.callErr) {
				t.Fatalf("Explain = %q, want it to contain %q", got, tc.callErr)
			}
		})
	}
}

func TestExplainNamesTheTokenSetting(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "unyo-test")
	cert, key := ca.Issue(t, "server", "127.0.0.1")
	url := startTLS(t, cert, key, "")
	c, err := client.New(client.Options{URL: url, TLS: client.TLSOptions{CAFile: ca.CertFile},
		Hints: client.Hints{Token: "agent.token (UNYO_AGENT_TOKEN, unyo agent --token)"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{}))
	want := "refused the request: no bearer token (this client's token is set by agent.token (UNYO_AGENT_TOKEN, unyo agent --token))"
	if got := c.Explain(err); got == nil || !strings.Contains(got.Error(), want) {
		t.Fatalf("Explain = %v, want it to contain %q", got, want)
	}
}

// A bearer token about to cross the network in clear text is warned about,
// once per client; https and loopback are not.
func TestCleartextTokenWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, token string
		warn       bool
	}{
		{"http://192.0.2.10:7401", "t", true},
		{"http://cluster.example.com:7401", "t", true},
		{"http://[2001:db8::1]:7401", "t", true},
		{"http://127.0.0.1:7401", "t", false},
		{"http://127.0.0.2:7401", "t", false},
		{"http://[::1]:7401", "t", false},
		{"http://localhost:7401", "t", false},
		{"https://cluster.example.com:7401", "t", false},
		{"http://192.0.2.10:7401", "", false},
	} {
		t.Run(tc.url+"/"+tc.token, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			c, err := client.New(client.Options{URL: tc.url, Token: tc.token, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			// A cancelled call still passes the token interceptor, without
			// touching the network.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			for range 3 {
				_, _ = c.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
			}
			n := strings.Count(logs.String(), "plain http://")
			switch {
			case tc.warn && n != 1:
				t.Errorf("%d warnings after 3 calls, want 1:\n%s", n, logs.String())
			case !tc.warn && n != 0:
				t.Errorf("warned for %s:\n%s", tc.url, logs.String())
			}
		})
	}
}

// unavailableStatus answers every GetStatus with the server's own
// Unavailable (its store is down), which is not a failure to reach it.
type unavailableStatus struct {
	unyov1connect.UnimplementedStatusServiceHandler
}

func (unavailableStatus) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New("state store: database is locked"))
}

// Explain tells apart a server it could not reach, a server that answered
// with an error, and an address that does not serve the unyo API at all,
// and names the URL setting only where its hints give one.
func TestExplainSaysWhatAnswered(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewStatusServiceHandler(unavailableStatus{}))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	// What an agent's status port answers to an API path.
	notAPI := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notAPI.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	tests := []struct {
		name, url string
		hints     client.Hints
		want      []string
		not       []string
	}{
		{name: "server's own unavailable", url: api.URL, hints: client.Hints{Server: "--server or UNYO_SERVER"},
			want: []string{"is unavailable: state store: database is locked"}, not: []string{"cannot reach", "UNYO_SERVER"}},
		{name: "nothing listening, CLI", url: downURL, hints: client.Hints{Server: "--server or UNYO_SERVER"},
			want: []string{"cannot reach the unyo server at " + downURL, "set --server or UNYO_SERVER"}},
		{name: "nothing listening, agent", url: downURL, hints: client.Hints{Server: "agent.cluster_url"},
			want: []string{"cannot reach", "set agent.cluster_url"}, not: []string{"UNYO_SERVER"}},
		{name: "nothing listening, no hint", url: downURL,
			want: []string{"cannot reach", "is it running?"}, not: []string{"UNYO_SERVER", "set "}},
		{name: "not the unyo API", url: notAPI.URL, hints: client.Hints{Server: "--server or UNYO_SERVER"},
			want: []string{notAPI.URL + " does not serve the unyo API (it answered HTTP 404 Not Found)", "not an agent's status port", "--server or UNYO_SERVER"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Options{URL: tc.url, Hints: tc.hints})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{}))
			if err == nil {
				t.Fatal("GetStatus succeeded")
			}
			got := c.Explain(err).Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Explain = %q, want it to contain %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("Explain = %q, must not contain %q", got, n)
				}
			}
		})
	}
}

// countingStatus answers GetStatus with its name and counts the calls.
type countingStatus struct {
	unyov1connect.UnimplementedStatusServiceHandler
	name  string
	calls *atomic.Int32
}

func (s countingStatus) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	s.calls.Add(1)
	return connect.NewResponse(&unyov1.GetStatusResponse{Version: s.name}), nil
}

// A client given several replicas' URLs moves to the next when one cannot
// be reached or a proxy says its backend is gone, and stays with the one
// that answered; a replica's own error answer is not a reason to move.
func TestFailoverBetweenReplicas(t *testing.T) {
	t.Parallel()
	serve := func(name string) (string, *atomic.Int32) {
		var n atomic.Int32
		mux := http.NewServeMux()
		mux.Handle(unyov1connect.NewStatusServiceHandler(countingStatus{name: name, calls: &n}))
		s := httptest.NewServer(mux)
		t.Cleanup(s.Close)
		return s.URL, &n
	}
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no healthy upstream", http.StatusBadGateway)
	}))
	t.Cleanup(gateway.Close)
	b, bCalls := serve("b")
	c, cCalls := serve("c")

	cl, err := client.New(client.Options{URL: downURL + ", " + gateway.URL + "/," + b + "," + c})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		resp, err := cl.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{}))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := resp.Msg.GetVersion(); got != "b" {
			t.Fatalf("call %d answered by %q, want b (the first replica that is up)", i, got)
		}
	}
	if bCalls.Load() != 3 || cCalls.Load() != 0 {
		t.Errorf("calls: b %d, c %d; want 3 and 0", bCalls.Load(), cCalls.Load())
	}

	// A replica answering with its own error is reached: no failover.
	mux := http.NewServeMux()
	mux.Handle(unyov1connect.NewStatusServiceHandler(unavailableStatus{}))
	own := httptest.NewServer(mux)
	t.Cleanup(own.Close)
	cl2, err := client.New(client.Options{URL: own.URL + "," + c})
	if err != nil {
		t.Fatal(err)
	}
	before := cCalls.Load()
	if _, err := cl2.Status.GetStatus(t.Context(), connect.NewRequest(&unyov1.GetStatusRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("GetStatus = %v, want the first replica's own Unavailable", err)
	}
	if cCalls.Load() != before {
		t.Errorf("the client moved on after a replica's own answer")
	}

	for _, bad := range []string{"", " , ", "http://a:1,ftp://b", "a:7401"} {
		if _, err := client.New(client.Options{URL: bad}); err == nil {
			t.Errorf("New(%q) accepted it", bad)
		}
	}
}
