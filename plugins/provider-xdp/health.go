package main

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// backendHealth is one backend's health as stored with its resource.
type backendHealth = lb.BackendState

// monitor health-checks the backends of one resource from the plugin's
// network namespace and calls changed when a backend goes in or out of
// rotation.
type monitor struct {
	netns   string
	changed func()

	mu     sync.Mutex
	cfg    lb.Config
	health lb.Health
	state  map[netip.Addr]*backendHealth
	cancel context.CancelFunc
	kick   chan struct{}
}

func newMonitor(netns string, cfg lb.Config, saved map[string]backendHealth, changed func()) *monitor {
	m := &monitor{netns: netns, changed: changed, state: map[netip.Addr]*backendHealth{}, kick: make(chan struct{}, 1)}
	m.setConfig(cfg, saved)
	return m
}

// setConfig takes a new config; backends kept keep their state.
func (m *monitor) setConfig(cfg lb.Config, saved map[string]backendHealth) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	m.health = cfg.Health.WithDefaults(cfg.Ports[0])
	next := map[netip.Addr]*backendHealth{}
	for _, b := range cfg.Backends {
		a := netip.MustParseAddr(b.Address)
		switch {
		case m.state[a] != nil:
			next[a] = m.state[a]
		case saved != nil && saved[a.String()].Checked:
			st := saved[a.String()]
			next[a] = &st
		default:
			next[a] = &backendHealth{}
		}
		if m.health.Kind == "none" && !next[a].Healthy {
			*next[a] = backendHealth{Healthy: true, Checked: true, Since: time.Now()}
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
		out[a.String()] = *s
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
			errs[i] = lb.Probe(ctx, nsutil.Dialer(m.netns, &net.Dialer{}), h, a)
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
		if s.Observe(errs[i], h, now) {
			changed = true
		}
	}
	return changed
}
