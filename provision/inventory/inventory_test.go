package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string // substrings; none means valid
	}{
		{"region ok", ValidateRegion(&unyov1.Region{Name: "r1", Spec: &unyov1.RegionSpec{Zones: []string{"az1", "az2"}}}), nil},
		{"region zone twice", ValidateRegion(&unyov1.Region{Name: "r1", Spec: &unyov1.RegionSpec{Zones: []string{"az1", "az1"}}}),
			[]string{`spec.zones[1]: zone "az1" is listed twice`}},
		{"datacenter without region", ValidateDatacenter(&unyov1.Datacenter{Name: "dc1"}), []string{"spec.region: required"}},
		{"floor ok", ValidateFloor(floor("floor-1-2-3", "dc1", 1, 2, 3)), nil},
		{"floor any name", ValidateFloor(floor("north", "dc1", 1, 1, 1)), nil},
		{"floor numbers", ValidateFloor(floor("f", "dc1", 0, -1, 1)), []string{"spec.building: must be at least 1", "spec.level: must be at least 1"}},
		{"floor name disagrees", ValidateFloor(floor("floor-1-2-3", "dc1", 1, 2, 4)), []string{`spec.number: is 4 but the name "floor-1-2-3" says 3`}},
		{"rack ok", ValidateRack(rack("r1", "f1", 0, "az1")), nil},
		{"rack units", ValidateRack(rack("r1", "f1", -2, "")), []string{"spec.units: must be between 1 and 100"}},
		{"rack no floor", ValidateRack(rack("r1", "", 42, "")), []string{"spec.floor: required"}},
		{"resource ok", ValidateResource(server("s1", "r1", 1, 2, port("eth0", "s9", "eth0"))), nil},
		{"resource kind", ValidateResource(&unyov1.PhysicalResource{Name: "x", Spec: &unyov1.PhysicalResourceSpec{Kind: "toaster"}}),
			[]string{`spec.kind: "toaster" is not one of`}},
		{"resource kind required", ValidateResource(&unyov1.PhysicalResource{Name: "x"}), []string{"spec.kind: required"}},
		{"role of a server", ValidateResource(&unyov1.PhysicalResource{Name: "x", Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Role: "rack-leaf-router"}}),
			[]string{"spec.role: only routers and switches"}},
		{"unknown role", ValidateResource(&unyov1.PhysicalResource{Name: "x", Spec: &unyov1.PhysicalResourceSpec{Kind: "router", Role: "core"}}),
			[]string{`spec.role: "core" is not one of`}},
		{"unit zero in rack", ValidateResource(server("s1", "r1", 0, 1)), []string{"spec.unit: must be at least 1"}},
		{"unit without rack", ValidateResource(server("s1", "", 3, 1)), []string{"spec.unit: set without spec.rack"}},
		{"bad mac, date, address", ValidateResource(&unyov1.PhysicalResource{Name: "x", Spec: &unyov1.PhysicalResourceSpec{
			Kind: "server", ContractEnds: "2027-13-01", ManagementAddress: "10.0.0.300",
			Ports: []*unyov1.Port{{Name: "eth0", Mac: "zz:00", Speed: "fast", Address: "10.0.0.1"}, {Name: "eth0"}, {Name: "eth1", Link: &unyov1.PortLink{Resource: "y"}}},
		}}), []string{"spec.contract_ends: \"2027-13-01\" is not a date", "spec.management_address", "spec.ports[0].mac", "spec.ports[0].speed",
			"spec.ports[0].address", `spec.ports[1].name: port "eth0" is listed twice`, "spec.ports[2].link.port: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.want) == 0 {
				if tt.err != nil {
					t.Fatalf("got %v, want valid", tt.err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(tt.err, &ve) {
				t.Fatalf("got %v, want a *ValidationError", tt.err)
			}
			for _, w := range tt.want {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("error %q lacks %q", tt.err, w)
				}
			}
		})
	}
}

func TestRules(t *testing.T) {
	base := []proto.Message{
		&unyov1.Region{Name: "reg", Spec: &unyov1.RegionSpec{Zones: []string{"az1", "az2", "az3"}}},
		&unyov1.Datacenter{Name: "dc1", Spec: &unyov1.DatacenterSpec{Region: "reg"}},
		floor("floor-1-1-1", "dc1", 1, 1, 1),
		rack("r1", "floor-1-1-1", 0, "az1"),
	}
	tests := []struct {
		name  string
		objs  []proto.Message
		judge proto.Message // the object whose rules run; the last of objs if nil
		want  []string
	}{
		{"fits", []proto.Message{server("s1", "r1", 1, 2), server("s2", "r1", 3, 1)}, nil, nil},
		{"top unit", []proto.Message{server("s1", "r1", 41, 2)}, nil, nil},
		{"beyond the rack", []proto.Message{server("s1", "r1", 42, 2)}, nil,
			[]string{`PhysicalResource "s1": spec.unit: units 42-43 go beyond rack "r1", which has 42 units`}},
		{"overlap", []proto.Message{server("s1", "r1", 1, 2), server("s2", "r1", 2, 1)}, nil,
			[]string{`PhysicalResource "s2": spec.unit: units 2 overlap PhysicalResource "s1" (units 1-2) in rack "r1"`}},
		{"rack shrinks", []proto.Message{server("s1", "r1", 20, 2), rack("r1", "floor-1-1-1", 20, "az1")}, nil,
			[]string{`Rack "r1": spec.units: 20 units leave out PhysicalResource "s1" at units 20-21`}},
		{"zone not in region", []proto.Message{rack("r1", "floor-1-1-1", 0, "az9")}, nil,
			[]string{`Rack "r1": spec.zone: "az9" is not a zone of region "reg"`}},
		{"link both sides", []proto.Message{server("a", "r1", 1, 1, port("p", "b", "q")), server("b", "r1", 2, 1, port("q", "a", "p"))}, nil, nil},
		{"link one side", []proto.Message{server("a", "r1", 1, 1, port("p", "b", "q")), server("b", "r1", 2, 1, port("q", "", ""))}, nil, nil},
		{"unknown port", []proto.Message{server("b", "r1", 2, 1, port("q", "", "")), server("a", "r1", 1, 1, port("p", "b", "nope"))}, nil,
			[]string{`PhysicalResource "a": spec.ports[0].link: no port "nope" on PhysicalResource "b"`}},
		{"to itself", []proto.Message{server("a", "r1", 1, 1, port("p", "a", "p"))}, nil,
			[]string{`spec.ports[0].link: port "p" is linked to itself`}},
		{"linked twice", []proto.Message{server("b", "r1", 2, 1, port("q", "", "")), server("c", "r1", 3, 1, port("x", "b", "q")),
			server("a", "r1", 1, 1, port("p", "b", "q"))}, nil,
			[]string{`PhysicalResource "a": spec.ports[0].link: port b/q is linked twice: from a/p and from c/x`}},
		{"asymmetric", []proto.Message{server("c", "r1", 3, 1, port("x", "", "")), server("b", "r1", 2, 1, port("q", "c", "x")),
			server("a", "r1", 1, 1, port("p", "b", "q"))}, nil,
			[]string{`PhysicalResource "a": spec.ports[0].link: port b/q links to c/x, not back to a/p`}},
		{"claimed while linked elsewhere", []proto.Message{server("c", "r1", 3, 1, port("x", "", "")), server("a", "r1", 1, 1, port("p", "b", "q")),
			server("b", "r1", 2, 1, port("q", "c", "x"))}, nil,
			[]string{`PhysicalResource "b": spec.ports[0].link: port b/q links to c/x, but a/p links to it`}},
		{"cycle", []proto.Message{server("c", "r1", 3, 1, port("x", "a", "p")), server("b", "r1", 2, 1, port("q", "c", "x")),
			server("a", "r1", 1, 1, port("p", "b", "q"))}, nil,
			[]string{`PhysicalResource "a": spec.ports[0].link: a cycle of links: a/p → b/q → c/x → a/p`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newFakeView(append(append([]proto.Message{}, base...), tt.objs...))
			judge := tt.judge
			if judge == nil {
				judge = tt.objs[len(tt.objs)-1]
			}
			var err error
			switch m := judge.(type) {
			case *unyov1.Rack:
				err = RulesRack(t.Context(), []*unyov1.Rack{m}, v)
			case *unyov1.PhysicalResource:
				err = RulesResource(t.Context(), []*unyov1.PhysicalResource{m}, v)
			}
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no broken rule", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var re *kinds.RuleError
			if !errors.As(err, &re) {
				t.Errorf("error %v holds no *kinds.RuleError", err)
			}
		})
	}
}

// fakeView holds objects by kind and name, later ones replacing earlier
// ones, and derives referrers from the Refs functions as the store does.
type fakeView struct {
	objs map[[2]string]proto.Message
}

func newFakeView(objs []proto.Message) *fakeView {
	v := &fakeView{objs: map[[2]string]proto.Message{}}
	for _, m := range objs {
		v.objs[[2]string{kindName(m), nameOf(m)}] = m
	}
	return v
}

func kindName(m proto.Message) string { return string(m.ProtoReflect().Descriptor().Name()) }

func nameOf(m proto.Message) string { return kinds.Name(kinds.Wrap(m)) }

func refsOf(m proto.Message) []kinds.Reference {
	switch m := m.(type) {
	case *unyov1.Datacenter:
		return RefsDatacenter(m)
	case *unyov1.Floor:
		return RefsFloor(m)
	case *unyov1.Rack:
		return RefsRack(m)
	case *unyov1.PhysicalResource:
		return RefsResource(m)
	}
	return nil
}

func (v *fakeView) Get(_ context.Context, kind, name string) (proto.Message, error) {
	return v.objs[[2]string{kind, name}], nil
}

func (v *fakeView) Referrers(_ context.Context, kind, name string) ([]kinds.Referrer, error) {
	var out []kinds.Referrer
	for key, m := range v.objs {
		for _, r := range refsOf(m) {
			if r.Kind == kind && r.Name == name {
				out = append(out, kinds.Referrer{Kind: key[0], Name: key[1], Field: r.Field})
			}
		}
	}
	return out, nil
}

func floor(name, dc string, b, l, n int32) *unyov1.Floor {
	return &unyov1.Floor{Name: name, Spec: &unyov1.FloorSpec{Datacenter: dc, Building: b, Level: l, Number: n}}
}

func rack(name, floor string, units int32, zone string) *unyov1.Rack {
	return &unyov1.Rack{Name: name, Spec: &unyov1.RackSpec{Floor: floor, Units: units, Zone: zone}}
}

func server(name, rack string, unit, height int32, ports ...*unyov1.Port) *unyov1.PhysicalResource {
	return &unyov1.PhysicalResource{Name: name, Spec: &unyov1.PhysicalResourceSpec{Kind: "server", Rack: rack, Unit: unit, Height: height, Ports: ports}}
}

func port(name, peer, peerPort string) *unyov1.Port {
	p := &unyov1.Port{Name: name}
	if peer != "" {
		p.Link = &unyov1.PortLink{Resource: peer, Port: peerPort}
	}
	return p
}
