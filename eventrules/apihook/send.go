package apihook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/ctxwait"
)

// Outcome is what became of one delivery, for the event's explanation and
// the logs.
type Outcome struct {
	Succeeded bool
	// Attempts is how many requests were made; 0 when the body could not
	// be built.
	Attempts int
	// Status is the HTTP status of the last response; 0 if none came.
	Status int
	// Err is why the last attempt failed, nil on success. It names the
	// URL without credentials or query.
	Err      error
	Duration time.Duration

	target string // the redacted URL, for String
}

// String reads, for example, "delivered after 1 attempt: POST
// https://hooks.example.com/unyo: 200 OK" or "failed after 4 attempts:
// POST https://hooks.example.com/unyo: 503 Service Unavailable".
func (o Outcome) String() string {
	attempts := fmt.Sprintf("%d attempts", o.Attempts)
	if o.Attempts == 1 {
		attempts = "1 attempt"
	}
	switch {
	case o.Succeeded:
		return fmt.Sprintf("delivered after %s: POST %s: %s", attempts, o.target, statusText(o.Status))
	case o.Attempts == 0:
		return fmt.Sprintf("not sent: %v", o.Err)
	}
	return fmt.Sprintf("failed after %s: %v", attempts, o.Err)
}

// Send POSTs the payload to cfg.URL with at-least-once intent: every
// attempt carries the same Idempotency-Key header (p.Key) so that the
// receiver can drop duplicates.
//
// A 2xx response is success. Network errors, attempts that time out
// (cfg.Timeout each), 5xx and 429 are retried up to cfg.Retries times,
// waiting an exponentially growing, jittered delay (cfg.BaseBackoff
// doubling up to cfg.MaxBackoff), or what a Retry-After header asks for
// when that is no longer than cfg.MaxBackoff (else cfg.MaxBackoff: unyo
// would rather retry early than give up). Other responses, such as 400 or
// 401, redirects, certificate errors and destinations the policy refuses
// are permanent: retrying cannot fix them. ctx ends the whole delivery,
// waits included. Only the status of a response is kept, never its body,
// which may hold whatever the receiver (or an internal service a rule
// pointed at) answers.
//
// hc should come from NewClient; nil means NewClient(nil), the default
// policy.
func Send(ctx context.Context, hc *http.Client, cfg Config, p Payload) Outcome {
	body, err := Body(cfg, p)
	if err != nil {
		return Outcome{target: Redact(cfg.URL), Err: err}
	}
	return SendBody(ctx, hc, cfg, p.Key, body)
}

// SendBody delivers a body Body built earlier, as Send does. The cluster
// builds bodies when it commits an action and delivers them from its
// outbox, possibly after a restart.
func SendBody(ctx context.Context, hc *http.Client, cfg Config, key string, body []byte) Outcome {
	start := time.Now()
	out := Outcome{target: Redact(cfg.URL)}
	if hc == nil {
		hc = NewClient(nil)
	}
	for {
		out.Attempts++
		r := attempt(ctx, hc, cfg, out.target, body, key)
		out.Status, out.Err = r.status, r.err
		if r.err == nil {
			out.Succeeded = true
			break
		}
		if !r.retry || out.Attempts > cfg.Retries {
			break
		}
		if !ctxwait.Sleep(ctx, backoff(cfg, out.Attempts, r.retryAfter)) {
			out.Err = fmt.Errorf("%w; stopped retrying: %w", out.Err, context.Cause(ctx))
			break
		}
	}
	out.Duration = time.Since(start)
	return out
}

type result struct {
	status     int
	err        error
	retry      bool
	retryAfter time.Duration // -1 when the response did not say
}

func attempt(ctx context.Context, hc *http.Client, cfg Config, target string, body []byte, key string) result {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	fail := func(retry bool, format string, args ...any) result {
		return result{err: fmt.Errorf("POST %s: "+format, append([]any{target}, args...)...), retry: retry, retryAfter: -1}
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fail(false, "%w", unwrapURLError(err))
	}
	req.Header.Set("User-Agent", UserAgent)
	for k, v := range cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}

	resp, err := hc.Do(req)
	if err != nil {
		var certErr *tls.CertificateVerificationError
		var destErr *DestinationError
		switch {
		case errors.As(err, &destErr):
			return fail(false, "%w", destErr)
		case ctx.Err() != nil:
			// The caller gave up; not the receiver's failure.
			return fail(false, "%w", context.Cause(ctx))
		case actx.Err() != nil:
			return fail(true, "no response within %s", timeout)
		case errors.As(err, &certErr):
			return fail(false, "%w", unwrapURLError(err))
		}
		return fail(true, "%w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	// Read, bounded and within the attempt's deadline, only so that the
	// receiver sees its answer taken; the body is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))

	r := result{status: resp.StatusCode, retryAfter: -1}
	msg := statusText(resp.StatusCode)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return r
	case code == http.StatusTooManyRequests || code >= 500:
		r.retry = true
		r.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		r.err = fmt.Errorf("POST %s: %s", target, msg)
	case code >= 400:
		r.err = fmt.Errorf("POST %s: %s (not retried: the receiver rejected the request)", target, msg)
	case code >= 300 && code < 400:
		r.err = fmt.Errorf("POST %s: %s (not retried: redirects are not followed; use the final URL)", target, msg)
	default:
		r.err = fmt.Errorf("POST %s: %s (not retried: expected a 2xx response)", target, msg)
	}
	return r
}

// backoff is the wait before the attempt after attempt n (1-based): equal
// jitter over an exponential delay, so that hooks failing together do not
// retry in lockstep, and never less than half the delay.
func backoff(cfg Config, n int, retryAfter time.Duration) time.Duration {
	base, maxWait := cfg.BaseBackoff, cfg.MaxBackoff
	if base <= 0 {
		base = DefaultBaseBackoff
	}
	if maxWait <= 0 {
		maxWait = DefaultMaxBackoff
	}
	if retryAfter >= 0 {
		return min(retryAfter, maxWait)
	}
	d := base
	for i := 1; i < n && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads delay-seconds or an HTTP date; -1 if absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return -1
		}
		return time.Duration(min(s, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// Redact is the URL for messages: without the password, which url.Redacted
// masks, and without the query, which often carries a token.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	hadQuery := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	s := u.Redacted()
	if hadQuery {
		s += "?..."
	}
	return s
}

// unwrapURLError drops net/http's *url.Error wrapper, whose message repeats
// the full URL, query included; callers name the redacted URL themselves.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}
