package main

import (
	"net/netip"
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
type backendHealth = lb.BackendState

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
	return backendHealth{Healthy: true, Checked: true, Since: at}
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
		h = &backendHealth{Healthy: true, Checked: true, Since: created}
		t.m[id][a] = h
	}
	return h.Observe(err, hc, at)
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
