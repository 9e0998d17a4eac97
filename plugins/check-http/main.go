// Command unyo-check-http is the bundled HTTP check plugin: status code,
// body match, latency thresholds and TLS certificate expiry.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const version = "1.0.0"

// Config is plugin-wide.
type Config struct {
	UserAgent string `json:"user_agent,omitempty"`
}

// Target is one check's target.
type Target struct {
	URL    string `json:"url"`
	Method string `json:"method,omitempty"`
	// ExpectStatus lists acceptable codes; empty means 200-399.
	ExpectStatus []int             `json:"expect_status,omitempty"`
	BodyMatch    string            `json:"body_match,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Warning      sdk.Duration      `json:"warning,omitempty"`
	Critical     sdk.Duration      `json:"critical,omitempty"`
	// Certificate expiry thresholds in days, for https; 0 disables.
	CertWarningDays  int  `json:"cert_warning_days,omitempty"`
	CertCriticalDays int  `json:"cert_critical_days,omitempty"`
	Insecure         bool `json:"insecure_skip_verify,omitempty"`
	// MaxBody bytes read for matching (1 MiB).
	MaxBody int64 `json:"max_body,omitempty"`
}

type httpCheck struct {
	mu  sync.Mutex
	cfg Config
}

func (*httpCheck) Info() sdk.Info {
	return sdk.Info{Name: "http", Version: version, Description: "HTTP(S) status, body, latency and certificate expiry check"}
}

func (*httpCheck) ConfigSchema() string {
	return `{"type":"object","additionalProperties":false,"properties":{"user_agent":{"type":"string"}}}`
}

func (h *httpCheck) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "unyo-check-http/" + version
	}
	h.mu.Lock()
	h.cfg = cfg
	h.mu.Unlock()
	return nil
}

func (*httpCheck) Probe(context.Context) (bool, string) { return true, "" }

func parseTarget(m map[string]any) (Target, *regexp.Regexp, error) {
	var t Target
	if err := sdk.Decode(m, &t); err != nil {
		return t, nil, err
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return t, nil, sdk.Invalid("url", "must be an absolute http or https URL")
	}
	if t.Method == "" {
		t.Method = http.MethodGet
	}
	if t.MaxBody <= 0 {
		t.MaxBody = 1 << 20
	}
	var re *regexp.Regexp
	if t.BodyMatch != "" {
		if re, err = regexp.Compile(t.BodyMatch); err != nil {
			return t, nil, sdk.Invalid("body_match", "is not a regular expression: %v", err)
		}
	}
	return t, re, nil
}

func (h *httpCheck) Check(ctx context.Context, req sdk.CheckRequest) (sdk.CheckResult, error) {
	t, re, err := parseTarget(req.Target)
	if err != nil {
		return sdk.CheckResult{}, err
	}
	h.mu.Lock()
	ua := h.cfg.UserAgent
	h.mu.Unlock()
	hreq, err := http.NewRequestWithContext(ctx, t.Method, t.URL, nil)
	if err != nil {
		return sdk.CheckResult{}, sdk.Invalid("method", "%v", err)
	}
	hreq.Header.Set("User-Agent", ua)
	for k, v := range t.Headers {
		hreq.Header.Set(k, v)
	}
	// A transport per run: no connection reuse, so latency and the
	// certificate are measured fresh every time.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: t.Insecure}, DisableKeepAlives: true} //nolint:gosec // operator's explicit choice
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("HTTP CRITICAL - %s: %v", t.URL, err)}, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.MaxBody))
	took := time.Since(start)
	if err != nil {
		return sdk.CheckResult{Status: sdk.Critical, Output: fmt.Sprintf("HTTP CRITICAL - %s: reading the body: %v", t.URL, err)}, nil
	}
	metrics := []sdk.Metric{
		{Label: "time", Value: took.Seconds(), Unit: "s", Warn: secs(t.Warning), Crit: secs(t.Critical), Min: ptr(0)},
		{Label: "size", Value: float64(len(body)), Unit: "B", Min: ptr(0)},
	}
	status, problems := sdk.OK, []string{}
	worse := func(s pluginv1.CheckStatus, why string) {
		if s > status {
			status = s
		}
		problems = append(problems, why)
	}
	okCode := resp.StatusCode >= 200 && resp.StatusCode < 400
	if len(t.ExpectStatus) > 0 {
		okCode = slices.Contains(t.ExpectStatus, resp.StatusCode)
	}
	if !okCode {
		worse(sdk.Critical, fmt.Sprintf("unexpected status %d", resp.StatusCode))
	}
	if re != nil && !re.Match(body) {
		worse(sdk.Critical, fmt.Sprintf("body does not match %q", t.BodyMatch))
	}
	switch {
	case t.Critical > 0 && took >= time.Duration(t.Critical):
		worse(sdk.Critical, fmt.Sprintf("slow response %.3fs", took.Seconds()))
	case t.Warning > 0 && took >= time.Duration(t.Warning):
		worse(sdk.Warning, fmt.Sprintf("slow response %.3fs", took.Seconds()))
	}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		cert := resp.TLS.PeerCertificates[0]
		days := time.Until(cert.NotAfter).Hours() / 24
		metrics = append(metrics, sdk.Metric{Label: "cert_days", Value: float64(int(days))})
		switch {
		case t.CertCriticalDays > 0 && days < float64(t.CertCriticalDays):
			worse(sdk.Critical, fmt.Sprintf("certificate %q expires in %.0f days (%s)", cert.Subject.CommonName, days, cert.NotAfter.UTC().Format(time.DateOnly)))
		case t.CertWarningDays > 0 && days < float64(t.CertWarningDays):
			worse(sdk.Warning, fmt.Sprintf("certificate %q expires in %.0f days (%s)", cert.Subject.CommonName, days, cert.NotAfter.UTC().Format(time.DateOnly)))
		}
	}
	word := map[pluginv1.CheckStatus]string{sdk.OK: "OK", sdk.Warning: "WARNING", sdk.Critical: "CRITICAL"}[status]
	out := fmt.Sprintf("HTTP %s - %s %d in %.3fs", word, resp.Proto, resp.StatusCode, took.Seconds())
	if len(problems) > 0 {
		out += ": " + strings.Join(problems, "; ")
	}
	return sdk.CheckResult{Status: status, Output: out, Metrics: metrics}, nil
}

func secs(d sdk.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("%g", time.Duration(d).Seconds())
}

func ptr(f float64) *float64 { return &f }

func main() { sdk.Serve(&httpCheck{}) }
