package catalog

import (
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// wantErr checks err against want: "" for valid, else every "|"-separated
// part must appear in the error.
func wantErr(t *testing.T, name string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: accepted, want an error containing %q", name, want)
		return
	}
	for _, part := range strings.Split(want, "|") {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%s: error %q does not contain %q", name, err, part)
		}
	}
}

func TestFlavor(t *testing.T) {
	ok := func() *unyov1.FlavorSpec {
		return &unyov1.FlavorSpec{Kind: "vm", Vcpus: 2, CpuPolicy: "pinned", Memory: "4Gi", Disk: "40Gi", IoClass: "fast",
			PricePerHour: 0.12, ModelPrices: map[string]float64{"r650": 0.1}}
	}
	for _, tc := range []struct {
		name string
		edit func(s *unyov1.FlavorSpec)
		want string
	}{
		{"valid", func(*unyov1.FlavorSpec) {}, ""},
		{"container with defaults", func(s *unyov1.FlavorSpec) { *s = unyov1.FlavorSpec{Kind: "container", Vcpus: 1, Memory: "512Mi"} }, ""},
		{"kind", func(s *unyov1.FlavorSpec) { s.Kind = "bare" }, `spec.kind: "bare" is not one of vm, container`},
		{"no vcpus", func(s *unyov1.FlavorSpec) { s.Vcpus = 0 }, "spec.vcpus: must be at least 1, got 0"},
		{"policy", func(s *unyov1.FlavorSpec) { s.CpuPolicy = "dedicated" }, "spec.cpu_policy"},
		{"memory", func(s *unyov1.FlavorSpec) { s.Memory = "4GB" }, `spec.memory: "4GB" is not a quantity (expected a whole number with a unit such as 512Mi or 4Gi)`},
		{"no memory", func(s *unyov1.FlavorSpec) { s.Memory = "" }, "spec.memory: required"},
		{"disk", func(s *unyov1.FlavorSpec) { s.Disk = "-1Gi" }, "spec.disk"},
		{"price", func(s *unyov1.FlavorSpec) { s.PricePerHour = -1 }, "spec.price_per_hour: must not be negative"},
		{"model price", func(s *unyov1.FlavorSpec) { s.ModelPrices["r650"] = -2 }, `spec.model_prices["r650"]`},
	} {
		s := ok()
		tc.edit(s)
		wantErr(t, tc.name, Flavor(&unyov1.Flavor{Name: "small", Spec: s}), tc.want)
	}
}

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{"512Mi": 512 << 20, "4Gi": 4 << 30, "20G": 20e9, "1024": 1024, "1Ti": 1 << 40} {
		if got, err := ParseQuantity(in); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Gi", "4gi", "1.5Gi", "0", "99999999999999999999Gi"} {
		if _, err := ParseQuantity(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestImage(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		spec *unyov1.ImageSpec
		want string
	}{
		{"vm", &unyov1.ImageSpec{Kind: "vm", Source: "https://images/x.qcow2", Format: "qcow2", Checksum: sum}, ""},
		{"container reference", &unyov1.ImageSpec{Kind: "container", Source: "nginx:1.27"}, ""},
		{"container archive", &unyov1.ImageSpec{Kind: "container", Source: "/srv/x.tar", Format: "oci", Checksum: sum}, ""},
		{"vm format", &unyov1.ImageSpec{Kind: "vm", Source: "x", Format: "oci", Checksum: sum}, `spec.format: "oci" is not a format of a vm image (expected qcow2, raw, kernel)`},
		{"vm without checksum", &unyov1.ImageSpec{Kind: "vm", Source: "x", Format: "raw"}, "spec.checksum: required for a vm image"},
		{"vm kernel directory", &unyov1.ImageSpec{Kind: "vm", Source: "guest", Format: "kernel"}, ""},
		{"container kernel", &unyov1.ImageSpec{Kind: "container", Source: "guest", Format: "kernel"}, "spec.format"},
		{"bad checksum", &unyov1.ImageSpec{Kind: "container", Source: "x", Checksum: "md5:abc"}, `spec.checksum: "md5:abc" is not a checksum`},
		{"no source", &unyov1.ImageSpec{Kind: "container"}, "spec.source: required"},
		{"no kind", &unyov1.ImageSpec{Source: "x"}, "spec.kind: required"},
	} {
		wantErr(t, tc.name, Image(&unyov1.Image{Name: "img", Spec: tc.spec}), tc.want)
	}
}

func TestNetwork(t *testing.T) {
	rng := func(a, b string) *unyov1.AddressRange { return &unyov1.AddressRange{First: a, Last: b} }
	for _, tc := range []struct {
		name string
		spec *unyov1.NetworkSpec
		want string
	}{
		{"region network", &unyov1.NetworkSpec{Cidr: "10.1.0.0/16", Gateway: "10.1.0.1", Scope: "region", Region: "tokyo",
			Ranges: []*unyov1.AddressRange{rng("10.1.1.0", "10.1.1.255"), rng("10.1.3.0", "10.1.3.9")}, Reserved: []string{"10.1.1.10", "10.1.3.0/30"}}, ""},
		{"cluster network", &unyov1.NetworkSpec{Cidr: "192.168.0.0/24", Scope: "cluster", Cluster: "c1"}, ""},
		{"/33", &unyov1.NetworkSpec{Cidr: "10.0.0.0/33", Scope: "cluster", Cluster: "c1"}, "spec.cidr: \"10.0.0.0/33\": an IPv4 prefix length is 0 to 32, not 33"},
		{"IPv6", &unyov1.NetworkSpec{Cidr: "fd00::/64", Scope: "cluster", Cluster: "c1"}, "spec.cidr: \"fd00::/64\" is an IPv6 network; only IPv4 networks are managed"},
		{"no CIDR", &unyov1.NetworkSpec{Scope: "cluster", Cluster: "c1"}, "spec.cidr: required"},
		{"gateway outside", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Gateway: "10.0.1.1", Scope: "cluster", Cluster: "c1"}, "spec.gateway: 10.0.1.1 is outside the network 10.0.0.0/24"},
		{"region scope without region", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "region"}, "spec.region: required with scope region"},
		{"region scope with cluster", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "region", Region: "r", Cluster: "c"}, "spec.cluster: must be empty with scope region"},
		{"cluster scope without cluster", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "cluster"}, "spec.cluster: required with scope cluster"},
		{"scope", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "zone"}, `spec.scope: "zone" is not one of region, cluster`},
		{"range outside", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "cluster", Cluster: "c", Ranges: []*unyov1.AddressRange{rng("10.0.0.200", "10.0.1.5")}},
			"spec.ranges[0]: 10.0.0.200-10.0.1.5 is outside the network 10.0.0.0/24"},
		{"range reversed", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "cluster", Cluster: "c", Ranges: []*unyov1.AddressRange{rng("10.0.0.9", "10.0.0.2")}},
			"spec.ranges[0]: first 10.0.0.9 comes after last 10.0.0.2"},
		{"ranges overlap", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "cluster", Cluster: "c", Ranges: []*unyov1.AddressRange{rng("10.0.0.2", "10.0.0.20"), rng("10.0.0.20", "10.0.0.30")}},
			"spec.ranges[1]: 10.0.0.20-10.0.0.30 overlaps spec.ranges[0] (10.0.0.2-10.0.0.20)"},
		{"reserved outside", &unyov1.NetworkSpec{Cidr: "10.0.0.0/24", Scope: "cluster", Cluster: "c", Reserved: []string{"10.9.0.1"}},
			"spec.reserved[0]: 10.9.0.1 is outside the network"},
		{"nothing left", &unyov1.NetworkSpec{Cidr: "10.0.0.0/30", Gateway: "10.0.0.1", Scope: "cluster", Cluster: "c", Reserved: []string{"10.0.0.2"}},
			"no address is left to allocate"},
	} {
		wantErr(t, tc.name, Network(&unyov1.Network{Name: "net-a", Spec: tc.spec}), tc.want)
	}
}

func TestOverlaps(t *testing.T) {
	net := func(name, cidr, scope, where string) *unyov1.Network {
		s := &unyov1.NetworkSpec{Cidr: cidr, Scope: scope}
		if scope == ScopeRegion {
			s.Region = where
		} else {
			s.Cluster = where
		}
		return &unyov1.Network{Name: name, Spec: s}
	}
	stored := []*unyov1.Network{
		net("tokyo-a", "10.0.0.0/16", ScopeRegion, "tokyo"),
		net("c1-pods", "192.168.0.0/24", ScopeCluster, "c1"),
	}
	for _, tc := range []struct {
		name  string
		apply *unyov1.Network
		want  string
	}{
		{"apart", net("tokyo-b", "10.1.0.0/16", ScopeRegion, "tokyo"), ""},
		{"other region", net("osaka-a", "10.0.0.0/16", ScopeRegion, "osaka"), ""},
		{"other cluster", net("c2-pods", "192.168.0.0/24", ScopeCluster, "c2"), ""},
		{"other scope", net("c1-x", "10.0.5.0/24", ScopeCluster, "c1"), ""},
		{"inside", net("tokyo-b", "10.0.5.0/24", ScopeRegion, "tokyo"),
			`network "tokyo-b": spec.cidr 10.0.5.0/24 overlaps network "tokyo-a" (10.0.0.0/16) in the same region "tokyo"`},
		{"cluster", net("c1-more", "192.168.0.128/25", ScopeCluster, "c1"), `overlaps network "c1-pods" (192.168.0.0/24) in the same cluster "c1"`},
		{"replacing itself", net("tokyo-a", "10.0.0.0/8", ScopeRegion, "tokyo"), ""},
	} {
		all := []*unyov1.Network{tc.apply}
		for _, s := range stored {
			if s.GetName() != tc.apply.GetName() {
				all = append(all, s)
			}
		}
		wantErr(t, tc.name, Overlaps(all, map[string]bool{tc.apply.GetName(): true}), tc.want)
	}
	// Two applied networks overlapping each other are reported once.
	err := Overlaps([]*unyov1.Network{net("a", "10.9.0.0/24", ScopeRegion, "r"), net("b", "10.9.0.0/25", ScopeRegion, "r")}, map[string]bool{"a": true, "b": true})
	if err == nil || strings.Count(err.Error(), "overlaps") != 1 {
		t.Errorf("two overlapping applied networks: %v", err)
	}
}
