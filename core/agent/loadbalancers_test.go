package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/testutil"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
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

// Get reads one of the fake provider's resources, counted.
func (p *fakeProvider) Get(_ context.Context, req *pluginv1.GetRequest) (*pluginv1.GetResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	if p.live[req.GetId()] == 0 {
		return nil, grpcstatus.Error(codes.NotFound, "gone")
	}
	return &pluginv1.GetResponse{Resource: p.resource(req.GetId())}, nil
}

// TestLoadbalancerReadByThePollerOnly: a load balancer held at its
// generation is read by the poller (every lbPollInterval), not again by
// every reconcile pass (one per long poll's answer); the passes report
// what the poller read. One that vanishes under the agent is made again.
func TestLoadbalancerReadByThePollerOnly(t *testing.T) {
	api := newFakeAssignments()
	p := newFakeProvider(0)
	api.mu.Lock()
	api.gen++
	gen := api.gen
	api.as["web-lb"] = &unyov1.Assignment{Compute: "web-lb", Service: "web", Node: "n1", Provider: "fake", Desired: "running", Generation: gen,
		Loadbalancer: &unyov1.LoadbalancerAssignment{Vip: "10.1.0.5", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}},
			Backends: []*unyov1.LoadbalancerBackend{{Compute: "web-0", Address: "10.1.0.10"}}}}
	api.mu.Unlock()
	startRunner(t, api, p, filepath.Join(t.TempDir(), "held.json"))
	reported := func() *unyov1.AssignmentState {
		api.mu.Lock()
		defer api.mu.Unlock()
		return api.last["web-lb"]
	}
	testutil.Eventually(t, 5*time.Second, "web-lb created and reported running", func() error {
		if st := reported(); st.GetState() != stateRunning {
			return fmt.Errorf("reported %v", st)
		}
		return nil
	})
	passes := func() int {
		api.mu.Lock()
		defer api.mu.Unlock()
		return api.getCalls
	}
	gets := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.gets
	}
	// Ten passes (the fake's long poll answers every 100 ms) take under
	// lbPollInterval: at most the poller's one read among them.
	g0, n0 := gets(), passes()
	testutil.Eventually(t, 10*time.Second, "ten reconcile passes", func() error {
		if n := passes() - n0; n < 10 {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
	if n := gets() - g0; n > 1 {
		t.Errorf("the provider was asked for web-lb %d times in ten passes; the poller reads it every %v", n, lbPollInterval)
	}
	if st := reported(); st.GetState() != stateRunning || st.GetGeneration() != gen {
		t.Errorf("reported %v, want running at generation %d", st, gen)
	}
	// Gone under the agent: the poller finds it missing, and the next
	// pass makes it again.
	p.vanish("web-lb")
	testutil.Eventually(t, 3*lbPollInterval, "web-lb made again", func() error {
		if c := p.counts(); c.started["web-lb"] != 2 || c.live["web-lb"] != 1 {
			return fmt.Errorf("started %d, live %d", c.started["web-lb"], c.live["web-lb"])
		}
		return nil
	})
}
