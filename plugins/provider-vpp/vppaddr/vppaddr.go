// Package vppaddr converts between net/netip and the address types of
// VPP's binary API (govpp's ip_types), and names an lb plugin VIP the way
// VPP keys it: prefix, protocol and port. The plugin and its test fake
// share it, so both sides agree on the key.
package vppaddr

import (
	"fmt"
	"net/netip"

	"go.fd.io/govpp/binapi/ip_types"
)

// Protocol numbers as the lb plugin uses them; AnyProtocol with port 0 is
// an all-port VIP.
const (
	TCP         uint8 = 6
	UDP         uint8 = 17
	AnyProtocol uint8 = 255
)

// VIPKey identifies one VIP in VPP's lb plugin.
type VIPKey struct {
	Prefix   netip.Prefix
	Protocol uint8
	Port     uint16
}

func (k VIPKey) String() string {
	if k.Protocol == AnyProtocol {
		return k.Prefix.String() + " all ports"
	}
	return fmt.Sprintf("%s %s/%d", k.Prefix, ProtocolName(k.Protocol), k.Port)
}

// ProtocolName is "tcp", "udp" or the number.
func ProtocolName(p uint8) string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return fmt.Sprint(p)
}

// Address converts an address for the binary API.
func Address(a netip.Addr) ip_types.Address {
	var out ip_types.Address
	if a.Is4() {
		out.Af = ip_types.ADDRESS_IP4
		out.Un.SetIP4(ip_types.IP4Address(a.As4()))
	} else {
		out.Af = ip_types.ADDRESS_IP6
		out.Un.SetIP6(ip_types.IP6Address(a.As16()))
	}
	return out
}

// Addr converts an address from the binary API.
func Addr(a ip_types.Address) netip.Addr {
	if a.Af == ip_types.ADDRESS_IP6 {
		return netip.AddrFrom16(a.Un.GetIP6())
	}
	return netip.AddrFrom4(a.Un.GetIP4())
}

// Prefix converts a prefix for the binary API.
func Prefix(p netip.Prefix) ip_types.AddressWithPrefix {
	return ip_types.AddressWithPrefix{Address: Address(p.Addr()), Len: uint8(p.Bits())}
}

// PrefixOf converts a prefix from the binary API; a length that does not
// fit the address gives the invalid prefix.
func PrefixOf(p ip_types.AddressWithPrefix) netip.Prefix {
	pfx, err := Addr(p.Address).Prefix(int(p.Len))
	if err != nil {
		return netip.Prefix{}
	}
	return pfx
}
