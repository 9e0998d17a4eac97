package agent

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/plugins/sdk"
	"github.com/unyo-ops/unyo/plugins/sdk/lb"
)

func TestLBConfig(t *testing.T) {
	full := &unyov1.LoadbalancerAssignment{Vip: "10.1.0.5",
		Ports:    []*unyov1.LoadbalancerPort{{Port: 80, TargetPort: 8080, Protocol: "tcp"}, {Port: 53, Protocol: "udp"}},
		Backends: []*unyov1.LoadbalancerBackend{{Compute: "web-0", Address: "10.1.0.10"}, {Compute: "web-1", Address: "10.1.0.11", Weight: 3}},
		Health:   &unyov1.LoadbalancerHealth{Kind: "http", Path: "/healthz", Port: 8081, Interval: "500ms", Timeout: "250ms", Fall: 3, Rise: 1}}
	for _, tt := range []struct {
		name string
		in   *unyov1.LoadbalancerAssignment
		want lb.Config
		err  string
	}{
		{"every field", full, lb.Config{VIP: "10.1.0.5",
			Ports:    []lb.Port{{Port: 80, TargetPort: 8080, Protocol: "tcp"}, {Port: 53, Protocol: "udp"}},
			Backends: []lb.Backend{{Name: "web-0", Address: "10.1.0.10"}, {Name: "web-1", Address: "10.1.0.11", Weight: 3}},
			Health: lb.Health{Kind: "http", Path: "/healthz", Port: 8081, Interval: sdk.Duration(500 * time.Millisecond),
				Timeout: sdk.Duration(250 * time.Millisecond), Fall: 3, Rise: 1}}, ""},
		{"no backends, no health", &unyov1.LoadbalancerAssignment{Vip: "10.1.0.5", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}}},
			lb.Config{VIP: "10.1.0.5", Ports: []lb.Port{{Port: 80, Protocol: "tcp"}}}, ""},
		{"bad interval", &unyov1.LoadbalancerAssignment{Vip: "10.1.0.5", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}},
			Health: &unyov1.LoadbalancerHealth{Interval: "soon"}}, lb.Config{}, "health.interval"},
		{"bad VIP", &unyov1.LoadbalancerAssignment{Vip: "", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}}}, lb.Config{}, "vip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lbConfig(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("lbConfig = %v, want an error naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := lbStruct(got)
			if err != nil {
				t.Fatal(err)
			}
			// What the provider decodes is what was assigned.
			back, err := lb.Decode(s.AsMap())
			if err != nil {
				t.Fatalf("the provider cannot decode it: %v", err)
			}
			if !reflect.DeepEqual(back, tt.want) || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("config = %+v\ndecoded %+v\nwant %+v", got, back, tt.want)
			}
		})
	}
}
