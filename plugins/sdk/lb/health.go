package lb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// BackendState is one backend's health as its checks found it: Fall
// failures in a row take a healthy backend out of rotation, Rise successes
// in a row bring an unhealthy one back. A backend not yet Checked is
// decided by its first result (a new backend goes into rotation on its
// first success); a provider that wants new backends in rotation at once
// starts them Healthy and Checked.
type BackendState struct {
	Healthy bool      `json:"healthy"`
	Checked bool      `json:"checked"`
	Reason  string    `json:"reason,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// The current runs of successes and failures (not kept across
	// restarts).
	OKRun   int `json:"-"`
	FailRun int `json:"-"`
}

// Observe folds one check result (err nil: passed) taken at now into s and
// says whether the backend went in or out of rotation. h has its defaults
// (Health.WithDefaults).
func (s *BackendState) Observe(err error, h Health, now time.Time) bool {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	if err == nil {
		s.OKRun, s.FailRun = s.OKRun+1, 0
	} else {
		s.OKRun, s.FailRun = 0, s.FailRun+1
	}
	if !s.Checked {
		s.Healthy, s.Checked, s.Reason, s.Since = err == nil, true, reason, now
		return true
	}
	switch {
	case s.Healthy && err != nil && s.FailRun >= h.Fall:
		s.Healthy, s.Reason, s.Since = false, reason, now
		return true
	case !s.Healthy && err == nil && s.OKRun >= h.Rise:
		s.Healthy, s.Reason, s.Since = true, "", now
		return true
	case !s.Healthy && err != nil:
		s.Reason = reason
	}
	return false
}

// DialFunc opens a connection (net.Dialer.DialContext, or one that dials
// from another network namespace).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Probe checks one backend at address a once, as h says: a TCP connect, or
// an HTTP GET answered with a 2xx or 3xx status, within h.Timeout. dial nil
// dials from the caller's namespace. The error names what failed.
func Probe(ctx context.Context, dial DialFunc, h Health, a netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.Timeout))
	defer cancel()
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	addr := net.JoinHostPort(a.String(), strconv.Itoa(h.Port))
	if h.Kind != "http" {
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("connect %s: %w", addr, unwrapOp(err))
		}
		return c.Close()
	}
	c := &http.Client{
		Transport:     &http.Transport{DialContext: dial, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+h.Path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "unyo load-balancer health check")
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = unwrapOp(ue.Unwrap())
		}
		return fmt.Errorf("GET http://%s%s: %w", addr, h.Path, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET http://%s%s: %s", addr, h.Path, resp.Status)
	}
	return nil
}

// unwrapOp drops net.OpError's repetition of the address.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
