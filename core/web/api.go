package web

import (
	"bytes"
	"io"
	"net/http"

	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// apiBase is the URL the in-process clients address; the transport never
// dials it.
const apiBase = "http://unyo-console.invalid"

// api is the API as one operator calls it: the services the console uses.
type api struct {
	alerts      unyov1connect.AlertServiceClient
	events      unyov1connect.EventServiceClient
	nodes       unyov1connect.NodeServiceClient
	objects     unyov1connect.ObjectServiceClient
	maintenance unyov1connect.MaintenanceServiceClient
	metrics     unyov1connect.MetricsServiceClient
	clusters    unyov1connect.ClusterServiceClient
}

// newAPI returns clients that call h in-process with token as the bearer
// credential and remote as the caller's address, so that the API
// authenticates, authorises and audits the operator as it would the CLI.
func newAPI(h http.Handler, token, remote string) *api {
	hc := &http.Client{Transport: inProcess{h: h, token: token, remote: remote}}
	return &api{
		alerts:      unyov1connect.NewAlertServiceClient(hc, apiBase),
		events:      unyov1connect.NewEventServiceClient(hc, apiBase),
		nodes:       unyov1connect.NewNodeServiceClient(hc, apiBase),
		objects:     unyov1connect.NewObjectServiceClient(hc, apiBase),
		maintenance: unyov1connect.NewMaintenanceServiceClient(hc, apiBase),
		metrics:     unyov1connect.NewMetricsServiceClient(hc, apiBase),
		clusters:    unyov1connect.NewClusterServiceClient(hc, apiBase),
	}
}

// inProcess hands a client's request to the server's handler and returns
// what it wrote, without a socket. Only unary calls pass through it.
type inProcess struct {
	h      http.Handler
	token  string
	remote string
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = t.remote
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if r.Body == nil {
		r.Body = http.NoBody
	}
	// Nothing crosses a wire: compressing the answer would only cost time
	// (a quarter of the alerts page's with 10,000 alerts).
	r.Header.Del("Accept-Encoding")
	r.Header.Del("Connect-Accept-Encoding")
	r.Header.Del("Authorization")
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, r)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(rec.code), StatusCode: rec.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the response writer of an in-process call.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorder) Flush() {}
