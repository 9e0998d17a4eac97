// Package client connects to a unyo server's services with a bearer token.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// Options say where the server is and how to authenticate.
type Options struct {
	URL   string
	Token string
	// TokenFunc, when set, gives the token for each call instead of Token
	// (an agent swaps its join token for its node's own credential).
	TokenFunc func() string
	// CAFile verifies an https server against this CA instead of the system roots.
	CAFile  string
	Timeout time.Duration
	// Interceptors run on every call after the token is set (root names
	// the operator it acts for with one).
	Interceptors []connect.Interceptor
}

// Clients bundles a client for every unyo service on one server.
type Clients struct {
	URL     string
	Agent   unyov1connect.AgentServiceClient
	Objects unyov1connect.ObjectServiceClient
	Nodes   unyov1connect.NodeServiceClient
	Events  unyov1connect.EventServiceClient
	Cluster unyov1connect.ClusterServiceClient
	Status  unyov1connect.StatusServiceClient
	Alerts  unyov1connect.AlertServiceClient
	// Maintenance ends maintenance; starting one is an Objects.Apply.
	Maintenance unyov1connect.MaintenanceServiceClient
	Metrics     unyov1connect.MetricsServiceClient
	Logs        unyov1connect.LogsServiceClient
	Stats       unyov1connect.StatsServiceClient
	Tokens      unyov1connect.TokenServiceClient
	Audit       unyov1connect.AuditServiceClient
}

// New returns clients for the server at opts.URL.
func New(opts Options) (*Clients, error) {
	url := strings.TrimRight(opts.URL, "/")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("server address %q must start with http:// or https://", opts.URL)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	transport.MaxIdleConnsPerHost = 16
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", opts.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: transport, Timeout: opts.Timeout}
	token := opts.TokenFunc
	if token == nil {
		token = func() string { return opts.Token }
	}
	o := []connect.ClientOption{connect.WithInterceptors(append([]connect.Interceptor{tokenInterceptor(token)}, opts.Interceptors...)...)}
	return &Clients{
		URL:         url,
		Agent:       unyov1connect.NewAgentServiceClient(hc, url, o...),
		Objects:     unyov1connect.NewObjectServiceClient(hc, url, o...),
		Nodes:       unyov1connect.NewNodeServiceClient(hc, url, o...),
		Events:      unyov1connect.NewEventServiceClient(hc, url, o...),
		Cluster:     unyov1connect.NewClusterServiceClient(hc, url, o...),
		Status:      unyov1connect.NewStatusServiceClient(hc, url, o...),
		Alerts:      unyov1connect.NewAlertServiceClient(hc, url, o...),
		Maintenance: unyov1connect.NewMaintenanceServiceClient(hc, url, o...),
		Metrics:     unyov1connect.NewMetricsServiceClient(hc, url, o...),
		Logs:        unyov1connect.NewLogsServiceClient(hc, url, o...),
		Stats:       unyov1connect.NewStatsServiceClient(hc, url, o...),
		Tokens:      unyov1connect.NewTokenServiceClient(hc, url, o...),
		Audit:       unyov1connect.NewAuditServiceClient(hc, url, o...),
	}, nil
}

func tokenInterceptor(tokenFunc func() string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token := tokenFunc(); token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}
}

// Explain rewords a call's error for the operator reading it on one line.
func Explain(url string, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code() {
	case connect.CodeUnavailable:
		return fmt.Errorf("cannot reach the unyo server at %s (is it running? set --server or UNYO_SERVER): %s", url, ce.Message())
	case connect.CodeUnauthenticated:
		return fmt.Errorf("the unyo server at %s refused the request: %s", url, ce.Message())
	case connect.CodeDeadlineExceeded:
		return fmt.Errorf("the unyo server at %s did not answer in time: %s", url, ce.Message())
	default:
		return errors.New(ce.Message())
	}
}
