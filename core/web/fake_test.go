package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/web"
)

const (
	adminTok  = "admin-secret-token"
	viewerTok = "viewer-secret-token"
)

// fakeAPI answers the services the console calls from memory, recording
// who acted as the real services do (server.Actor).
type fakeAPI struct {
	unyov1connect.UnimplementedAlertServiceHandler
	unyov1connect.UnimplementedEventServiceHandler
	unyov1connect.UnimplementedNodeServiceHandler
	unyov1connect.UnimplementedObjectServiceHandler
	unyov1connect.UnimplementedMaintenanceServiceHandler
	unyov1connect.UnimplementedMetricsServiceHandler
	unyov1connect.UnimplementedClusterServiceHandler

	mu      sync.Mutex
	alerts  []*unyov1.Alert
	events  []*unyov1.Event
	nodes   []*unyov1.Node
	objects []*unyov1.Object
	// actedBy is who applied objects and cordoned nodes, as the API
	// recorded them.
	actedBy []string
}

func (f *fakeAPI) setAlerts(as ...*unyov1.Alert) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alerts = as
}

func (f *fakeAPI) ListAlerts(_ context.Context, req *connect.Request[unyov1.ListAlertsRequest]) (*connect.Response[unyov1.ListAlertsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &unyov1.ListAlertsResponse{}
	for _, a := range f.alerts {
		if a.GetState() == unyov1.AlertState_ALERT_STATE_CLOSED && len(req.Msg.GetStates()) == 0 {
			continue
		}
		if n := req.Msg.GetNode(); n != "" && a.GetNode() != n {
			continue
		}
		out.Alerts = append(out.Alerts, proto.Clone(a).(*unyov1.Alert))
	}
	return connect.NewResponse(out), nil
}

func (f *fakeAPI) GetAlert(_ context.Context, req *connect.Request[unyov1.GetAlertRequest]) (*connect.Response[unyov1.GetAlertResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.alerts {
		if a.GetId() == req.Msg.GetId() {
			return connect.NewResponse(&unyov1.GetAlertResponse{Alerts: []*unyov1.Alert{proto.Clone(a).(*unyov1.Alert)}}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found", req.Msg.GetId()))
}

func (f *fakeAPI) act(ctx context.Context, m *unyov1.AlertActionRequest, to unyov1.AlertState) (*connect.Response[unyov1.AlertActionResponse], error) {
	if err := server.RequireWrite(ctx, "Maintenance", m.GetCluster(), false); err != nil { // the operator role, as the clusters ask
		return nil, err
	}
	if to == unyov1.AlertState_ALERT_STATE_CLOSED && m.GetReason() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("closing an alert needs a reason"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.alerts {
		if a.GetId() == m.GetId() && a.GetCluster() == m.GetCluster() {
			a.History = append(a.History, &unyov1.AlertTransition{At: timestamppb.Now(), From: a.GetState(), To: to, By: server.Actor(ctx), Reason: m.GetReason()})
			a.State = to
			return connect.NewResponse(&unyov1.AlertActionResponse{Alert: a}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("alert %q not found", m.GetId()))
}

func (f *fakeAPI) AckAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return f.act(ctx, req.Msg, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED)
}

func (f *fakeAPI) CloseAlert(ctx context.Context, req *connect.Request[unyov1.AlertActionRequest]) (*connect.Response[unyov1.AlertActionResponse], error) {
	return f.act(ctx, req.Msg, unyov1.AlertState_ALERT_STATE_CLOSED)
}

func (f *fakeAPI) ListEvents(context.Context, *connect.Request[unyov1.ListEventsRequest]) (*connect.Response[unyov1.ListEventsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(&unyov1.ListEventsResponse{Events: f.events}), nil
}

func (f *fakeAPI) GetEvent(_ context.Context, req *connect.Request[unyov1.GetEventRequest]) (*connect.Response[unyov1.GetEventResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e.GetId() == req.Msg.GetId() {
			return connect.NewResponse(&unyov1.GetEventResponse{Events: []*unyov1.Event{e}}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("event %q not found", req.Msg.GetId()))
}

func (f *fakeAPI) ListNodes(context.Context, *connect.Request[unyov1.ListNodesRequest]) (*connect.Response[unyov1.ListNodesResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(&unyov1.ListNodesResponse{Nodes: f.nodes}), nil
}

func (f *fakeAPI) GetNode(_ context.Context, req *connect.Request[unyov1.GetNodeRequest]) (*connect.Response[unyov1.GetNodeResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if n.GetName() == req.Msg.GetName() {
			return connect.NewResponse(&unyov1.GetNodeResponse{Nodes: []*unyov1.Node{n}}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q not found", req.Msg.GetName()))
}

// CordonNode needs the operator role, as the cluster's does.
func (f *fakeAPI) CordonNode(ctx context.Context, req *connect.Request[unyov1.CordonNodeRequest]) (*connect.Response[unyov1.CordonNodeResponse], error) {
	if err := server.RequireWrite(ctx, "Node", req.Msg.GetCluster(), false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &unyov1.CordonNodeResponse{}
	for _, n := range f.nodes {
		if n.GetName() == req.Msg.GetName() {
			out.Found++
			if n.GetCordoned() != req.Msg.GetCordoned() {
				n.Cordoned = req.Msg.GetCordoned()
				out.Changed++
				f.actedBy = append(f.actedBy, server.Actor(ctx))
			}
		}
	}
	return connect.NewResponse(out), nil
}

// DrainNode answers as a cluster without drain does.
func (f *fakeAPI) DrainNode(ctx context.Context, req *connect.Request[unyov1.DrainNodeRequest]) (*connect.Response[unyov1.DrainNodeResponse], error) {
	if err := server.RequireWrite(ctx, "Node", req.Msg.GetCluster(), false); err != nil {
		return nil, err
	}
	return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("draining nodes is not built yet in cluster c1"))
}

func (f *fakeAPI) List(_ context.Context, req *connect.Request[unyov1.ListRequest]) (*connect.Response[unyov1.ListResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &unyov1.ListResponse{}
	for _, o := range f.objects {
		if kinds.KindOf(o) == req.Msg.GetKind() {
			out.Objects = append(out.Objects, o)
		}
	}
	return connect.NewResponse(out), nil
}

// Get answers the last object applied under the name.
func (f *fakeAPI) Get(_ context.Context, req *connect.Request[unyov1.GetRequest]) (*connect.Response[unyov1.GetResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := req.Msg.GetRef()
	for i := len(f.objects) - 1; i >= 0; i-- {
		o := f.objects[i]
		if kinds.KindOf(o) == ref.GetKind() && kinds.Name(o) == ref.GetName() {
			return connect.NewResponse(&unyov1.GetResponse{Objects: []*unyov1.Object{proto.Clone(o).(*unyov1.Object)}}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q not found", ref.GetKind(), ref.GetName()))
}

func (f *fakeAPI) Apply(ctx context.Context, req *connect.Request[unyov1.ApplyRequest]) (*connect.Response[unyov1.ApplyResponse], error) {
	if err := server.RequireWrite(ctx, "Maintenance", "", false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects = append(f.objects, req.Msg.GetObjects()...)
	f.actedBy = append(f.actedBy, server.Actor(ctx))
	return connect.NewResponse(&unyov1.ApplyResponse{}), nil
}

func (f *fakeAPI) QueryRange(_ context.Context, req *connect.Request[unyov1.QueryRangeRequest]) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	if strings.Contains(req.Msg.GetExpr(), "((") {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot parse %q", req.Msg.GetExpr()))
	}
	s := &unyov1.Series{Labels: map[string]string{"__name__": "node_load1", "node": "n1", "cluster": "c1"}}
	start := req.Msg.GetStart().AsTime()
	for i := range 30 {
		s.Points = append(s.Points, &unyov1.Point{TimeMs: start.Add(time.Duration(i) * time.Minute).UnixMilli(), Value: float64(i % 7)})
	}
	return connect.NewResponse(&unyov1.QueryMetricsResponse{Series: []*unyov1.Series{s}}), nil
}

func (f *fakeAPI) ListClusters(context.Context, *connect.Request[unyov1.ListClustersRequest]) (*connect.Response[unyov1.ListClustersResponse], error) {
	return connect.NewResponse(&unyov1.ListClustersResponse{Clusters: []*unyov1.ClusterInfo{{Name: "c1"}}}), nil
}

// env is a server with the fake API behind real authentication (an admin
// token and a viewer token) and the console at /.
type env struct {
	t   testing.TB
	api *fakeAPI
	srv *httptest.Server
	// served is the time the server spent on page requests, from the
	// request's arrival to the handler's return (the whole page sent).
	served atomic.Int64
}

func newEnv(t testing.TB, api *fakeAPI) *env { return newEnvLive(t, api, 200*time.Millisecond) }

// newEnvLive is newEnv with the live streams asking the API every interval.
func newEnvLive(t testing.TB, api *fakeAPI, interval time.Duration) *env {
	srv := server.New(server.Options{Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), Auth: server.Auth{AdminTokens: []string{adminTok}}})
	srv.Auth().Authenticators = append(srv.Auth().Authenticators, server.AuthenticatorFunc(func(_ context.Context, c server.Credential) (server.Principal, error) {
		if c.Token == viewerTok {
			return server.Principal{Kind: server.KindUser, Name: "vera", Role: server.RoleViewer}, nil
		}
		return server.Principal{}, server.ErrNotMine
	}))
	o := srv.HandlerOptions()
	srv.Handle(unyov1connect.NewAlertServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewEventServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewNodeServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewObjectServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewMaintenanceServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewMetricsServiceHandler(api, o...))
	srv.Handle(unyov1connect.NewClusterServiceHandler(api, o...))
	c, err := web.New(web.Options{API: srv.Handler(), Auth: srv.Auth(), LiveInterval: interval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/", c)
	e := &env{t: t, api: api}
	h := srv.Handler()
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		e.served.Add(int64(time.Since(start)))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// inventory is the diagram package's fixture.
func inventory(t testing.TB) []*unyov1.Object {
	objs, err := manifest.DecodeFile(filepath.Join("..", "..", "provision", "diagram", "testdata", "inventory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func alert(cluster, id string, level unyov1.AlertLevel, firstSeen time.Time, node, check string) *unyov1.Alert {
	return &unyov1.Alert{Id: id, Cluster: cluster, Key: node + "/" + check, Level: level, State: unyov1.AlertState_ALERT_STATE_OPEN,
		Node: node, Check: check, Summary: node + " " + check + " is failing", Rule: "default", Count: 3,
		FirstSeen: timestamppb.New(firstSeen), LastSeen: timestamppb.New(firstSeen.Add(time.Minute)), LastEventId: "ev-" + id}
}

// browser is a client with a session: it keeps the cookies itself, since
// Go's cookie jar does not send Secure cookies over plain HTTP while
// browsers do to 127.0.0.1.
type browser struct {
	e       *env
	cookies map[string]string
	csrf    string
}

func (e *env) browser() *browser { return &browser{e: e, cookies: map[string]string{}} }

func (b *browser) do(method, path string, form map[string][]string, hdr map[string]string) (*http.Response, string) {
	b.e.t.Helper()
	var body string
	if form != nil {
		v := make([]string, 0)
		for k, vs := range form {
			for _, x := range vs {
				v = append(v, urlEscape(k)+"="+urlEscape(x))
			}
		}
		body = strings.Join(v, "&")
	}
	req, err := http.NewRequest(method, b.e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		b.e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	page, _ := io.ReadAll(resp.Body)
	return resp, string(page)
}

func (b *browser) get(path string) (*http.Response, string) { return b.do("GET", path, nil, nil) }

// login logs in with token and keeps the session's CSRF token.
func (b *browser) login(token string) *http.Response {
	b.e.t.Helper()
	_, page := b.get("/login")
	nonce := between(page, `name="csrf" value="`, `"`)
	resp, _ := b.do("POST", "/login", map[string][]string{"csrf": {nonce}, "token": {token}, "next": {"/alerts"}}, nil)
	if resp.StatusCode == http.StatusSeeOther {
		_, page := b.get("/alerts")
		b.csrf = between(page, `name="csrf" value="`, `"`)
	}
	return resp
}

func between(s, a, b string) string {
	_, s, ok := strings.Cut(s, a)
	if !ok {
		return ""
	}
	s, _, _ = strings.Cut(s, b)
	return s
}

func urlEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D", "+", "%2B", " ", "+", "/", "%2F", "#", "%23")
	return r.Replace(s)
}
