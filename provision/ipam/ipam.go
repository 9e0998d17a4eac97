// Package ipam is the address arithmetic of IP address management: which
// addresses of a Network may be handed out (its pool), in which order, and
// what a network's usage is. It is pure: the state store keeps the
// allocations and calls it inside its transactions (core/store/sqlstore,
// ipam.go), with the clock passed in.
//
// Addresses are IPv4 only and handled as numbers (Addr), so that ranges
// are pairs of numbers and the store can index and order them.
package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Addr is an IPv4 address as a number.
type Addr uint32

// ParseAddr reads a dotted IPv4 address; IPv6 is refused.
func ParseAddr(s string) (Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an IP address", s)
	}
	if !a.Is4() {
		return 0, fmt.Errorf("%q is not an IPv4 address (only IPv4 is managed)", s)
	}
	b := a.As4()
	return Addr(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])), nil
}

func (a Addr) String() string {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}).String()
}

// Range is the addresses First to Last, both included.
type Range struct{ First, Last Addr }

// Size is the number of addresses in r.
func (r Range) Size() int64 { return int64(r.Last) - int64(r.First) + 1 }

// Contains says whether a lies in r.
func (r Range) Contains(a Addr) bool { return r.First <= a && a <= r.Last }

// Overlaps says whether r and o share an address.
func (r Range) Overlaps(o Range) bool { return r.First <= o.Last && o.First <= r.Last }

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// ParsePrefix reads an IPv4 CIDR ("10.0.0.0/24"); an IPv6 prefix, a
// length above 32 and host bits set are refused, each saying so.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	addr, bits, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%q is not in CIDR notation (expected an IPv4 network such as 10.0.0.0/24)", s)
	}
	if a, err := netip.ParseAddr(addr); err == nil && !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv6 network; only IPv4 networks are managed", s)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if n, err := strconv.Atoi(bits); err == nil && n > 32 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4 prefix length is 0 to 32, not %d", s, n)
		}
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 network in CIDR notation (such as 10.0.0.0/24)", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; the network is %s", s, p.Masked())
	}
	return p, nil
}

// PrefixRange is every address of an IPv4 prefix.
func PrefixRange(p netip.Prefix) Range {
	b := p.Addr().As4()
	first := Addr(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	return Range{First: first, Last: first | Addr(uint32(1<<(32-p.Bits())-1))}
}

// Pool is the addresses of a network that may be allocated: sorted,
// disjoint, non-adjacent ranges.
type Pool struct {
	ranges []Range
	size   int64
}

// NewPool returns the pool of a network spec: its ranges (the whole CIDR
// when it lists none), less the network and broadcast addresses (for
// prefixes of /30 and larger, where they exist), the gateway and the
// reserved addresses. The spec is expected valid (catalog validation);
// anything unparsable is an error all the same.
func NewPool(spec *unyov1.NetworkSpec) (Pool, error) {
	p, err := ParsePrefix(spec.GetCidr())
	if err != nil {
		return Pool{}, err
	}
	whole := PrefixRange(p)
	var base []Range
	for i, r := range spec.GetRanges() {
		rg, err := ParseRange(r)
		if err != nil {
			return Pool{}, fmt.Errorf("ranges[%d]: %w", i, err)
		}
		base = append(base, rg)
	}
	if len(base) == 0 {
		base = []Range{whole}
	}
	var out []Range
	if p.Bits() <= 30 {
		out = append(out, Range{whole.First, whole.First}, Range{whole.Last, whole.Last})
	}
	if g := spec.GetGateway(); g != "" {
		a, err := ParseAddr(g)
		if err != nil {
			return Pool{}, fmt.Errorf("gateway: %w", err)
		}
		out = append(out, Range{a, a})
	}
	for i, s := range spec.GetReserved() {
		r, err := ParseReserved(s)
		if err != nil {
			return Pool{}, fmt.Errorf("reserved[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return subtract(normalize(base), normalize(out)), nil
}

// ParseRange reads an allocation range.
func ParseRange(r *unyov1.AddressRange) (Range, error) {
	first, err := ParseAddr(r.GetFirst())
	if err != nil {
		return Range{}, fmt.Errorf("first: %w", err)
	}
	last, err := ParseAddr(r.GetLast())
	if err != nil {
		return Range{}, fmt.Errorf("last: %w", err)
	}
	if first > last {
		return Range{}, fmt.Errorf("first %s comes after last %s", first, last)
	}
	return Range{first, last}, nil
}

// ParseReserved reads a reserved entry: an address or an IPv4 CIDR.
func ParseReserved(s string) (Range, error) {
	if strings.Contains(s, "/") {
		p, err := ParsePrefix(s)
		if err != nil {
			return Range{}, err
		}
		return PrefixRange(p), nil
	}
	a, err := ParseAddr(s)
	if err != nil {
		return Range{}, err
	}
	return Range{a, a}, nil
}

// NodeLocalCIDR is the range of each node's port namespaces (DESIGN.md,
// "Providers and node networking"): 8,192 addresses per node.
const NodeLocalCIDR = "169.254.32.0/19"

// nodeLocalPrefix names the built-in per-node networks: "node-local/NODE".
// The slash cannot appear in an object's name, so they never collide with
// a Network an operator applies.
const nodeLocalPrefix = "node-local/"

// NodeLocalName is the name of node's node-local network.
func NodeLocalName(node string) string { return nodeLocalPrefix + node }

// NodeLocal says whether network is a node's node-local network, and whose.
func NodeLocal(network string) (node string, ok bool) {
	node, ok = strings.CutPrefix(network, nodeLocalPrefix)
	return node, ok && node != ""
}

// NodeLocalNetwork is the built-in network of node's port namespaces, as
// `unyo networks get node-local/NODE` shows it. Its scope is "node". Every
// one of its 8,192 addresses is allocated: the namespaces are point-to-point
// /32s, so the /19 has no network, broadcast or gateway address to skip.
func NodeLocalNetwork(node string) *unyov1.Network {
	return &unyov1.Network{Name: NodeLocalName(node), Spec: &unyov1.NetworkSpec{Cidr: NodeLocalCIDR, Scope: "node"}}
}

// PoolOf returns the pool of the named network whose spec is given; the
// spec of a node-local network is ignored (it has no stored spec).
func PoolOf(network string, spec *unyov1.NetworkSpec) (Pool, error) {
	if _, ok := NodeLocal(network); ok {
		p, _ := ParsePrefix(NodeLocalCIDR)
		r := PrefixRange(p)
		return Pool{ranges: []Range{r}, size: r.Size()}, nil
	}
	return NewPool(spec)
}

// normalize sorts ranges and merges overlapping and adjacent ones.
func normalize(rs []Range) []Range {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && int64(r.First) <= int64(out[n-1].Last)+1 {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// subtract removes the normalized ranges cut from the normalized ranges rs.
func subtract(rs, cut []Range) Pool {
	var p Pool
	for _, r := range rs {
		cur := r
		empty := false
		for _, c := range cut {
			if c.Last < cur.First || c.First > cur.Last {
				continue
			}
			if c.First > cur.First {
				p.add(Range{cur.First, c.First - 1})
			}
			if c.Last >= cur.Last {
				empty = true
				break
			}
			cur.First = c.Last + 1
		}
		if !empty {
			p.add(cur)
		}
	}
	return p
}

func (p *Pool) add(r Range) {
	p.ranges = append(p.ranges, r)
	p.size += r.Size()
}

// Size is the number of addresses the pool holds.
func (p Pool) Size() int64 { return p.size }

// Ranges are the pool's ranges in address order.
func (p Pool) Ranges() []Range { return slices.Clone(p.ranges) }

// Contains says whether a may be allocated from the pool.
func (p Pool) Contains(a Addr) bool {
	_, found := slices.BinarySearchFunc(p.ranges, a, func(r Range, a Addr) int {
		switch {
		case r.Last < a:
			return -1
		case r.First > a:
			return 1
		}
		return 0
	})
	return found
}

// From returns the pool's ranges in the order allocation tries them when
// it starts at cursor: from cursor to the pool's end, then from its start
// up to cursor. Allocating onwards from the last address handed out,
// rather than always the lowest free one, keeps a released address unused
// for as long as possible beyond its quarantine, and costs one index probe
// per allocation instead of a scan over everything allocated.
func (p Pool) From(cursor Addr) []Range {
	var after, before []Range
	for _, r := range p.ranges {
		switch {
		case r.Last < cursor:
			before = append(before, r)
		case r.First >= cursor:
			after = append(after, r)
		default:
			after = append(after, Range{cursor, r.Last})
			before = append(before, Range{r.First, cursor - 1})
		}
	}
	// before holds the ranges below cursor in order, the split one last.
	return append(after, before...)
}

// Taken lists the addresses of r that cannot be allocated now (held, or
// in quarantine), ascending, at most limit of them starting at r.First;
// the store answers it with one indexed query.
type Taken func(r Range, limit int) ([]Addr, error)

// page is how many taken addresses Next reads at a time.
const page = 256

// ErrFull says that every address of the pool is taken.
var ErrFull = errors.New("full")

// Next returns the first address, in the order of From(cursor), that
// taken does not list; ErrFull when there is none.
func (p Pool) Next(cursor Addr, taken Taken) (Addr, error) {
	as, err := p.NextN(cursor, 1, taken)
	if err != nil {
		return 0, err
	}
	if len(as) == 0 {
		return 0, ErrFull
	}
	return as[0], nil
}

// NextN returns up to k addresses, the first ones in the order of
// From(cursor) that taken does not list; fewer when the pool has fewer
// free. Allocating a group of requests at once costs one read of the
// taken addresses, not one per request.
func (p Pool) NextN(cursor Addr, k int, taken Taken) ([]Addr, error) {
	var out []Addr
	for _, r := range p.From(cursor) {
		// int64: r.Last may be the last IPv4 address, and a runs past it.
		a, last := int64(r.First), int64(r.Last)
		for a <= last && len(out) < k {
			t, err := taken(Range{Addr(a), r.Last}, page)
			if err != nil {
				return nil, err
			}
			for _, x := range t {
				for ; a < int64(x) && len(out) < k; a++ {
					out = append(out, Addr(a))
				}
				if len(out) == k {
					return out, nil
				}
				a = int64(x) + 1
			}
			if len(t) < page {
				for ; a <= last && len(out) < k; a++ {
					out = append(out, Addr(a))
				}
			}
		}
		if len(out) == k {
			break
		}
	}
	return out, nil
}

// Held says whether an allocation row blocks its address at now: it is
// held (never released), or released less than its quarantine ago.
func Held(releasedAt, reusableAt, now time.Time) bool {
	return releasedAt.IsZero() || now.Before(reusableAt)
}

// Usage is a network's usage from its pool size and the allocations that
// block an address now (held, or released and still in quarantine), as
// the store lists them.
func Usage(size int64, allocs []*unyov1.AddressAllocation) *unyov1.NetworkUsage {
	u := &unyov1.NetworkUsage{Size: size, Allocations: allocs}
	for _, a := range allocs {
		if a.GetReleasedAt() != nil {
			u.Quarantined++
		} else {
			u.Used++
		}
	}
	u.Free = max(size-u.Used-u.Quarantined, 0)
	return u
}
