package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

// VPP's lb plugin has no health checks of its own: the plugin checks each
// backend from the node and takes it out of rotation (lb_add_del_as
// is_del, no flush) after Fall failures in a row, back in after Rise
// successes. A backend starts healthy, as HAProxy's servers do, so a new
// load balancer takes traffic at once.

// backendHealth is one backend's check state.
type backendHealth struct {
	Healthy bool
	Reason  string
	Since   time.Time
	okRun   int
	failRun int
}

// observe folds one check result into h and says whether Healthy changed.
func (h *backendHealth) observe(err error, at time.Time, hc lb.Health) bool {
	if err == nil {
		h.failRun, h.okRun = 0, h.okRun+1
		if !h.Healthy && h.okRun >= hc.Rise {
			h.Healthy, h.Reason, h.Since = true, "", at
			return true
		}
		return false
	}
	h.okRun, h.failRun = 0, h.failRun+1
	if h.Healthy && h.failRun >= hc.Fall {
		h.Healthy, h.Since = false, at
		h.Reason = err.Error()
		return true
	}
	if !h.Healthy {
		h.Reason = err.Error()
	}
	return false
}

// healthTable is every resource's backends' state, by resource id and
// address.
type healthTable struct {
	mu sync.Mutex
	m  map[string]map[netip.Addr]*backendHealth
}

// get returns a copy of one backend's state; a backend never checked is
// healthy since at.
func (t *healthTable) get(id string, a netip.Addr, at time.Time) backendHealth {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[id][a]; h != nil {
		return *h
	}
	return backendHealth{Healthy: true, Since: at}
}

// observe records a check result and says whether the backend's health
// changed.
func (t *healthTable) observe(id string, a netip.Addr, err error, at, created time.Time, hc lb.Health) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]map[netip.Addr]*backendHealth{}
	}
	if t.m[id] == nil {
		t.m[id] = map[netip.Addr]*backendHealth{}
	}
	h := t.m[id][a]
	if h == nil {
		h = &backendHealth{Healthy: true, Since: created}
		t.m[id][a] = h
	}
	return h.observe(err, at, hc)
}

// retain drops the state of backends no longer configured (keep nil
// drops the resource).
func (t *healthTable) retain(id string, keep map[netip.Addr]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for a := range t.m[id] {
		if !keep[a] {
			delete(t.m[id], a)
		}
	}
	if keep == nil {
		delete(t.m, id)
	}
}

// probe checks one backend once.
func probe(ctx context.Context, a netip.Addr, hc lb.Health) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(hc.Timeout))
	defer cancel()
	hostport := net.JoinHostPort(a.String(), strconv.Itoa(hc.Port))
	switch hc.Kind {
	case "http":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+hc.Path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("GET http://%s%s answered %s", hostport, hc.Path, resp.Status)
		}
		return nil
	default:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", hostport)
		if err != nil {
			return err
		}
		return c.Close()
	}
}
