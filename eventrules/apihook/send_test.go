package apihook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// receiver is an httptest server (on 127.0.0.1) that answers with
// responses in turn, repeating the last, and records what it was sent.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
}

type response struct {
	status     int
	body       string
	retryAfter string
	block      bool // wait until the request's context ends
}

func newReceiver(t *testing.T, responses ...response) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.requests)
		rc.requests = append(rc.requests, r)
		rc.bodies = append(rc.bodies, body)
		rc.mu.Unlock()
		resp := responses[min(n, len(responses)-1)]
		if resp.block {
			<-r.Context().Done()
			return
		}
		if resp.retryAfter != "" {
			w.Header().Set("Retry-After", resp.retryAfter)
		}
		w.WriteHeader(resp.status)
		io.WriteString(w, resp.body)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// got returns request i and its body. Locked: the race detector does not
// count the network round trip as synchronization.
func (rc *receiver) got(i int) (*http.Request, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.requests[i], rc.bodies[i]
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.requests)
}

// fast is a config whose retries wait milliseconds, so tests stay fast.
func fast(url string) apihook.Config {
	return apihook.Config{URL: url + "/hook", Timeout: 5 * time.Second, Retries: 3, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

func payload() apihook.Payload {
	return apihook.Payload{Key: "disk-page:ev-1", Rule: "disk-page", Events: []*unyov1.Event{critical("ev-1", "web1", t0)}}
}

func TestSendSuccess(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusNoContent})
	cfg := fast(rc.URL)
	cfg.Headers = map[string]string{"Authorization": "Bearer s3cret", "X-Team": "infra"}
	out := apihook.Send(t.Context(), rc.Client(), cfg, payload())

	if !out.Succeeded || out.Attempts != 1 || out.Status != 204 || out.Err != nil {
		t.Fatalf("outcome = %+v", out)
	}
	if want := "delivered after 1 attempt: POST " + rc.URL + "/hook: 204 No Content"; out.String() != want {
		t.Errorf("String = %q\nwant       %q", out.String(), want)
	}
	r, body := rc.got(0)
	if r.Method != http.MethodPost || r.URL.Path != "/hook" {
		t.Errorf("request = %s %s", r.Method, r.URL.Path)
	}
	for k, want := range map[string]string{
		"Content-Type":    "application/json",
		"Idempotency-Key": "disk-page:ev-1",
		"User-Agent":      "unyo",
		"Authorization":   "Bearer s3cret",
		"X-Team":          "infra",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	want, err := apihook.Body(cfg, payload())
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != string(want) {
		t.Errorf("body =\n%s\nwant\n%s", body, want)
	}
}

// Every attempt of one delivery carries the same Idempotency-Key, and the
// hook's own headers cannot replace it.
func TestSendRetriesUntilSuccess(t *testing.T) {
	rc := newReceiver(t,
		response{status: http.StatusBadGateway},
		response{status: http.StatusServiceUnavailable, body: "try later"},
		response{status: http.StatusOK, body: "ok"},
	)
	cfg := fast(rc.URL)
	cfg.Headers = map[string]string{"Idempotency-Key": "forged"}
	out := apihook.Send(t.Context(), rc.Client(), cfg, payload())

	if !out.Succeeded || out.Attempts != 3 || out.Status != 200 || out.Err != nil {
		t.Fatalf("outcome = %+v", out)
	}
	if rc.count() != 3 {
		t.Errorf("receiver saw %d requests, want 3", rc.count())
	}
	_, first := rc.got(0)
	for i := range rc.count() {
		r, body := rc.got(i)
		if got := r.Header.Get("Idempotency-Key"); got != "disk-page:ev-1" {
			t.Errorf("attempt %d: Idempotency-Key = %q", i+1, got)
		}
		if string(body) != string(first) {
			t.Errorf("attempt %d sent a different body", i+1)
		}
	}
	if !strings.HasPrefix(out.String(), "delivered after 3 attempts: ") {
		t.Errorf("String = %q", out.String())
	}
}

func TestSendGivesUp(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusServiceUnavailable})
	out := apihook.Send(t.Context(), rc.Client(), fast(rc.URL), payload())
	if out.Succeeded || out.Attempts != 4 || out.Status != 503 || rc.count() != 4 {
		t.Fatalf("outcome = %+v, receiver saw %d", out, rc.count())
	}
	if want := "failed after 4 attempts: POST " + rc.URL + "/hook: 503 Service Unavailable"; out.String() != want {
		t.Errorf("String = %q\nwant       %q", out.String(), want)
	}
}

func TestSendClientErrorIsNotRetried(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusBadRequest, body: "{\"error\":\n  \"unknown field: foo\"}"})
	out := apihook.Send(t.Context(), rc.Client(), fast(rc.URL), payload())
	if out.Succeeded || out.Attempts != 1 || out.Status != 400 || rc.count() != 1 {
		t.Fatalf("outcome = %+v, receiver saw %d", out, rc.count())
	}
	// The body is not kept: it is whatever the destination answered.
	want := `failed after 1 attempt: POST ` + rc.URL + `/hook: 400 Bad Request (not retried: the receiver rejected the request)`
	if out.String() != want {
		t.Errorf("String = %q\nwant       %q", out.String(), want)
	}
}

func TestSendTooManyRequestsHonorsRetryAfter(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusTooManyRequests, retryAfter: "0"}, response{status: http.StatusOK})
	cfg := fast(rc.URL)
	// The computed backoff would be far longer than the test's patience;
	// Retry-After: 0 must win.
	cfg.BaseBackoff, cfg.MaxBackoff = time.Minute, time.Minute
	out := apihook.Send(t.Context(), rc.Client(), cfg, payload())
	if !out.Succeeded || out.Attempts != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	if out.Duration > 10*time.Second {
		t.Errorf("took %v; Retry-After: 0 was not honored", out.Duration)
	}
}

func TestSendTimeoutPerAttempt(t *testing.T) {
	rc := newReceiver(t, response{block: true})
	cfg := fast(rc.URL)
	cfg.Timeout, cfg.Retries = 50*time.Millisecond, 1
	out := apihook.Send(t.Context(), rc.Client(), cfg, payload())
	if out.Succeeded || out.Attempts != 2 || out.Status != 0 || rc.count() != 2 {
		t.Fatalf("outcome = %+v, receiver saw %d", out, rc.count())
	}
	if want := "failed after 2 attempts: POST " + rc.URL + "/hook: no response within 50ms"; out.String() != want {
		t.Errorf("String = %q\nwant       %q", out.String(), want)
	}
	if out.Duration > 5*time.Second {
		t.Errorf("took %v for two 50ms attempts", out.Duration)
	}
}

func TestSendStopsWhenContextEnds(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusInternalServerError})
	cfg := fast(rc.URL)
	cfg.BaseBackoff, cfg.MaxBackoff = time.Minute, time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	out := apihook.Send(ctx, rc.Client(), cfg, payload())
	if out.Succeeded || out.Attempts != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	if !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Errorf("Err = %v, want it to wrap context.DeadlineExceeded", out.Err)
	}
	if want := "500 Internal Server Error; stopped retrying: context deadline exceeded"; !strings.Contains(out.String(), want) {
		t.Errorf("String = %q, want it to contain %q", out.String(), want)
	}
	if out.Duration > 10*time.Second {
		t.Errorf("took %v; the backoff ignored the context", out.Duration)
	}
}

func TestSendNetworkErrorIsRetried(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusOK})
	url := rc.URL
	rc.Close() // nothing listens there any more
	cfg := fast(url)
	cfg.URL += "?token=abc123"
	cfg.Retries = 2
	out := apihook.Send(t.Context(), loopbackClient(t), cfg, payload())
	if out.Succeeded || out.Attempts != 3 || out.Status != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	s := out.String()
	if !strings.HasPrefix(s, "failed after 3 attempts: POST "+url+"/hook?...: ") || !strings.Contains(s, "connection refused") {
		t.Errorf("String = %q", s)
	}
	if strings.Contains(s, "abc123") {
		t.Errorf("the query's token leaked into %q", s)
	}
}

func TestSendRedactsCredentials(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusUnauthorized})
	cfg := fast(strings.Replace(rc.URL, "http://", "http://bot:hunter2@", 1))
	cfg.URL += "?key=abc123"
	out := apihook.Send(t.Context(), rc.Client(), cfg, payload())
	if out.Attempts != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	r, _ := rc.got(0)
	if u, p, ok := r.BasicAuth(); !ok || u != "bot" || p != "hunter2" {
		t.Errorf("basic auth not sent: %q %q %v", u, p, ok)
	}
	s := out.String()
	if strings.Contains(s, "hunter2") || strings.Contains(s, "abc123") {
		t.Errorf("credentials leaked into %q", s)
	}
	if !strings.Contains(s, "POST http://bot:xxxxx@127.0.0.1") {
		t.Errorf("String = %q, want the redacted URL", s)
	}
}

func TestSendReadsAtMost4KiB(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusBadRequest, body: strings.Repeat("x", 1<<20)})
	out := apihook.Send(t.Context(), rc.Client(), fast(rc.URL), payload())
	if out.Status != 400 {
		t.Fatalf("outcome = %+v", out)
	}
	if n := len(out.Err.Error()); n > 500 {
		t.Errorf("error message is %d bytes; the response body was not bounded", n)
	}
}

func TestSendBadPayloadIsNotSent(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusOK})
	out := apihook.Send(t.Context(), rc.Client(), fast(rc.URL), apihook.Payload{Key: "k", Rule: "r"})
	if out.Succeeded || out.Attempts != 0 || rc.count() != 0 {
		t.Fatalf("outcome = %+v, receiver saw %d", out, rc.count())
	}
	if want := "not sent: the payload has no events"; out.String() != want {
		t.Errorf("String = %q, want %q", out.String(), want)
	}
}
