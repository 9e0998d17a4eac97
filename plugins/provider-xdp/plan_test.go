package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/dataplane"
	"github.com/unyo-ops/unyo/plugins/sdk"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
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

// TestHealthTransitions: a new backend joins on its first success; one in
// rotation leaves after fall failures; one out comes back after rise
// successes.
func TestHealthTransitions(t *testing.T) {
	h := lb.Health{Fall: 2, Rise: 3}
	fail := errors.New("connect: refused")
	for _, tc := range []struct {
		name    string
		results []error
		healthy []bool // after each result
		changed []bool
	}{
		{"first success", []error{nil}, []bool{true}, []bool{true}},
		{"first failure", []error{fail, nil, nil, nil}, []bool{false, false, false, true}, []bool{true, false, false, true}},
		{"fall", []error{nil, fail, fail, nil}, []bool{true, true, false, false}, []bool{true, false, true, false}},
		{"a blip is not a fall", []error{nil, fail, nil, fail, nil}, []bool{true, true, true, true, true}, []bool{true, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s probeState
			for i, err := range tc.results {
				ch := s.note(err, h, time.Now())
				if s.Healthy != tc.healthy[i] || ch != tc.changed[i] {
					t.Fatalf("after result %d (%v): healthy=%v changed=%v, want %v %v", i, err, s.Healthy, ch, tc.healthy[i], tc.changed[i])
				}
			}
		})
	}
}

func TestProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	h := lb.Health{Kind: "tcp", Port: port, Timeout: sdk.Duration(time.Second)}
	lo := netip.MustParseAddr("127.0.0.1")
	if err := probe(context.Background(), "", h, lo); err != nil {
		t.Errorf("TCP check of a listener: %v", err)
	}
	l.Close()
	if err := probe(context.Background(), "", h, lo); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("TCP check of a closed port: %v, want connection refused", err)
	}
}
