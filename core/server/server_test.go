package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/testutil"
)

// fakeStatus answers GetStatus and nothing else.
type fakeStatus struct{}

func (fakeStatus) GetStatus(context.Context, *connect.Request[unyov1.GetStatusRequest]) (*connect.Response[unyov1.GetStatusResponse], error) {
	return connect.NewResponse(&unyov1.GetStatusResponse{Role: "test"}), nil
}

type fakeNodes struct {
	unyov1connect.UnimplementedNodeServiceHandler
}

func (fakeNodes) ListNodes(context.Context, *connect.Request[unyov1.ListNodesRequest]) (*connect.Response[unyov1.ListNodesResponse], error) {
	return connect.NewResponse(&unyov1.ListNodesResponse{}), nil
}

func serve(t *testing.T, opts server.Options) string {
	t.Helper()
	return serveWith(t, opts, func(srv *server.Server) {
		srv.Handle(unyov1connect.NewStatusServiceHandler(fakeStatus{}, srv.HandlerOptions()...))
		srv.Handle(unyov1connect.NewNodeServiceHandler(fakeNodes{}, srv.HandlerOptions()...))
		srv.Handle(unyov1connect.NewMetricsServiceHandler(unyov1connect.UnimplementedMetricsServiceHandler{}, srv.HandlerOptions()...))
		srv.Handle(unyov1connect.NewLogsServiceHandler(unyov1connect.UnimplementedLogsServiceHandler{}, srv.HandlerOptions()...))
	})
}

// serveWith serves the handlers register mounts on 127.0.0.1 until the test ends.
func serveWith(t *testing.T, opts server.Options, register func(*server.Server)) string {
	t.Helper()
	opts.Listen = "127.0.0.1:0"
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := server.New(opts)
	register(srv)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ln.Addr().String()
}

func TestAuth(t *testing.T) {
	addr := serve(t, server.Options{Auth: server.Auth{AdminTokens: []string{"adm"}, JoinTokens: []string{"join"}}})
	tests := []struct {
		name     string
		token    string
		call     func(*client.Clients) error
		wantCode connect.Code // 0: success
	}{
		{"admin lists nodes", "adm", listNodes, 0},
		{"join token may not list nodes", "join", listNodes, connect.CodePermissionDenied},
		{"join token may read status", "join", getStatus, 0},
		// The fakes are unimplemented: Unimplemented means auth let the call through.
		{"join token may not write metrics", "join", writeMetrics, connect.CodePermissionDenied},
		{"join token may not write logs", "join", writeLogs, connect.CodePermissionDenied},
		{"join token may not query metrics", "join", queryMetrics, connect.CodePermissionDenied},
		{"join token may not query logs", "join", queryLogs, connect.CodePermissionDenied},
		{"no token", "", listNodes, connect.CodeUnauthenticated},
		{"wrong token", "nope", getStatus, connect.CodeUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(client.Options{URL: "http://" + addr, Token: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.call(c)
			if got := connect.CodeOf(err); (err == nil) != (tt.wantCode == 0) || (err != nil && got != tt.wantCode) {
				t.Fatalf("got %v (code %v), want code %v", err, got, tt.wantCode)
			}
		})
	}
}

func listNodes(c *client.Clients) error {
	_, err := c.Nodes.ListNodes(context.Background(), connect.NewRequest(&unyov1.ListNodesRequest{}))
	return err
}

func writeMetrics(c *client.Clients) error {
	_, err := c.Metrics.WriteMetrics(context.Background(), connect.NewRequest(&unyov1.WriteMetricsRequest{}))
	return err
}

func writeLogs(c *client.Clients) error {
	_, err := c.Logs.WriteLogs(context.Background(), connect.NewRequest(&unyov1.WriteLogsRequest{}))
	return err
}

func queryMetrics(c *client.Clients) error {
	_, err := c.Metrics.Query(context.Background(), connect.NewRequest(&unyov1.QueryMetricsRequest{}))
	return err
}

func queryLogs(c *client.Clients) error {
	_, err := c.Logs.Query(context.Background(), connect.NewRequest(&unyov1.QueryLogsRequest{}))
	return err
}

func getStatus(c *client.Clients) error {
	_, err := c.Status.GetStatus(context.Background(), connect.NewRequest(&unyov1.GetStatusRequest{}))
	return err
}

func TestTLS(t *testing.T) {
	ca := testutil.NewCA(t, "test")
	cert, key := ca.Issue(t, "server", "127.0.0.1")
	addr := serve(t, server.Options{CertFile: cert, KeyFile: key})

	c, err := client.New(client.Options{URL: "https://" + addr, TLS: client.TLSOptions{CAFile: ca.CertFile}})
	if err != nil {
		t.Fatal(err)
	}
	if err := getStatus(c); err != nil {
		t.Fatalf("TLS call with the right CA: %v", err)
	}
	// Without the CA the server's certificate is not trusted.
	untrusting, _ := client.New(client.Options{URL: "https://" + addr})
	if err := getStatus(untrusting); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("TLS call without the CA: %v, want a certificate error", err)
	}
	// Plain HTTP to a TLS port fails.
	plain, _ := client.New(client.Options{URL: "http://" + addr})
	if err := getStatus(plain); err == nil {
		t.Fatal("plain HTTP to the TLS port succeeded")
	}
}
