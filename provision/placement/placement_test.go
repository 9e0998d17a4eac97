package placement

import (
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/schedule"
)

// TestNodeProviders: the scheduler sees a node's healthy providers (nil
// when its agent reported none) and, per resource, the least of the
// machine's capacity and every provider's that reports one.
func TestNodeProviders(t *testing.T) {
	machine := &unyov1.Capacity{Cpus: 8, MemoryBytes: 16 << 30, DiskBytes: 100 << 30}
	tests := []struct {
		name      string
		providers []*unyov1.ProviderStatus
		want      map[string]bool
		capacity  schedule.Resources
	}{
		{"none reported", nil, nil, schedule.Resources{VCPUs: 8, MemoryBytes: 16 << 30, DiskBytes: 100 << 30}},
		{"healthy docker, smaller", []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 8 << 30}}},
			map[string]bool{"docker": true}, schedule.Resources{VCPUs: 4, MemoryBytes: 8 << 30, DiskBytes: 100 << 30}},
		{"docker larger than the machine", []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 64, MemoryBytes: 1 << 40}}},
			map[string]bool{"docker": true}, schedule.Resources{VCPUs: 8, MemoryBytes: 16 << 30, DiskBytes: 100 << 30}},
		{"unhealthy docker, exec without capacity", []*unyov1.ProviderStatus{{Name: "docker", Reason: "dockerd down"}, {Name: "exec", Healthy: true}},
			map[string]bool{"exec": true}, schedule.Resources{VCPUs: 8, MemoryBytes: 16 << 30, DiskBytes: 100 << 30}},
		{"two providers: the least of both", []*unyov1.ProviderStatus{
			{Name: "docker", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 4, MemoryBytes: 12 << 30}},
			{Name: "libvirt", Healthy: true, Capacity: &unyov1.Capacity{Cpus: 6, MemoryBytes: 10 << 30}}},
			map[string]bool{"docker": true, "libvirt": true}, schedule.Resources{VCPUs: 4, MemoryBytes: 10 << 30, DiskBytes: 100 << 30}},
		{"all unhealthy: an empty map, not nil", []*unyov1.ProviderStatus{{Name: "docker"}}, map[string]bool{}, schedule.Resources{VCPUs: 8, MemoryBytes: 16 << 30, DiskBytes: 100 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node(&unyov1.Node{Name: "n1", Capacity: machine, Providers: tt.providers})
			if (n.Providers == nil) != (tt.want == nil) || len(n.Providers) != len(tt.want) {
				t.Fatalf("Providers = %v, want %v", n.Providers, tt.want)
			}
			for k := range tt.want {
				if !n.Providers[k] {
					t.Errorf("Providers = %v, want %v", n.Providers, tt.want)
				}
			}
			if n.Capacity != tt.capacity {
				t.Errorf("Capacity = %+v, want %+v", n.Capacity, tt.capacity)
			}
		})
	}
}

// TestProviderFilter: a compute's spec.provider becomes the request's, so
// a node without that provider healthy is rejected, transiently.
func TestProviderFilter(t *testing.T) {
	c := &unyov1.Compute{Name: "web-0", Service: "web", Spec: &unyov1.ComputeSpec{Provider: "docker"}, Resources: &unyov1.ComputeResources{Vcpus: 1}}
	req := Request(c, nil)
	if req.Provider != "docker" {
		t.Fatalf("Request.Provider = %q", req.Provider)
	}
	node := func(healthy bool) schedule.Node {
		return Node(&unyov1.Node{Name: "n1", State: unyov1.NodeState_NODE_STATE_READY, Capacity: &unyov1.Capacity{Cpus: 4},
			Providers: []*unyov1.ProviderStatus{{Name: "docker", Healthy: healthy}}})
	}
	if err := schedule.Check(node(true), req); err != nil {
		t.Errorf("healthy docker: %v", err)
	}
	err := schedule.Check(node(false), req)
	if err == nil {
		t.Fatal("unhealthy docker: placed")
	}
	res := schedule.NewSnapshot([]schedule.Node{node(false)}).Place(req, 1)
	if res.Unplaced != 1 || res.Reason == nil || res.Reason.Class == schedule.Unsatisfiable {
		t.Fatalf("unhealthy docker: %+v, want unplaced and Blocked (not Unsatisfiable)", res)
	}
	if got := res.Reason.String(); !strings.Contains(got, "without a healthy provider") {
		t.Errorf("reason %q does not say why", got)
	}
}

// TestProvidersKey moves with health and capacity only.
func TestProvidersKey(t *testing.T) {
	a := []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Reason: "", Capacity: &unyov1.Capacity{Cpus: 2}}}
	b := []*unyov1.ProviderStatus{{Name: "docker", Healthy: true, Attributes: map[string]string{"v": "1"}, Capacity: &unyov1.Capacity{Cpus: 2}}}
	c := []*unyov1.ProviderStatus{{Name: "docker", Healthy: false, Reason: "down", Capacity: &unyov1.Capacity{Cpus: 2}}}
	if ProvidersKey(a) != ProvidersKey(b) {
		t.Error("attributes moved the key")
	}
	if ProvidersKey(a) == ProvidersKey(c) {
		t.Error("health did not move the key")
	}
}
