// Package client connects to a unyo server's services with a bearer token.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
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
	TLS       TLSOptions
	// Timeout bounds each call; 0 leaves it to the call's context.
	Timeout time.Duration
	// Interceptors run on every call after the token is set (root names
	// the operator it acts for with one).
	Interceptors []connect.Interceptor
	// Hints name the settings that fix what Explain reports, in the words
	// of the program using this client.
	Hints Hints
	// Logger gets the warning about a token sent over plain HTTP; default
	// slog.Default().
	Logger *slog.Logger
	// ClientCertificate, when set, gives the client certificate for each
	// new TLS connection (mTLS), so a renewed one is used without new
	// clients; when it gives none, TLS.CertFile's is presented, if any.
	ClientCertificate func() (*tls.Certificate, error)
}

// Hints name, for an operator, where this client's settings come from:
// "--token or UNYO_TOKEN" for the CLI, "agent.token (UNYO_AGENT_TOKEN)" for
// an agent.
type Hints struct {
	// Server names the setting holding the server's URL ("--server or
	// UNYO_SERVER"), "" when there is none to name.
	Server string
	Token  string
	CAFile string
	// TLS names the client's TLS settings as a whole ("agent.tls").
	TLS string
	// ClientCert names the client certificate settings, "" when the client
	// has none.
	ClientCert string
}

// Clients bundles a client for every unyo service on one server.
type Clients struct {
	URL     string
	hints   Hints
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
	// Networks allocates and releases addresses by hand (root only).
	Networks unyov1connect.NetworkServiceClient
	// Provision hands a cluster its Computes (root) and carries agents'
	// assignments.
	Provision unyov1connect.ProvisionServiceClient
	// Billing reports reserved time and its cost.
	Billing unyov1connect.BillingServiceClient
}

// New returns clients for the server at opts.URL.
func New(opts Options) (*Clients, error) {
	urls, err := SplitURLs(opts.URL)
	if err != nil {
		return nil, err
	}
	url := urls[0]
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	transport.MaxIdleConnsPerHost = 16
	var tlsConf *tls.Config
	tlsConf, err = opts.TLS.Config()
	if err != nil && opts.Hints.TLS != "" {
		return nil, fmt.Errorf("%s: %w", opts.Hints.TLS, err)
	}
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		transport.TLSClientConfig = tlsConf
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClientCertificate != nil {
		if transport.TLSClientConfig == nil {
			transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		static := transport.TLSClientConfig.Certificates
		transport.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := opts.ClientCertificate()
			if err == nil && (c == nil || len(c.Certificate) == 0) && len(static) > 0 {
				return &static[0], nil
			}
			return c, err
		}
	}
	hc := &http.Client{Transport: transport, Timeout: opts.Timeout}
	if opts.ClientCertificate != nil {
		hc.Transport = &certTransport{base: transport, cur: transport.Clone(), cert: opts.ClientCertificate}
	}
	if len(urls) > 1 {
		if hc.Transport, err = newFailover(hc.Transport, urls); err != nil {
			return nil, err
		}
	}
	token := opts.TokenFunc
	if token == nil {
		token = func() string { return opts.Token }
	}
	o := []connect.ClientOption{connect.WithInterceptors(append([]connect.Interceptor{newTokenInterceptor(urls, token, opts.Logger)}, opts.Interceptors...)...)}
	return &Clients{
		URL:         strings.Join(urls, ","),
		hints:       opts.Hints,
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
		Networks:    unyov1connect.NewNetworkServiceClient(hc, url, o...),
		Provision:   unyov1connect.NewProvisionServiceClient(hc, url, o...),
		Billing:     unyov1connect.NewBillingServiceClient(hc, url, o...),
	}, nil
}

// certTransport makes new connections once the client certificate changes:
// a TLS connection keeps the certificate of its handshake, and the server
// refuses a replaced one. Calls in flight finish on the old connections.
type certTransport struct {
	base *http.Transport
	cert func() (*tls.Certificate, error)

	mu   sync.Mutex
	cur  *http.Transport
	last string // the DER of the certificate cur's connections present
}

func (t *certTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var der string
	if c, err := t.cert(); err == nil && c != nil && len(c.Certificate) > 0 {
		der = string(c.Certificate[0])
	}
	t.mu.Lock()
	if der != t.last {
		t.cur.CloseIdleConnections()
		t.cur, t.last = t.base.Clone(), der
	}
	cur := t.cur
	t.mu.Unlock()
	return cur.RoundTrip(r)
}

// newTokenInterceptor sets the bearer token on every call. The first time
// it would send a token in clear text to another machine, it warns: anyone
// on the path can read it there.
func newTokenInterceptor(urls []string, tokenFunc func() string, log *slog.Logger) connect.UnaryInterceptorFunc {
	var warn sync.Once
	exposed := slices.ContainsFunc(urls, cleartextBeyondLoopback)
	url := strings.Join(urls, ",")
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token := tokenFunc(); token != "" {
				if exposed {
					warn.Do(func() {
						log.Warn("sending a bearer token over plain http:// to a host that is not loopback; anyone on the network path can read it: use https:// (server.tls on the server)", "url", url)
					})
				}
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}
}

// cleartextBeyondLoopback reports whether url is plain http to a host other
// than this machine. Only literal loopback addresses and "localhost" count
// as this machine: a name may resolve anywhere.
func cleartextBeyondLoopback(rawURL string) bool {
	u, err := neturl.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// Explain rewords a call's error for the operator reading it on one line,
// naming the setting to change where the client's hints say.
func (c *Clients) Explain(err error) error { return c.hints.Explain(c.URL, err) }

// Explain rewords an error of a call to the server at url, for callers
// without a Clients at hand.
func Explain(url string, err error) error { return Hints{}.Explain(url, err) }

// Explain rewords an error of a call to the server at url, naming the
// settings h names.
func (h Hints) Explain(url string, err error) error {
	hints := h
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	// A wire error is the server's own answer: it was reached, and what it
	// said is the news, not how to reach it.
	wire := connect.IsWireError(err)
	switch {
	case ce.Code() == connect.CodeUnavailable && wire:
		return fmt.Errorf("the unyo server at %s is unavailable: %s", url, ce.Message())
	case ce.Code() == connect.CodeUnavailable:
		if msg := explainTLS(err, hints); msg != "" {
			return fmt.Errorf("cannot reach the unyo server at %s: %s", url, msg)
		}
		if hints.Server != "" {
			return fmt.Errorf("cannot reach the unyo server at %s (is it running? set %s): %s", url, hints.Server, ce.Message())
		}
		return fmt.Errorf("cannot reach the unyo server at %s (is it running?): %s", url, ce.Message())
	case !wire && ce.Code() == connect.CodeUnimplemented:
		// Something answered HTTP, but not unyo's API: an agent's status
		// port, a proxy's error page.
		where := "a unyo root or cluster API address (not an agent's status port)"
		if hints.Server != "" {
			where += " in " + hints.Server
		}
		return fmt.Errorf("%s does not serve the unyo API (it answered HTTP %s): give %s", url, strings.TrimPrefix(ce.Message(), "HTTP status "), where)
	case ce.Code() == connect.CodeUnauthenticated:
		if hints.Token != "" {
			return fmt.Errorf("the unyo server at %s refused the request: %s (this client's token is set by %s)", url, ce.Message(), hints.Token)
		}
		return fmt.Errorf("the unyo server at %s refused the request: %s", url, ce.Message())
	case ce.Code() == connect.CodeDeadlineExceeded:
		return fmt.Errorf("the unyo server at %s did not answer in time: %s", url, ce.Message())
	default:
		return errors.New(ce.Message())
	}
}

// explainTLS says why the server's certificate was not accepted, or "" when
// err is not about that.
func explainTLS(err error, hints Hints) string {
	ca := "give this client the CA that signed it"
	if hints.CAFile != "" {
		ca += " with " + hints.CAFile
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "its TLS certificate is signed by an authority this client does not trust; " + ca
	case errors.As(err, &host):
		return fmt.Sprintf("its TLS certificate is not valid for the host in the URL (%v); use a URL with a host the certificate names, or set the client's server_name", host.Error())
	case errors.As(err, &invalid):
		return fmt.Sprintf("its TLS certificate is not valid: %v", invalid.Error())
	case errors.As(err, &verify):
		return fmt.Sprintf("its TLS certificate was not accepted: %v; %s", verify.Err, ca)
	case strings.Contains(err.Error(), "remote error: tls: "):
		// crypto/tls keeps the type of an alert the server sent unexported.
		_, alert, _ := strings.Cut(err.Error(), "remote error: ")
		msg := fmt.Sprintf("it ended the TLS handshake (%s)", alert)
		if hints.ClientCert != "" {
			msg += "; if it asks for a client certificate, set " + hints.ClientCert + " to one it accepts"
		}
		return msg
	}
	return ""
}
