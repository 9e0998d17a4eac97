package agent

import (
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// TestPluginReport: a heartbeat carries the plugins only when they changed
// since the last answered one, and all of them again every
// fullPluginsEvery heartbeats or after a registration.
func TestPluginReport(t *testing.T) {
	up := []*unyov1.PluginStatus{{Name: "http", State: "running"}}
	down := []*unyov1.PluginStatus{{Name: "http", State: "failed"}}
	var r pluginReport
	send := func(now []*unyov1.PluginStatus, answered bool) *unyov1.HeartbeatRequest {
		req := &unyov1.HeartbeatRequest{}
		r.request(req, now)
		if answered {
			r.answered(req)
		}
		return req
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
		req := send(s.now, s.answered)
		if req.GetPluginsUnchanged() != s.unchanged || (!s.unchanged && len(req.GetPlugins()) != len(s.now)) {
			t.Errorf("%s: unchanged %v with %d plugins, want unchanged %v", s.name, req.GetPluginsUnchanged(), len(req.GetPlugins()), s.unchanged)
		}
	}
	for i := 1; i < fullPluginsEvery; i++ {
		if req := send(nil, true); !req.GetPluginsUnchanged() {
			t.Fatalf("heartbeat %d after a full one carried the plugins", i+1)
		}
	}
	if req := send(nil, true); req.GetPluginsUnchanged() {
		t.Errorf("heartbeat %d after a full one did not carry the plugins", fullPluginsEvery+1)
	}
	r = pluginReport{} // registered anew
	if req := send(up, true); req.GetPluginsUnchanged() {
		t.Error("the first heartbeat after registering did not carry the plugins")
	}
}
