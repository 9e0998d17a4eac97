package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// backendHealth is one backend's health as stored with its resource.
type backendHealth struct {
	Healthy bool `json:"healthy"`
	// Checked is false until the first check: a new backend goes into
	// rotation on its first success (rise applies to one that failed).
	Checked bool      `json:"checked"`
	Reason  string    `json:"reason,omitempty"`
	Since   time.Time `json:"since,omitzero"`
}

// monitor health-checks the backends of one resource from the plugin's
// network namespace and calls changed when a backend goes in or out of
// rotation.
type monitor struct {
	netns   string
	changed func()

	mu     sync.Mutex
	cfg    lb.Config
	health lb.Health
	state  map[netip.Addr]*probeState
	cancel context.CancelFunc
	kick   chan struct{}
}

type probeState struct {
	backendHealth
	okRun, failRun int
}

func newMonitor(netns string, cfg lb.Config, saved map[string]backendHealth, changed func()) *monitor {
	m := &monitor{netns: netns, changed: changed, state: map[netip.Addr]*probeState{}, kick: make(chan struct{}, 1)}
	m.setConfig(cfg, saved)
	return m
}

// setConfig takes a new config; backends kept keep their state.
func (m *monitor) setConfig(cfg lb.Config, saved map[string]backendHealth) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	m.health = cfg.Health.WithDefaults(cfg.Ports[0])
	next := map[netip.Addr]*probeState{}
	for _, b := range cfg.Backends {
		a := netip.MustParseAddr(b.Address)
		switch {
		case m.state[a] != nil:
			next[a] = m.state[a]
		case saved != nil && saved[a.String()].Checked:
			next[a] = &probeState{backendHealth: saved[a.String()]}
		default:
			next[a] = &probeState{}
		}
		if m.health.Kind == "none" && !next[a].Healthy {
			next[a].backendHealth = backendHealth{Healthy: true, Checked: true, Since: time.Now()}
		}
	}
	m.state = next
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// snapshot is the health of every backend by address.
func (m *monitor) snapshot() map[string]backendHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]backendHealth, len(m.state))
	for a, s := range m.state {
		out[a.String()] = s.backendHealth
	}
	return out
}

// start runs the checks every interval until stop.
func (m *monitor) start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.cancel = cancel
	m.mu.Unlock()
	go func() {
		for {
			m.mu.Lock()
			every := time.Duration(m.health.Interval)
			m.mu.Unlock()
			t := time.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-m.kick:
				t.Stop()
			}
			if m.checkOnce(ctx) && ctx.Err() == nil {
				m.changed()
			}
		}
	}()
}

// stop ends the checks; it does not wait (changed may be waiting for the
// lock the caller holds).
func (m *monitor) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		m.cancel()
	}
}

// checkOnce checks every backend once, at the same time, and says whether
// one went in or out of rotation.
func (m *monitor) checkOnce(ctx context.Context) bool {
	m.mu.Lock()
	h := m.health
	addrs := make([]netip.Addr, 0, len(m.state))
	for a := range m.state {
		addrs = append(addrs, a)
	}
	m.mu.Unlock()
	if h.Kind == "none" {
		return false
	}
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probe(ctx, m.netns, h, a)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false
	}
	now := time.Now()
	changed := false
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, a := range addrs {
		s := m.state[a]
		if s == nil {
			continue // left meanwhile
		}
		if s.note(errs[i], h, now) {
			changed = true
		}
	}
	return changed
}

// note records one check result and says whether the backend went in or
// out of rotation.
func (s *probeState) note(err error, h lb.Health, now time.Time) bool {
	ok := err == nil
	reason := ""
	if !ok {
		reason = err.Error()
	}
	if !s.Checked {
		s.backendHealth = backendHealth{Healthy: ok, Checked: true, Reason: reason, Since: now}
		if ok {
			s.okRun = 1
		} else {
			s.failRun = 1
		}
		return true
	}
	if ok {
		s.okRun++
		s.failRun = 0
	} else {
		s.failRun++
		s.okRun = 0
	}
	switch {
	case s.Healthy && !ok && s.failRun >= h.Fall:
		s.backendHealth = backendHealth{Healthy: false, Checked: true, Reason: reason, Since: now}
		return true
	case !s.Healthy && ok && s.okRun >= h.Rise:
		s.backendHealth = backendHealth{Healthy: true, Checked: true, Since: now}
		return true
	case !s.Healthy && !ok:
		s.Reason = reason
	}
	return false
}

// probe checks one backend: a TCP connect, or an HTTP GET answered with a
// 2xx or 3xx status, within the timeout, from the namespace netns.
func probe(ctx context.Context, netns string, h lb.Health, a netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.Timeout))
	defer cancel()
	addr := net.JoinHostPort(a.String(), strconv.Itoa(h.Port))
	dial := nsutil.Dialer(netns, &net.Dialer{})
	switch h.Kind {
	case "http":
		c := &http.Client{
			Transport:     &http.Transport{DialContext: dial, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+h.Path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "unyo-provider-xdp health check")
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("GET http://%s%s: %w", addr, h.Path, unwrapURL(err))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("GET http://%s%s: %s", addr, h.Path, resp.Status)
		}
		return nil
	default:
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("connect %s: %w", addr, unwrapOp(err))
		}
		return c.Close()
	}
}

func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		return unwrapOp(ue.Unwrap())
	}
	return err
}

// unwrapOp drops net.OpError's repetition of the address.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
