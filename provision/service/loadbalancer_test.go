package service

import (
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func replica(name, cluster, node, phase, addr string) *unyov1.Compute {
	return &unyov1.Compute{Name: name, Cluster: cluster, Address: addr, Status: &unyov1.ComputeStatus{Phase: phase, Node: node}}
}

func TestLoadbalancerBackends(t *testing.T) {
	drained := replica("w-5", "c1", "n1", PhaseActive, "10.0.0.5")
	drained.Status.ReplacementPhase = "Creating:Scheduled"
	statusAddr := replica("w-6", "c1", "n1", PhaseActive, "")
	statusAddr.Status.Address = "10.0.0.6"
	records := []*unyov1.Compute{
		replica("w-1", "c1", "n1", PhaseActive, "10.0.0.1"),
		replica("w-0", "c1", "n2", PhaseActive, "10.0.0.0"),
		replica("w-2", "c1", "n1", PhaseDeleting, "10.0.0.2"),
		replica("w-3", "c1", "n1", PhaseFailed, "10.0.0.3"),
		replica("w-4", "c1", "n1", PhaseUpdating, "10.0.0.4"),
		drained, statusAddr,
		replica("w-7", "c1", "n1", PhaseActive, ""),
		replica("w-8", "c1", "", PhaseScheduled, "10.0.0.8"),
	}
	var got []string
	for _, b := range LoadbalancerBackends(records) {
		got = append(got, b.GetCompute()+"="+b.GetAddress())
	}
	if g, want := strings.Join(got, " "), "w-0=10.0.0.0 w-1=10.0.0.1 w-6=10.0.0.6"; g != want {
		t.Fatalf("backends = %s, want %s", g, want)
	}
}

func TestLoadbalancerCluster(t *testing.T) {
	for _, tt := range []struct {
		name    string
		records []*unyov1.Compute
		want    string
	}{
		{"none placed", []*unyov1.Compute{replica("w-0", "c1", "", PhaseCreating, "")}, ""},
		{"most replicas", []*unyov1.Compute{replica("w-0", "c1", "n", PhaseActive, ""), replica("w-1", "c2", "n", PhaseActive, ""), replica("w-2", "c2", "n", PhaseScheduled, "")}, "c2"},
		{"tie by name", []*unyov1.Compute{replica("w-0", "c2", "n", PhaseActive, ""), replica("w-1", "c1", "n", PhaseActive, "")}, "c1"},
		{"deleting ones do not count", []*unyov1.Compute{replica("w-0", "c1", "n", PhaseActive, ""), replica("w-1", "c2", "n", PhaseDeleting, ""), replica("w-2", "c2", "n", PhaseDeleting, "")}, "c1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := LoadbalancerCluster(tt.records); got != tt.want {
				t.Fatalf("cluster = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateLoadbalancer(t *testing.T) {
	base := func() *unyov1.RegionService {
		return &unyov1.RegionService{Name: "web", Spec: &unyov1.RegionServiceSpec{Region: "r",
			Compute:      &unyov1.ComputeSpec{Flavor: "f", Image: "i", Provider: "exec", Network: "net"},
			Loadbalancer: &unyov1.LoadbalancerSpec{Provider: "xdp", Ports: []*unyov1.LoadbalancerPort{{Port: 80, Protocol: "tcp"}}}}}
	}
	if err := Validate(base()); err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
	for _, tt := range []struct {
		name  string
		edit  func(s *unyov1.RegionService)
		field string
	}{
		{"provider", func(s *unyov1.RegionService) { s.Spec.Loadbalancer.Provider = "haproxy" }, "spec.loadbalancer.provider"},
		{"no ports", func(s *unyov1.RegionService) { s.Spec.Loadbalancer.Ports = nil }, "spec.loadbalancer.ports"},
		{"port", func(s *unyov1.RegionService) { s.Spec.Loadbalancer.Ports[0].Port = 70000 }, "spec.loadbalancer.ports[0].port"},
		{"protocol", func(s *unyov1.RegionService) { s.Spec.Loadbalancer.Ports[0].Protocol = "sctp" }, "spec.loadbalancer.ports[0].protocol"},
		{"repeated", func(s *unyov1.RegionService) {
			s.Spec.Loadbalancer.Ports = append(s.Spec.Loadbalancer.Ports, &unyov1.LoadbalancerPort{Port: 80, Protocol: "tcp"})
		}, "spec.loadbalancer.ports[1]"},
		{"health kind", func(s *unyov1.RegionService) { s.Spec.Loadbalancer.Health = &unyov1.LoadbalancerHealth{Kind: "icmp"} }, "spec.loadbalancer.health.kind"},
		{"health interval", func(s *unyov1.RegionService) {
			s.Spec.Loadbalancer.Health = &unyov1.LoadbalancerHealth{Interval: "2 s"}
		}, "spec.loadbalancer.health.interval"},
		{"no network", func(s *unyov1.RegionService) { s.Spec.Compute.Network = "" }, "spec.loadbalancer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(s)
			err := Validate(s)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate = %v, want it to name %s", err, tt.field)
			}
		})
	}
}
