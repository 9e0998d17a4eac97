// Package inventory is the domain logic of root's inventory (DESIGN.md,
// "Inventory"): where hardware sits and how it is cabled. It validates
// each kind on its own (Validate*), names the references between them
// (Refs*) and judges an object against the others it touches (Rules*):
// rack units, overlapping resources, port links. It does no I/O: the
// rules read the proposed state through a kinds.View.
package inventory

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
)

// Kinds of physical resource.
var resourceKinds = []string{"server", "switch", "router", "pdu", "other"}

// Roles are the tiers of the datacenter network (seed 001), from the
// internet down; only routers and switches have one.
var Roles = []string{"gateway-router", "floor-spine-router", "floor-leaf-router", "rack-spine-router", "rack-leaf-router"}

// DefaultUnits is a rack's height when its spec leaves it out.
const DefaultUnits = 42

// maxUnits bounds a rack's height: the tallest racks sold have 58 units.
const maxUnits = 100

// DateLayout is how contract end dates are written.
const DateLayout = time.DateOnly

// ValidationError lists every invalid field of one object.
type ValidationError = validate.Error

// ValidateRegion checks a Region: its zones are names, each listed once.
func ValidateRegion(r *unyov1.Region) error {
	var f validate.Fields
	f.Name("name", r.GetName())
	for i, z := range r.GetSpec().GetZones() {
		field := fmt.Sprintf("spec.zones[%d]", i)
		f.Name(field, z)
		if slices.Index(r.GetSpec().GetZones(), z) < i {
			f.Addf(field, "zone %q is listed twice", z)
		}
	}
	return f.Err("Region", r.GetName())
}

// ValidateDatacenter checks a Datacenter: it names its region.
func ValidateDatacenter(d *unyov1.Datacenter) error {
	var f validate.Fields
	f.Name("name", d.GetName())
	f.Name("spec.region", d.GetSpec().GetRegion())
	return f.Err("Datacenter", d.GetName())
}

// floorName is the seeds' naming of floors: floor-BUILDING-LEVEL-NUMBER.
var floorName = regexp.MustCompile(`^floor-(\d+)-(\d+)-(\d+)$`)

// ValidateFloor checks a Floor: building, level and number are at least 1,
// and a floor named as the seeds do (floor-B-L-N) agrees with them; any
// other name is accepted.
func ValidateFloor(fl *unyov1.Floor) error {
	var f validate.Fields
	f.Name("name", fl.GetName())
	s := fl.GetSpec()
	f.Name("spec.datacenter", s.GetDatacenter())
	nums := []struct {
		field string
		v     int32
	}{{"spec.building", s.GetBuilding()}, {"spec.level", s.GetLevel()}, {"spec.number", s.GetNumber()}}
	for _, n := range nums {
		if n.v < 1 {
			f.Addf(n.field, "must be at least 1, got %d", n.v)
		}
	}
	if m := floorName.FindStringSubmatch(fl.GetName()); m != nil {
		for i, n := range nums {
			if want, _ := strconv.Atoi(m[i+1]); n.v >= 1 && int32(want) != n.v {
				f.Addf(n.field, "is %d but the name %q says %d (floor-BUILDING-LEVEL-NUMBER)", n.v, fl.GetName(), want)
			}
		}
	}
	return f.Err("Floor", fl.GetName())
}

// ValidateRack checks a Rack on its own; its zone against its region's
// and its resources against its units are rules across objects.
func ValidateRack(r *unyov1.Rack) error {
	var f validate.Fields
	f.Name("name", r.GetName())
	s := r.GetSpec()
	f.Name("spec.floor", s.GetFloor())
	if u := s.GetUnits(); u < 0 || u > maxUnits {
		f.Addf("spec.units", "must be between 1 and %d (0 means %d), got %d", maxUnits, DefaultUnits, u)
	}
	if c := s.GetPosition().GetColumn(); c < 0 {
		f.Addf("spec.position.column", "must not be negative, got %d", c)
	}
	for _, z := range []struct{ field, v string }{{"spec.zone", s.GetZone()}, {"spec.power_zone", s.GetPowerZone()}, {"spec.network_zone", s.GetNetworkZone()}} {
		if z.v != "" {
			f.Name(z.field, z.v)
		}
	}
	return f.Err("Rack", r.GetName())
}

// RackUnits is a rack's height, its default applied.
func RackUnits(r *unyov1.Rack) int32 {
	if u := r.GetSpec().GetUnits(); u > 0 {
		return u
	}
	return DefaultUnits
}

// Height is how many units a resource takes, 1 when left out.
func Height(p *unyov1.PhysicalResource) int32 {
	if h := p.GetSpec().GetHeight(); h > 0 {
		return h
	}
	return 1
}

var speedRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[MGT]$`)

// ValidateResource checks a PhysicalResource on its own: kind, role, rack
// units, MACs, addresses, the contract's end date, its ports.
func ValidateResource(p *unyov1.PhysicalResource) error {
	var f validate.Fields
	f.Name("name", p.GetName())
	s := p.GetSpec()
	switch {
	case s.GetKind() == "":
		f.Addf("spec.kind", "required: one of %v", resourceKinds)
	case !slices.Contains(resourceKinds, s.GetKind()):
		f.Addf("spec.kind", "%q is not one of %v", s.GetKind(), resourceKinds)
	}
	if role := s.GetRole(); role != "" {
		switch {
		case s.GetKind() != "router" && s.GetKind() != "switch":
			f.Addf("spec.role", "only routers and switches have a role (a tier of the network), not a %s", s.GetKind())
		case !slices.Contains(Roles, role):
			f.Addf("spec.role", "%q is not one of %v", role, Roles)
		}
	}
	if s.GetRack() != "" {
		f.Name("spec.rack", s.GetRack())
		if s.GetUnit() < 1 {
			f.Addf("spec.unit", "must be at least 1 (the bottom unit) for a resource in a rack, got %d", s.GetUnit())
		}
	} else if s.GetUnit() != 0 {
		f.Add("spec.unit", "set without spec.rack")
	}
	if s.GetHeight() < 0 || s.GetHeight() > maxUnits {
		f.Addf("spec.height", "must be between 1 and %d units (0 means 1), got %d", maxUnits, s.GetHeight())
	}
	if a := s.GetManagementAddress(); a != "" {
		if _, err := netip.ParseAddr(a); err != nil {
			f.Addf("spec.management_address", "%q is not an IP address", a)
		}
	}
	if h := s.GetHostname(); h != "" {
		if err := validate.Name(h); err != nil {
			f.Add("spec.hostname", err.Error())
		}
	}
	if c := s.GetContractEnds(); c != "" {
		if _, err := time.Parse(DateLayout, c); err != nil {
			f.Addf("spec.contract_ends", "%q is not a date (expected YYYY-MM-DD)", c)
		}
	}
	for i, port := range s.GetPorts() {
		validatePort(&f, fmt.Sprintf("spec.ports[%d]", i), port, s.GetPorts()[:i])
	}
	return f.Err("PhysicalResource", p.GetName())
}

func validatePort(f *validate.Fields, field string, p *unyov1.Port, before []*unyov1.Port) {
	switch {
	case p.GetName() == "":
		f.Add(field+".name", "required")
	case slices.ContainsFunc(before, func(o *unyov1.Port) bool { return o.GetName() == p.GetName() }):
		f.Addf(field+".name", "port %q is listed twice", p.GetName())
	}
	if m := p.GetMac(); m != "" {
		if hw, err := net.ParseMAC(m); err != nil || len(hw) != 6 {
			f.Addf(field+".mac", "%q is not a MAC address (expected six hex bytes, 00:1a:2b:3c:4d:5e)", m)
		}
	}
	if sp := p.GetSpeed(); sp != "" && !speedRE.MatchString(sp) {
		f.Addf(field+".speed", "%q is not a link speed (expected a number and M, G or T: 25G)", sp)
	}
	if a := p.GetAddress(); a != "" {
		if _, err := netip.ParsePrefix(a); err != nil {
			f.Addf(field+".address", "%q is not an address in CIDR notation (10.1.0.1/24)", a)
		}
	}
	for j, n := range p.GetNetworks() {
		f.Name(fmt.Sprintf("%s.networks[%d]", field, j), n)
	}
	if l := p.GetLink(); l != nil {
		if l.GetResource() == "" {
			f.Add(field+".link.resource", "required: the resource at the other end of the cable")
		}
		if l.GetPort() == "" {
			f.Add(field+".link.port", "required: the port at the other end of the cable")
		}
	}
}

// maxWeight bounds a cluster's weight, a preference among clusters.
const maxWeight = 1_000_000

// ValidateCluster checks a Cluster's attributes: its name is a cluster's
// name, region and datacenter (optional) are names, the weight is 0 (1)
// to maxWeight.
func ValidateCluster(c *unyov1.Cluster) error {
	var f validate.Fields
	f.Name("name", c.GetName())
	s := c.GetSpec()
	if s.GetRegion() != "" {
		f.Name("spec.region", s.GetRegion())
	}
	if s.GetDatacenter() != "" {
		f.Name("spec.datacenter", s.GetDatacenter())
	}
	if w := s.GetWeight(); w < 0 || w > maxWeight {
		f.Addf("spec.weight", "must be between 1 and %d (0 means 1), got %d", maxWeight, w)
	}
	return f.Err("Cluster", c.GetName())
}
