package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/server"
)

// echoNodes answers GetNode with the name it was asked for.
type echoNodes struct {
	unyov1connect.UnimplementedNodeServiceHandler
}

func (echoNodes) GetNode(_ context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	return connect.NewResponse(&unyov1.GetNodeResponse{Nodes: []*unyov1.Node{{Name: req.Msg.GetName()}}}), nil
}

func TestJSONRequestsAreDecodedStrictly(t *testing.T) {
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv.Handle(unyov1connect.NewNodeServiceHandler(echoNodes{}, srv.HandlerOptions()...))
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "http://" + ln.Addr().String()

	tests := []struct {
		name, contentType, body string
		wantStatus              int
		want                    string
	}{
		{"known fields", "application/json", `{"name":"web-1","cluster":"c1"}`, 200, `"web-1"`},
		{"snake_case and charset", "application/json; charset=utf-8", `{"name":"web-1"}`, 200, `"web-1"`},
		{"misspelt field", "application/json", `{"nmae":"web-1"}`, 400, `unknown field \"nmae\"`},
		{"unknown nested field", "application/json", `{"name":"web-1","extra":{"a":1}}`, 400, `unknown field \"extra\"`},
		{"empty body", "application/json", ``, 400, `empty body`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(url+unyov1connect.NodeServiceGetNodeProcedure, tt.contentType, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(b), tt.want) {
				t.Fatalf("got %d %s, want %d with %s", resp.StatusCode, b, tt.wantStatus, tt.want)
			}
		})
	}

	// The CLI and agents speak binary proto, which is unchanged.
	c, err := client.New(client.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Nodes.GetNode(context.Background(), connect.NewRequest(&unyov1.GetNodeRequest{Name: "web-2"}))
	if err != nil || out.Msg.GetNodes()[0].GetName() != "web-2" {
		t.Fatalf("binary client: %v %v", out, err)
	}
}
