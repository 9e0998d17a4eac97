package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

func rec(id string, at int, vip string, port int, backends ...string) record {
	var bs []any
	health := map[string]backendHealth{}
	for _, b := range backends {
		bs = append(bs, map[string]any{"address": b})
		health[b] = backendHealth{Healthy: !strings.HasSuffix(b, ".9"), Checked: true}
	}
	return record{ID: id, CreatedAt: time.Unix(int64(at), 0), Health: health, Config: map[string]any{
		"vip": vip, "ports": []any{map[string]any{"port": float64(port), "protocol": "tcp"}}, "backends": bs}}
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recs     []record
		services int
		want     map[string]string // id -> state: reason fragment
	}{
		{"one", []record{rec("a", 1, "10.0.0.1", 80, "10.1.0.1", "10.1.0.9")}, 1,
			map[string]string{"a": "RUNNING: 1 of 2 backends healthy"}},
		{"no healthy backend", []record{rec("a", 1, "10.0.0.1", 80, "10.1.0.9")}, 1,
			map[string]string{"a": "RUNNING: 0 of 1 backends healthy: packets to the VIP are dropped"}},
		{"same VIP port: the older serves", []record{rec("b", 2, "10.0.0.1", 80, "10.1.0.2"), rec("a", 1, "10.0.0.1", 80, "10.1.0.1")}, 1,
			map[string]string{"a": "RUNNING", "b": "PENDING: 10.0.0.1:80/tcp is served by load balancer a"}},
		{"same backend port behind two VIPs", []record{rec("a", 1, "10.0.0.1", 80, "10.1.0.1"), rec("b", 2, "10.0.0.2", 80, "10.1.0.1")}, 1,
			map[string]string{"a": "RUNNING", "b": "PENDING: backend 10.1.0.1:80/tcp is behind load balancer a"}},
		{"other ports coexist", []record{rec("a", 1, "10.0.0.1", 80, "10.1.0.1"), rec("b", 2, "10.0.0.1", 443, "10.1.0.2")}, 2,
			map[string]string{"a": "RUNNING", "b": "RUNNING"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := tc.recs
			// plan takes the records oldest first, as store.load gives them.
			if recs[0].CreatedAt.After(recs[len(recs)-1].CreatedAt) {
				recs = []record{recs[1], recs[0]}
			}
			services, st := plan(recs)
			if len(services) != tc.services {
				t.Errorf("%d services, want %d", len(services), tc.services)
			}
			for id, want := range tc.want {
				state, reason, _ := strings.Cut(want, ": ")
				got := st[id]
				if !strings.HasSuffix(got.State.String(), state) || !strings.Contains(got.Reason, reason) {
					t.Errorf("%s: %v %q, want %s %q", id, got.State, got.Reason, state, reason)
				}
			}
		})
	}
}

func TestPlanFull(t *testing.T) {
	var recs []record
	for i := range dataplane.MaxServices + 1 {
		recs = append(recs, rec(fmt.Sprint("lb", i), i, fmt.Sprintf("10.0.%d.%d", i/200, 1+i%200), 80, fmt.Sprintf("10.2.%d.%d", i/200, 1+i%200)))
	}
	services, st := plan(recs)
	if len(services) != dataplane.MaxServices {
		t.Errorf("%d services, want %d", len(services), dataplane.MaxServices)
	}
	last := st[fmt.Sprint("lb", dataplane.MaxServices)]
	if !last.full || last.State != sdk.Broken {
		t.Errorf("the one over the limit: %+v", last)
	}
}
