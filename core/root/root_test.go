package root

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// serve runs register's services on a loopback port until the test ends
// and returns clients for them.
func serve(t testing.TB, log *slog.Logger, register func(*server.Server), run func(context.Context)) *client.Clients {
	t.Helper()
	url := startServer(t, server.New(server.Options{Listen: "127.0.0.1:0", Logger: log}), register, run)
	c, err := client.New(client.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startServer runs register's services on srv until the test ends and
// returns its URL.
func startServer(t testing.TB, srv *server.Server, register func(*server.Server), run func(context.Context)) string {
	t.Helper()
	register(srv)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); run(ctx) }()
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return "http://" + ln.Addr().String()
}

func openStore(t testing.TB, name string) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startRoot runs a root with one real cluster registered and returns the
// root's clients; both log to opts.Logger.
func startRoot(t testing.TB, opts Options) *client.Clients {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cl := cluster.New(openStore(t, "cluster.db"), cluster.Options{Name: "c1", Replica: "r1", Logger: opts.Logger})
	cc := serve(t, opts.Logger, cl.Register, cl.Run)
	r := New(openStore(t, "root.db"), opts)
	rc := serve(t, opts.Logger, r.Register, func(ctx context.Context) { <-ctx.Done() })
	if _, err := rc.Cluster.RegisterCluster(context.Background(), connect.NewRequest(&unyov1.RegisterClusterRequest{Name: "c1", Url: cc.URL})); err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestMalformedRequestsAreRefusedBeforeFanOut: each request names what is
// missing, and root keeps answering (Get with {} used to panic in a fan-out
// goroutine and end the process).
func TestMalformedRequestsAreRefusedBeforeFanOut(t *testing.T) {
	rc := startRoot(t, Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"Get {}", func() error {
			_, err := rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{}))
			return err
		}, "ref.kind: required"},
		{"Get without name", func() error {
			_, err := rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Check"}}))
			return err
		}, "ref.name: required"},
		{"Get unknown kind", func() error {
			_, err := rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Chek", Name: "x"}}))
			return err
		}, `ref.kind: unknown kind "Chek"`},
		{"Delete ref without kind", func() error {
			_, err := rc.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Check", Name: "a"}, {Name: "b"}}}))
			return err
		}, "refs[1].kind: required"},
		{"List without kind", func() error {
			_, err := rc.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{}))
			return err
		}, "kind: required"},
		{"GetNode {}", func() error {
			_, err := rc.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{}))
			return err
		}, "name: required"},
		{"GetEvent {}", func() error {
			_, err := rc.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{}))
			return err
		}, "id: required"},
		{"ListEvents huge limit", func() error {
			_, err := rc.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{Limit: 2147483647}))
			return err
		}, "limit: 2147483647 is more than the maximum of 10000"},
		{"ListAlerts negative limit", func() error {
			_, err := rc.Alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Limit: -1}))
			return err
		}, "limit: -1 is negative"},
		{"GetAlert {}", func() error {
			_, err := rc.Alerts.GetAlert(ctx, connect.NewRequest(&unyov1.GetAlertRequest{}))
			return err
		}, "id: required"},
		{"AckAlert {}", func() error {
			_, err := rc.Alerts.AckAlert(ctx, connect.NewRequest(&unyov1.AlertActionRequest{}))
			return err
		}, "id: required"},
		{"EndMaintenance {}", func() error {
			_, err := rc.Maintenance.EndMaintenance(ctx, connect.NewRequest(&unyov1.EndMaintenanceRequest{}))
			return err
		}, "name: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
	// Root is still up and a well-formed Get reaches the cluster.
	_, err := rc.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Check", Name: "absent"}}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Get of an absent check: got %v, want NotFound", err)
	}
}

// syncBuffer is a log destination safe for the fan-out goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFanoutRecoversPanics: a panic while asking one cluster is that
// cluster's Internal error, logged with its stack; the others still answer.
func TestFanoutRecoversPanics(t *testing.T) {
	var logs syncBuffer
	r := New(openStore(t, "root.db"), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	clusters := []*unyov1.ClusterInfo{{Name: "a", Url: "http://127.0.0.1:1"}, {Name: "b", Url: "http://127.0.0.1:2"}}
	answers, errs := fanout(context.Background(), r, clusters, func(_ context.Context, name string, _ *client.Clients) (string, error) {
		if name == "b" {
			var m map[string]int
			m["boom"]++ // a nil map write, as a bug would
		}
		return "ok from " + name, nil
	})
	if len(answers) != 1 || answers[0].value != "ok from a" {
		t.Fatalf("answers = %+v, want cluster a's", answers)
	}
	if len(errs) != 1 || errs[0].GetCluster() != "b" || !strings.Contains(errs[0].GetError(), "cluster b") {
		t.Fatalf("errors = %v, want one naming cluster b", errs)
	}
	all := ask(context.Background(), r, clusters[1:], func(context.Context, string, *client.Clients) (int, error) { panic("boom") })
	var ce *connect.Error
	if !errors.As(all[0].err, &ce) || ce.Code() != connect.CodeInternal {
		t.Fatalf("err = %v, want Internal", all[0].err)
	}
	if l := logs.String(); !strings.Contains(l, "panicked") || !strings.Contains(l, "cluster=b") || !strings.Contains(l, "goroutine") {
		t.Fatalf("log does not name the cluster with a stack:\n%s", l)
	}
}
