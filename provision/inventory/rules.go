package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// Kind names, as references spell them.
const (
	KindRegion     = "Region"
	KindDatacenter = "Datacenter"
	KindFloor      = "Floor"
	KindRack       = "Rack"
	KindResource   = "PhysicalResource"
)

// Fields through which references are made.
const (
	fieldRack = "spec.rack"
)

// linkField is the field of port i's link, as references record it.
func linkField(i int) string { return fmt.Sprintf("spec.ports[%d].link", i) }

// RefsDatacenter: a datacenter is in a region.
func RefsDatacenter(d *unyov1.Datacenter) []kinds.Reference {
	return []kinds.Reference{{Field: "spec.region", Kind: KindRegion, Name: d.GetSpec().GetRegion()}}
}

// RefsFloor: a floor is in a datacenter.
func RefsFloor(f *unyov1.Floor) []kinds.Reference {
	return []kinds.Reference{{Field: "spec.datacenter", Kind: KindDatacenter, Name: f.GetSpec().GetDatacenter()}}
}

// RefsRack: a rack stands on a floor.
func RefsRack(r *unyov1.Rack) []kinds.Reference {
	return []kinds.Reference{{Field: "spec.floor", Kind: KindFloor, Name: r.GetSpec().GetFloor()}}
}

// RefsResource: a resource sits in a rack, and each linked port names the
// resource at the other end of its cable.
func RefsResource(p *unyov1.PhysicalResource) []kinds.Reference {
	refs := []kinds.Reference{{Field: fieldRack, Kind: KindRack, Name: p.GetSpec().GetRack()}}
	for i, port := range p.GetSpec().GetPorts() {
		if l := port.GetLink(); l != nil {
			refs = append(refs, kinds.Reference{Field: linkField(i), Kind: KindResource, Name: l.GetResource()})
		}
	}
	return refs
}

// RefsCluster: a cluster's attributes name its region and datacenter.
func RefsCluster(c *unyov1.Cluster) []kinds.Reference {
	return []kinds.Reference{
		{Field: "spec.region", Kind: KindRegion, Name: c.GetSpec().GetRegion()},
		{Field: "spec.datacenter", Kind: KindDatacenter, Name: c.GetSpec().GetDatacenter()},
	}
}

func broken(kind, name, field, format string, args ...any) error {
	return &kinds.RuleError{Kind: kind, Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// get reads an object of a kind through v; nil when absent or of another
// type.
func get[M any](ctx context.Context, v kinds.View, kind, name string) (M, error) {
	var zero M
	m, err := v.Get(ctx, kind, name)
	if err != nil || m == nil {
		return zero, err
	}
	typed, _ := m.(M)
	return typed, nil
}

// RulesRack judges racks against their region and their resources: a
// rack's zone is one of its region's zones (when the region lists any),
// and every resource in it fits in its units.
func RulesRack(ctx context.Context, racks []*unyov1.Rack, v kinds.View) error {
	var errs []error
	for _, r := range racks {
		e, err := rackRule(ctx, r, v)
		if err != nil {
			return err
		}
		errs = append(errs, e...)
	}
	return errors.Join(errs...)
}

func rackRule(ctx context.Context, r *unyov1.Rack, v kinds.View) ([]error, error) {
	var errs []error
	if zone := r.GetSpec().GetZone(); zone != "" {
		region, err := regionOf(ctx, r, v)
		if err != nil {
			return nil, err
		}
		if zones := region.GetSpec().GetZones(); region != nil && len(zones) > 0 && !slices.Contains(zones, zone) {
			errs = append(errs, broken(KindRack, r.GetName(), "spec.zone", "%q is not a zone of region %q (its zones: %s)",
				zone, region.GetName(), strings.Join(zones, ", ")))
		}
	}
	in, err := resourcesIn(ctx, r.GetName(), v)
	if err != nil {
		return nil, err
	}
	units := RackUnits(r)
	for _, p := range in {
		if top := p.GetSpec().GetUnit() + Height(p) - 1; top > units {
			errs = append(errs, broken(KindRack, r.GetName(), "spec.units", "%d units leave out PhysicalResource %q at units %s",
				units, p.GetName(), span(p)))
		}
	}
	return errs, nil
}

// regionOf follows a rack up to its region; nil where the chain breaks
// (references make sure it does not, but a rule does not rely on it).
func regionOf(ctx context.Context, r *unyov1.Rack, v kinds.View) (*unyov1.Region, error) {
	floor, err := get[*unyov1.Floor](ctx, v, KindFloor, r.GetSpec().GetFloor())
	if err != nil || floor == nil {
		return nil, err
	}
	dc, err := get[*unyov1.Datacenter](ctx, v, KindDatacenter, floor.GetSpec().GetDatacenter())
	if err != nil || dc == nil {
		return nil, err
	}
	return get[*unyov1.Region](ctx, v, KindRegion, dc.GetSpec().GetRegion())
}

// resourcesIn returns the resources in a rack, found by their references.
func resourcesIn(ctx context.Context, rack string, v kinds.View) ([]*unyov1.PhysicalResource, error) {
	refs, err := v.Referrers(ctx, KindRack, rack)
	if err != nil {
		return nil, err
	}
	var out []*unyov1.PhysicalResource
	for _, ref := range refs {
		if ref.Kind != KindResource || ref.Field != fieldRack {
			continue
		}
		p, err := get[*unyov1.PhysicalResource](ctx, v, KindResource, ref.Name)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// span is the units a resource takes: "10-11", or "10".
func span(p *unyov1.PhysicalResource) string {
	lo, hi := p.GetSpec().GetUnit(), p.GetSpec().GetUnit()+Height(p)-1
	if lo == hi {
		return strconv.Itoa(int(lo))
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// RulesResource judges a resource against its rack and its cabling: it
// fits in the rack's units and overlaps no other resource there, and each
// cable joins two ports, each port one cable.
//
// A cable is declared on one side or both: a port linking to a peer port
// that declares no link is linked back implicitly (get shows what was
// applied, not the implied side). Refused: a port linked to itself; a
// link to a port the peer lacks; a peer port declaring a link elsewhere
// (asymmetric: A→B while B→C); two ports linking to one port (a port
// linked twice); and a cycle of links, a chain of declared links that
// returns to its first port through more than one other port (A→B→C→A):
// a cable has two ends, so a chain longer than a pair is no cabling.
func RulesResource(ctx context.Context, ps []*unyov1.PhysicalResource, v kinds.View) error {
	var errs []error
	c := &cabling{v: v, claims: map[string]map[string][]end{}}
	for _, p := range ps {
		if rack := p.GetSpec().GetRack(); rack != "" {
			e, err := rackRules(ctx, p, v)
			if err != nil {
				return err
			}
			errs = append(errs, e...)
		}
		e, err := c.linkRules(ctx, p)
		if err != nil {
			return err
		}
		errs = append(errs, e...)
	}
	return errors.Join(errs...)
}

// cabling reads links for the rules of one batch, finding which ports
// claim each resource's ports once per resource.
type cabling struct {
	v      kinds.View
	claims map[string]map[string][]end // resource → port → ends linking to it
}

func rackRules(ctx context.Context, p *unyov1.PhysicalResource, v kinds.View) ([]error, error) {
	name, rackName := p.GetName(), p.GetSpec().GetRack()
	rack, err := get[*unyov1.Rack](ctx, v, KindRack, rackName)
	if err != nil || rack == nil {
		return nil, err
	}
	var errs []error
	if top := p.GetSpec().GetUnit() + Height(p) - 1; top > RackUnits(rack) {
		errs = append(errs, broken(KindResource, name, "spec.unit", "units %s go beyond rack %q, which has %d units",
			span(p), rackName, RackUnits(rack)))
	}
	others, err := resourcesIn(ctx, rackName, v)
	if err != nil {
		return nil, err
	}
	lo, hi := p.GetSpec().GetUnit(), p.GetSpec().GetUnit()+Height(p)-1
	for _, o := range others {
		if o.GetName() == name {
			continue
		}
		olo, ohi := o.GetSpec().GetUnit(), o.GetSpec().GetUnit()+Height(o)-1
		if lo <= ohi && olo <= hi {
			errs = append(errs, broken(KindResource, name, "spec.unit", "units %s overlap PhysicalResource %q (units %s) in rack %q",
				span(p), o.GetName(), span(o), rackName))
		}
	}
	return errs, nil
}

// end is one end of a cable: a resource's port.
type end struct{ resource, port string }

func (e end) String() string { return e.resource + "/" + e.port }

// maxChain bounds how far a chain of links is followed looking for a
// cycle; real cabling never goes beyond a pair.
const maxChain = 64

func (c *cabling) linkRules(ctx context.Context, p *unyov1.PhysicalResource) ([]error, error) {
	v := c.v
	var errs []error
	name := p.GetName()
	for i, port := range p.GetSpec().GetPorts() {
		l := port.GetLink()
		if l == nil {
			continue
		}
		field, self, peer := linkField(i), end{name, port.GetName()}, end{l.GetResource(), l.GetPort()}
		if peer == self {
			errs = append(errs, broken(KindResource, name, field, "port %q is linked to itself", port.GetName()))
			continue
		}
		peerPort, found, err := portOf(ctx, v, peer)
		if err != nil {
			return nil, err
		}
		if !found {
			errs = append(errs, broken(KindResource, name, field, "no port %q on PhysicalResource %q", peer.port, peer.resource))
			continue
		}
		if back := peerPort.GetLink(); back != nil && (end{back.GetResource(), back.GetPort()}) != self {
			chain, err := follow(ctx, v, self)
			if err != nil {
				return nil, err
			}
			if chain[len(chain)-1] == self {
				errs = append(errs, broken(KindResource, name, field, "a cycle of links: %s (a cable joins two ports)", joinEnds(chain)))
			} else {
				errs = append(errs, broken(KindResource, name, field, "port %s links to %s/%s, not back to %s",
					peer, back.GetResource(), back.GetPort(), self))
			}
			continue
		}
		claims, err := c.claimants(ctx, peer)
		if err != nil {
			return nil, err
		}
		if others := slices.DeleteFunc(claims, func(e end) bool { return e == self }); len(others) > 0 {
			errs = append(errs, broken(KindResource, name, field, "port %s is linked twice: from %s and from %s",
				peer, self, listEnds(others)))
		}
	}
	// A port of this resource declaring one link while another resource's
	// port claims it (that resource may not be in this apply).
	for i, port := range p.GetSpec().GetPorts() {
		l := port.GetLink()
		if l == nil {
			continue
		}
		self, peer := end{name, port.GetName()}, end{l.GetResource(), l.GetPort()}
		claims, err := c.claimants(ctx, self)
		if err != nil {
			return nil, err
		}
		for _, c := range claims {
			if c != peer && c.resource != name {
				errs = append(errs, broken(KindResource, name, linkField(i), "port %s links to %s, but %s links to it",
					self, peer, c))
			}
		}
	}
	return errs, nil
}

// portOf returns the port at e, and whether there is one.
func portOf(ctx context.Context, v kinds.View, e end) (*unyov1.Port, bool, error) {
	r, err := get[*unyov1.PhysicalResource](ctx, v, KindResource, e.resource)
	if err != nil || r == nil {
		return nil, false, err
	}
	for _, port := range r.GetSpec().GetPorts() {
		if port.GetName() == e.port {
			return port, true, nil
		}
	}
	return nil, false, nil
}

// follow walks the declared links from start: start, its peer, the peer's
// peer... ending where a port declares no link, a link leads nowhere, the
// walk returns to a port it passed, or after maxChain steps.
func follow(ctx context.Context, v kinds.View, start end) ([]end, error) {
	chain := []end{start}
	for len(chain) < maxChain {
		port, found, err := portOf(ctx, v, chain[len(chain)-1])
		if err != nil {
			return nil, err
		}
		if !found || port.GetLink() == nil {
			return chain, nil
		}
		next := end{port.GetLink().GetResource(), port.GetLink().GetPort()}
		chain = append(chain, next)
		if slices.Contains(chain[:len(chain)-1], next) {
			return chain, nil
		}
	}
	return chain, nil
}

// claimants are the ports whose declared link leads to e.
func (c *cabling) claimants(ctx context.Context, e end) ([]end, error) {
	byPort, ok := c.claims[e.resource]
	if !ok {
		refs, err := c.v.Referrers(ctx, KindResource, e.resource)
		if err != nil {
			return nil, err
		}
		byPort = map[string][]end{}
		for _, ref := range refs {
			i, isLink := linkIndex(ref.Field)
			if ref.Kind != KindResource || !isLink {
				continue
			}
			r, err := get[*unyov1.PhysicalResource](ctx, c.v, KindResource, ref.Name)
			if err != nil {
				return nil, err
			}
			if ports := r.GetSpec().GetPorts(); r != nil && i < len(ports) {
				if l := ports[i].GetLink(); l.GetResource() == e.resource {
					byPort[l.GetPort()] = append(byPort[l.GetPort()], end{ref.Name, ports[i].GetName()})
				}
			}
		}
		c.claims[e.resource] = byPort
	}
	return slices.Clone(byPort[e.port]), nil
}

// linkIndex returns i of a field spec.ports[i].link.
func linkIndex(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "spec.ports[")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, "].link")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0
}

func joinEnds(es []end) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return strings.Join(s, " → ")
}

func listEnds(es []end) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return strings.Join(s, ", ")
}
