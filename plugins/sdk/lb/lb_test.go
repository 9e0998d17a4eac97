package lb

import (
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	good := func() map[string]any {
		return map[string]any{
			"vip":      "10.200.0.100",
			"ports":    []any{map[string]any{"port": 80, "target_port": 8080, "protocol": "tcp"}},
			"backends": []any{map[string]any{"name": "web-0", "address": "10.200.0.3"}},
			"health":   map[string]any{"kind": "http", "interval": "1s"},
		}
	}
	tests := []struct {
		name  string
		edit  func(m map[string]any)
		field string // "" for a valid config
	}{
		{"valid", func(map[string]any) {}, ""},
		{"no backends is valid", func(m map[string]any) { delete(m, "backends") }, ""},
		{"vip not an address", func(m map[string]any) { m["vip"] = "10.0.0" }, "vip"},
		{"vip IPv6", func(m map[string]any) { m["vip"] = "::1" }, "vip"},
		{"no ports", func(m map[string]any) { m["ports"] = []any{} }, "ports"},
		{"port 0", func(m map[string]any) { m["ports"] = []any{map[string]any{"port": 0, "protocol": "tcp"}} }, "ports[0].port"},
		{"bad protocol", func(m map[string]any) { m["ports"] = []any{map[string]any{"port": 53, "protocol": "sctp"}} }, "ports[0].protocol"},
		{"repeated port", func(m map[string]any) {
			m["ports"] = []any{map[string]any{"port": 53, "protocol": "udp"}, map[string]any{"port": 53, "protocol": "udp"}}
		}, "ports[1]"},
		{"backend address", func(m map[string]any) { m["backends"] = []any{map[string]any{"address": "web-0"}} }, "backends[0].address"},
		{"repeated backend", func(m map[string]any) {
			m["backends"] = []any{map[string]any{"address": "10.0.0.1"}, map[string]any{"address": "10.0.0.1"}}
		}, "backends[1].address"},
		{"health kind", func(m map[string]any) { m["health"] = map[string]any{"kind": "icmp"} }, "health.kind"},
		{"unknown field", func(m map[string]any) { m["vips"] = "x" }, "vips"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			tt.edit(m)
			c, err := Decode(m)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if c.VIP != m["vip"] {
					t.Errorf("vip %q", c.VIP)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Decode = %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestHealthDefaults(t *testing.T) {
	h := Health{Kind: "http"}.WithDefaults(Port{Port: 80, TargetPort: 8080, Protocol: "tcp"})
	if h.Path != "/" || h.Port != 8080 || time.Duration(h.Interval) != DefaultInterval ||
		time.Duration(h.Timeout) != DefaultTimeout || h.Fall != DefaultFall || h.Rise != DefaultRise {
		t.Errorf("defaults: %+v", h)
	}
	if h := (Health{}).WithDefaults(Port{Port: 53, Protocol: "udp"}); h.Kind != "tcp" || h.Port != 53 {
		t.Errorf("empty health: %+v", h)
	}
}
