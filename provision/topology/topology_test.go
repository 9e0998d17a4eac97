package topology_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/provision/topology"
)

func server(name, hostname, serial, rack string) *unyov1.PhysicalResource {
	return &unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Hostname: hostname, Serial: serial, Rack: rack}}
}

func inventory() *topology.Inventory {
	return topology.NewInventory(
		[]*unyov1.PhysicalResource{
			server("srv-1", "", "SN1", "r1"),
			server("srv-2", "web-02.example", "SN2", "r2"),
			server("srv-3", "twin", "SN3", "r1"),
			server("srv-4", "twin", "SN3", "r1"),
			server("srv-5", "", "SN5", "r-nofloor"),
			server("srv-6", "", "", ""),
			{Name: "srv-7", Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Model: "m2"}},
		},
		[]*unyov1.Rack{
			{Name: "r1", Spec: &unyov1.RackSpec{Floor: "f1", PowerZone: "p1", NetworkZone: "n1", Zone: "az1"}},
			{Name: "r2", Spec: &unyov1.RackSpec{Floor: "f1", PowerZone: "p2", NetworkZone: "n1", Zone: "az2"}},
			{Name: "r-nofloor", Spec: &unyov1.RackSpec{Floor: "gone", Zone: "az3"}},
		},
		[]*unyov1.Floor{{Name: "f1", Spec: &unyov1.FloorSpec{Datacenter: "dc1"}}},
		[]*unyov1.Datacenter{{Name: "dc1", Spec: &unyov1.DatacenterSpec{Region: "tokyo"}}},
	)
}

func TestDerive(t *testing.T) {
	r1 := map[string]string{
		topology.LabelRegion: "tokyo", topology.LabelDatacenter: "dc1", topology.LabelFloor: "f1",
		topology.LabelRack: "r1", topology.LabelPower: "p1", topology.LabelNetwork: "n1", topology.LabelZone: "az1",
	}
	r2 := map[string]string{
		topology.LabelRegion: "tokyo", topology.LabelDatacenter: "dc1", topology.LabelFloor: "f1",
		topology.LabelRack: "r2", topology.LabelPower: "p2", topology.LabelNetwork: "n1", topology.LabelZone: "az2",
	}
	tests := []struct {
		name     string
		id       topology.Identity
		resource string
		labels   map[string]string
		reason   string // a part of the reason
	}{
		{name: "configured resource", id: topology.Identity{Resource: "srv-1", Hostname: "web-02.example"}, resource: "srv-1", labels: r1},
		{name: "configured resource wins over a matching hostname and serial", id: topology.Identity{Resource: "srv-2", Hostname: "srv-1", Serial: "SN1"}, resource: "srv-2", labels: r2},
		{name: "configured resource unknown: no guess by hostname", id: topology.Identity{Resource: "nope", Hostname: "srv-1"}, reason: `agent.resource is "nope"`},
		{name: "hostname is the resource's name", id: topology.Identity{Hostname: "srv-1"}, resource: "srv-1", labels: r1},
		{name: "hostname matches case-insensitively", id: topology.Identity{Hostname: "SRV-1"}, resource: "srv-1", labels: r1},
		{name: "hostname is the resource's spec.hostname", id: topology.Identity{Hostname: "web-02.example"}, resource: "srv-2", labels: r2},
		{name: "serial when the hostname is unknown", id: topology.Identity{Hostname: "laptop", Serial: "SN2"}, resource: "srv-2", labels: r2},
		{name: "two resources with one hostname: no match", id: topology.Identity{Hostname: "twin"}, reason: `hostname "twin" is ambiguous: PhysicalResources srv-3, srv-4 all have it`},
		{name: "ambiguous hostname, ambiguous serial", id: topology.Identity{Hostname: "twin", Serial: "SN3"}, reason: `serial number "SN3" is ambiguous`},
		{name: "ambiguous hostname, unique serial", id: topology.Identity{Hostname: "twin", Serial: "SN1"}, resource: "srv-1", labels: r1},
		{name: "nothing matches", id: topology.Identity{Hostname: "laptop", Serial: "X"}, reason: `no PhysicalResource has hostname "laptop"; no PhysicalResource has serial number "X"`},
		{name: "nothing reported", id: topology.Identity{}, reason: "reported no resource name"},
		{name: "rack on an unknown floor: the rack's labels only", id: topology.Identity{Hostname: "srv-5"}, resource: "srv-5", labels: map[string]string{topology.LabelRack: "r-nofloor", topology.LabelZone: "az3"}},
		{name: "not racked: matched, no labels", id: topology.Identity{Hostname: "srv-6"}, resource: "srv-6", labels: map[string]string{}},
		{name: "the machine model is a label", id: topology.Identity{Hostname: "srv-7"}, resource: "srv-7", labels: map[string]string{topology.LabelModel: "m2"}},
	}
	inv := inventory()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inv.Derive(tt.id)
			if got.Resource != tt.resource {
				t.Errorf("resource = %q, want %q (reason %q)", got.Resource, tt.resource, got.Reason)
			}
			if tt.resource != "" && !maps.Equal(got.Labels, tt.labels) {
				t.Errorf("labels = %v, want %v", got.Labels, tt.labels)
			}
			if tt.resource == "" && (got.Labels != nil || !strings.Contains(got.Reason, tt.reason)) {
				t.Errorf("labels %v, reason %q; want no labels and a reason containing %q", got.Labels, got.Reason, tt.reason)
			}
			if tt.resource != "" && got.Reason != "" {
				t.Errorf("reason %q for a match", got.Reason)
			}
		})
	}
}

func TestNodeIdentityFallsBackToTheNodeName(t *testing.T) {
	id := topology.NodeIdentity(&unyov1.Node{Name: "srv-1", Serial: "S"})
	if id != (topology.Identity{Hostname: "srv-1", Serial: "S"}) {
		t.Fatalf("identity = %+v", id)
	}
}

func TestNodeLabels(t *testing.T) {
	tests := []struct {
		name string
		node *unyov1.Node
		want map[string]string
	}{
		{"agent labels only", &unyov1.Node{Labels: map[string]string{"env": "prod"}}, map[string]string{"env": "prod"}},
		{"topology beside agent labels", &unyov1.Node{Labels: map[string]string{"env": "prod"}, TopologyLabels: map[string]string{topology.LabelRack: "r1"}},
			map[string]string{"env": "prod", topology.LabelRack: "r1"}},
		{"topology wins on its keys, and an agent's topology key never counts", &unyov1.Node{
			Labels:         map[string]string{topology.LabelRack: "fake", topology.LabelZone: "fake"},
			TopologyLabels: map[string]string{topology.LabelRack: "r1"},
		}, map[string]string{topology.LabelRack: "r1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := topology.NodeLabels(tt.node); !maps.Equal(got, tt.want) {
				t.Fatalf("labels = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSame(t *testing.T) {
	n := &unyov1.Node{Resource: "srv-1", TopologyLabels: map[string]string{topology.LabelRack: "r1"}}
	if !topology.Same(n, topology.Result{Resource: "srv-1", Labels: map[string]string{topology.LabelRack: "r1"}}) {
		t.Error("same topology reported as different")
	}
	if topology.Same(n, topology.Result{Resource: "srv-1", Labels: map[string]string{topology.LabelRack: "r2"}}) {
		t.Error("a moved node reported as the same")
	}
	if topology.Same(n, topology.Result{Reason: "gone"}) {
		t.Error("a node whose resource went reported as the same")
	}
}

func TestDeriveAllRefusesTwoNodesOneResource(t *testing.T) {
	got := inventory().DeriveAll(map[string]topology.Identity{
		"a":     {Resource: "srv-1"},
		"b":     {Hostname: "srv-1"},
		"c":     {Hostname: "srv-2"},
		"alone": {Hostname: "laptop"},
	})
	for _, n := range []string{"a", "b"} {
		if got[n].Resource != "" || !strings.Contains(got[n].Reason, `PhysicalResource "srv-1" matches several nodes (a, b)`) {
			t.Errorf("node %s: %+v, want no resource and a reason naming both nodes", n, got[n])
		}
	}
	if got["c"].Resource != "srv-2" {
		t.Errorf("node c: %+v, want srv-2", got["c"])
	}
	if got["alone"].Resource != "" || got["alone"].Reason == "" {
		t.Errorf("node alone: %+v", got["alone"])
	}
}
