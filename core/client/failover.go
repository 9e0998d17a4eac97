package client

import (
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"sync/atomic"
)

// SplitURLs reads a server address: one URL, or the URLs of several
// replicas of one server separated by commas. Each must be http:// or
// https://; trailing slashes are dropped.
func SplitURLs(s string) ([]string, error) {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u == "" {
			continue
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("server address %q must start with http:// or https://", u)
		}
		if _, err := neturl.Parse(u); err != nil {
			return nil, fmt.Errorf("server address %q: %w", u, err)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("server address %q names no URL", s)
	}
	return urls, nil
}

// failover sends each request to the first of several replicas that
// answers, starting with the one that answered last, so that a cluster of
// replicas on one database needs no load balancer in front. A request
// moves on only when it could not be delivered (the connection failed) or
// a proxy said its backend is gone (502, 504, or a 503 that is not a unyo
// answer), and only when its body can be sent again (unary calls).
type failover struct {
	base    http.RoundTripper
	targets []*neturl.URL
	// prefix is the first target's path, which the connect clients put in
	// front of every procedure.
	prefix string
	cur    atomic.Int32
}

func newFailover(base http.RoundTripper, urls []string) (*failover, error) {
	f := &failover{base: base}
	for _, u := range urls {
		p, err := neturl.Parse(u)
		if err != nil {
			return nil, err
		}
		f.targets = append(f.targets, p)
	}
	f.prefix = f.targets[0].Path
	return f, nil
}

func (f *failover) RoundTrip(r *http.Request) (*http.Response, error) {
	start := int(f.cur.Load())
	var last error
	for i := range f.targets {
		n := (start + i) % len(f.targets)
		req := r.Clone(r.Context())
		if i > 0 {
			if r.GetBody == nil {
				break // a stream: its body cannot be sent twice
			}
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		t := f.targets[n]
		u := *r.URL
		u.Scheme, u.Host, u.Path = t.Scheme, t.Host, t.Path+strings.TrimPrefix(r.URL.Path, f.prefix)
		req.URL, req.Host = &u, ""
		resp, err := f.base.RoundTrip(req)
		switch {
		case err == nil && !backendGone(resp):
			f.cur.Store(int32(n))
			return resp, nil
		case err == nil:
			last = fmt.Errorf("%s answered %s", t.Redacted(), resp.Status)
			if i == len(f.targets)-1 {
				return resp, nil // the last one's own answer says the most
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		case r.Context().Err() != nil:
			return nil, err
		default:
			last = err
		}
	}
	return nil, last
}

// backendGone reports whether resp is a proxy's word that the server
// behind it is unreachable, rather than a unyo server's own answer.
func backendGone(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	case http.StatusServiceUnavailable:
		ct := resp.Header.Get("Content-Type")
		return !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/proto") && !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect")
	}
	return false
}
