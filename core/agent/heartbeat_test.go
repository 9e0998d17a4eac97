package agent

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// TestSentReport: a heartbeat carries a list (the plugins, the providers)
// only when it changed since the last answered one, and all of it again
// every fullReportEvery heartbeats or after a registration.
func TestSentReport(t *testing.T) {
	up := []*unyov1.PluginStatus{{Name: "http", State: "running"}}
	down := []*unyov1.PluginStatus{{Name: "http", State: "failed"}}
	var r sentReport[*unyov1.PluginStatus]
	send := func(now []*unyov1.PluginStatus, answered bool) bool {
		unchanged := r.same(now)
		if answered {
			r.answered(now, unchanged)
		}
		return unchanged
	}
	steps := []struct {
		name      string
		now       []*unyov1.PluginStatus
		answered  bool
		unchanged bool
	}{
		{"first heartbeat", up, false, false},
		{"first not answered: sent again", up, true, false},
		{"same", up, true, true},
		{"changed", down, true, false},
		{"same again", down, true, true},
		{"none now", nil, true, false},
		{"still none", nil, true, true},
	}
	for _, s := range steps {
		if got := send(s.now, s.answered); got != s.unchanged {
			t.Errorf("%s: unchanged %v, want %v", s.name, got, s.unchanged)
		}
	}
	for i := 1; i < fullReportEvery; i++ {
		if !send(nil, true) {
			t.Fatalf("heartbeat %d after a full one carried the list", i+1)
		}
	}
	if send(nil, true) {
		t.Errorf("heartbeat %d after a full one did not carry the list", fullReportEvery+1)
	}
	r = sentReport[*unyov1.PluginStatus]{} // registered anew
	if send(up, true) {
		t.Error("the first heartbeat after registering did not carry the list")
	}
}

// TestProviderHealth: a provider is unhealthy until its first
// fingerprint; since moves only when its health flips; a change wakes the
// heartbeat and an unchanged fingerprint does not; the first registration
// waits for every provider's first fingerprint.
func TestProviderHealth(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h providerHealth
	h.init([]string{"exec", "docker"}, t0)
	if l := h.list(); len(l) != 2 || l[0].GetName() != "docker" || l[0].GetHealthy() || l[0].GetReason() == "" {
		t.Fatalf("before fingerprints: %v, want both unhealthy with a reason, by name", l)
	}
	select {
	case <-h.first:
		t.Fatal("first closed before any fingerprint")
	default:
	}
	fp := &pluginv1.FingerprintResponse{Healthy: true, Reason: "ignored when healthy", Capacity: &pluginv1.Capacity{Cpus: 2, MemoryBytes: 1 << 30}}
	steps := []struct {
		name    string
		set     *unyov1.ProviderStatus
		at      time.Time
		changed bool
		since   time.Time
	}{
		{"docker healthy", providerStatus("docker", fp), t0.Add(time.Second), true, t0.Add(time.Second)},
		{"same again", providerStatus("docker", fp), t0.Add(2 * time.Second), false, t0.Add(time.Second)},
		{"down", &unyov1.ProviderStatus{Name: "docker", Reason: "dockerd does not answer"}, t0.Add(3 * time.Second), true, t0.Add(3 * time.Second)},
		{"still down, other words", &unyov1.ProviderStatus{Name: "docker", Reason: "dockerd is gone"}, t0.Add(4 * time.Second), true, t0.Add(3 * time.Second)},
		{"exec without fingerprints", &unyov1.ProviderStatus{Name: "exec", Healthy: true}, t0.Add(5 * time.Second), true, t0.Add(5 * time.Second)},
	}
	for _, s := range steps {
		h.set(s.set, s.at)
		changed := false
		select {
		case <-h.changed:
			changed = true
		default:
		}
		if changed != s.changed {
			t.Errorf("%s: changed %v, want %v", s.name, changed, s.changed)
		}
		for _, st := range h.list() {
			if st.GetName() == s.set.GetName() && !st.GetSince().AsTime().Equal(s.since) {
				t.Errorf("%s: since %v, want %v", s.name, st.GetSince().AsTime(), s.since)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	h.waitFirst(ctx, time.Minute)
	if time.Since(start) > time.Second {
		t.Error("waitFirst waited although every provider was heard from")
	}
	if st := providerStatus("docker", fp); st.GetReason() != "" || st.GetCapacity().GetCpus() != 2 {
		t.Errorf("providerStatus = %v", st)
	}
	if st := providerStatus("x", &pluginv1.FingerprintResponse{Healthy: true, Capacity: &pluginv1.Capacity{}}); st.GetCapacity() != nil {
		t.Errorf("a zero capacity is kept: %v", st)
	}
}

// TestOverrideCapacity: agent.capacity replaces the machine's detected
// fields it sets, and drops a provider's (the machine's then says them).
func TestOverrideCapacity(t *testing.T) {
	detected := &unyov1.Capacity{Cpus: 2, MemoryBytes: 4 << 30, DiskBytes: 10 << 30}
	tests := []struct {
		name     string
		override *unyov1.Capacity
		drop     bool
		want     *unyov1.Capacity
	}{
		{"none", nil, false, detected},
		{"cpus", &unyov1.Capacity{Cpus: 64}, false, &unyov1.Capacity{Cpus: 64, MemoryBytes: 4 << 30, DiskBytes: 10 << 30}},
		{"provider: cpus dropped", &unyov1.Capacity{Cpus: 64}, true, &unyov1.Capacity{MemoryBytes: 4 << 30, DiskBytes: 10 << 30}},
		{"provider: all dropped", &unyov1.Capacity{Cpus: 64, MemoryBytes: 1, DiskBytes: 1}, true, nil},
	}
	for _, tt := range tests {
		if got := overrideCapacity(detected, tt.override, tt.drop); !proto.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
