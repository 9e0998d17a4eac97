// Package vpptest is a fake VPP for tests: the lb plugin's VIP and AS
// tables behind VPP's binary API, answering lb_conf, lb_add_del_vip,
// lb_add_del_as, lb_vip_dump, lb_as_dump, show_version and control_ping
// with the replies and retvals VPP's lb plugin gives (src/plugins/lb/lb.c,
// api.c). Server serves it on a unix socket in govpp's socketclient
// framing, so the plugin under test talks to it exactly as to a real VPP.
//
// What it does not model: packets. There is no dataplane, no flow table
// and no counters; deleted ASes stay in the table unused until the flow
// timeout passes, as VPP keeps them for established flows.
package vpptest

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/vpe"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
)

// Retvals VPP answers (vnet/api_errno.h).
const (
	ErrNoSuchEntry          = int32(api.NO_SUCH_ENTRY)
	ErrValueExist           = int32(api.VALUE_EXIST)
	ErrInvalidArgument      = int32(api.INVALID_ARGUMENT)
	ErrInvalidMemorySize    = int32(api.INVALID_MEMORY_SIZE)
	ErrInvalidAddressFamily = int32(api.INVALID_ADDRESS_FAMILY)
)

// VPP's lb defaults (lb.h).
const (
	defaultStickyBuckets = 1 << 10
	defaultFlowTimeout   = 40
)

// VIP is one row of the fake's VIP table.
type VIP struct {
	Key             vppaddr.VIPKey
	Encap           lb_types.LbEncapType
	Dscp            uint8
	SrvType         lb_types.LbSrvType
	TargetPort      uint16
	FlowTableLength uint32
	ASes            []AS
}

// AS is an application server of a VIP. Used is false once it was
// deleted: VPP keeps it for its established flows until the flow timeout.
type AS struct {
	Address  netip.Addr
	Used     bool
	LastUsed time.Time
	// Flushed is set when it was deleted with is_flush.
	Flushed bool
}

// Conf is what lb_conf set.
type Conf struct {
	IP4Src        netip.Addr
	StickyBuckets uint32
	FlowTimeout   uint32
	// Calls counts lb_conf messages.
	Calls int
}

// VPP is the fake's state. Safe for concurrent use.
type VPP struct {
	mu   sync.Mutex
	now  func() time.Time
	conf Conf
	vips []*VIP
	// Version is what show_version answers.
	Version string
}

// New returns an empty VPP with the lb plugin's defaults.
func New() *VPP {
	return &VPP{now: time.Now, Version: "24.02-fake", conf: Conf{StickyBuckets: defaultStickyBuckets, FlowTimeout: defaultFlowTimeout}}
}

// SetClock replaces the clock the flow timeout is measured with.
func (v *VPP) SetClock(now func() time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = now
}

// Reset empties every table, as a VPP restart does.
func (v *VPP) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.vips = nil
	v.conf = Conf{StickyBuckets: defaultStickyBuckets, FlowTimeout: defaultFlowTimeout}
}

// Conf returns what lb_conf set.
func (v *VPP) Conf() Conf {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.conf
}

// VIPs returns a copy of the VIP table.
func (v *VPP) VIPs() []VIP {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]VIP, len(v.vips))
	for i, x := range v.vips {
		out[i] = *x
		out[i].ASes = slices.Clone(x.ASes)
	}
	return out
}

// InUse returns the addresses of the VIP's ASes in use (new flows go to
// them), sorted; nil when the VIP does not exist.
func (v *VPP) InUse(k vppaddr.VIPKey) []netip.Addr {
	v.mu.Lock()
	defer v.mu.Unlock()
	x := v.find(k)
	if x == nil {
		return nil
	}
	out := []netip.Addr{}
	for _, a := range x.ASes {
		if a.Used {
			out = append(out, a.Address)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func (v *VPP) find(k vppaddr.VIPKey) *VIP {
	for _, x := range v.vips {
		if x.Key == k {
			return x
		}
	}
	return nil
}

// Handle answers one request; dumps answer their details (the server adds
// the control_ping_reply that ends them). Unknown messages get no answer,
// as VPP drops a message without a handler.
func (v *VPP) Handle(msg api.Message) []api.Message {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch m := msg.(type) {
	case *memclnt.ControlPing:
		return []api.Message{&memclnt.ControlPingReply{VpePID: 4242}}
	case *vpe.ShowVersion:
		return []api.Message{&vpe.ShowVersionReply{Program: "vpe", Version: v.Version, BuildDate: "fake"}}
	case *lb.LbConf:
		return []api.Message{&lb.LbConfReply{Retval: v.lbConf(m)}}
	case *lb.LbAddDelVip:
		return []api.Message{&lb.LbAddDelVipReply{Retval: v.addDelVIP(m)}}
	case *lb.LbAddDelAs:
		return []api.Message{&lb.LbAddDelAsReply{Retval: v.addDelAS(m)}}
	case *lb.LbVipDump:
		var out []api.Message
		for _, x := range v.vips {
			out = append(out, &lb.LbVipDetails{
				Vip:   lb_types.LbVip{Pfx: vppaddr.Prefix(x.Key.Prefix), Protocol: ip_types.IPProto(x.Key.Protocol), Port: x.Key.Port},
				Encap: x.Encap, Dscp: ip_types.IPDscp(x.Dscp), SrvType: x.SrvType, TargetPort: x.TargetPort,
				FlowTableLength: uint16(x.FlowTableLength),
			})
		}
		return out
	case *lb.LbAsDump:
		// A zero prefix dumps every VIP's ASes, as VPP does.
		all := !vppaddr.Addr(m.Pfx.Address).IsValid() || vppaddr.Addr(m.Pfx.Address).IsUnspecified()
		var out []api.Message
		for _, x := range v.vips {
			if !all && (x.Key.Prefix != vppaddr.PrefixOf(m.Pfx) || x.Key.Protocol != m.Protocol || x.Key.Port != m.Port) {
				continue
			}
			for _, a := range x.ASes {
				var flags uint8
				if a.Used {
					flags = 1 // LB_AS_FLAGS_USED
				}
				out = append(out, &lb.LbAsDetails{
					Vip:    lb_types.LbVip{Pfx: vppaddr.Prefix(x.Key.Prefix), Protocol: ip_types.IPProto(x.Key.Protocol), Port: x.Key.Port},
					AppSrv: vppaddr.Address(a.Address), Flags: flags, InUseSince: uint32(a.LastUsed.Unix()),
				})
			}
		}
		return out
	}
	return nil
}

func (v *VPP) lbConf(m *lb.LbConf) int32 {
	// ~0 keeps the current value (api.c).
	sticky, timeout := m.StickyBucketsPerCore, m.FlowTimeout
	if sticky == ^uint32(0) {
		sticky = v.conf.StickyBuckets
	}
	if timeout == ^uint32(0) {
		timeout = v.conf.FlowTimeout
	}
	if !isPow2(sticky) {
		return ErrInvalidMemorySize
	}
	v.conf = Conf{IP4Src: netip.AddrFrom4(m.IP4SrcAddress), StickyBuckets: sticky, FlowTimeout: timeout, Calls: v.conf.Calls + 1}
	return 0
}

func isPow2(n uint32) bool { return n != 0 && n&(n-1) == 0 }

// key normalizes a request's VIP as api.c does: a protocol other than
// TCP or UDP makes an all-port VIP.
func key(p ip_types.AddressWithPrefix, proto uint8, port uint16) vppaddr.VIPKey {
	if proto != vppaddr.TCP && proto != vppaddr.UDP {
		proto, port = vppaddr.AnyProtocol, 0
	}
	return vppaddr.VIPKey{Prefix: vppaddr.PrefixOf(p), Protocol: proto, Port: port}
}

func encapIs4(e lb_types.LbEncapType) bool {
	return e == lb_types.LB_API_ENCAP_TYPE_GRE4 || e == lb_types.LB_API_ENCAP_TYPE_L3DSR || e == lb_types.LB_API_ENCAP_TYPE_NAT4
}

// addDelVIP follows lb_vip_add and lb_vip_del.
func (v *VPP) addDelVIP(m *lb.LbAddDelVip) int32 {
	k := key(m.Pfx, m.Protocol, m.Port)
	if !k.Prefix.IsValid() {
		return ErrInvalidArgument
	}
	if m.IsDel {
		i := slices.IndexFunc(v.vips, func(x *VIP) bool { return x.Key == k })
		if i < 0 {
			return ErrNoSuchEntry
		}
		// lb_vip_del removes the VIP's ASes itself (without a flush).
		v.vips = slices.Delete(v.vips, i, i+1)
		return 0
	}
	if v.find(k) != nil {
		return ErrValueExist
	}
	for _, x := range v.vips {
		if x.Key.Prefix != k.Prefix {
			continue
		}
		// No per-port VIP next to an all-port one for the same prefix,
		// and the other way round.
		if (k.Port != 0 && x.Key.Port == 0) || (k.Port == 0 && x.Key.Port != 0) {
			return ErrValueExist
		}
		// Every VIP of a prefix has the same type.
		if x.Encap != m.Encap {
			return ErrInvalidArgument
		}
	}
	if !isPow2(m.NewFlowsTableLength) {
		return ErrInvalidMemorySize
	}
	// An IPv4 VIP may use gre4, gre6, l3dsr or nat4; an IPv6 one gre4,
	// gre6 or nat6.
	ok := m.Encap != lb_types.LB_API_ENCAP_TYPE_NAT6
	if !k.Prefix.Addr().Is4() {
		ok = m.Encap == lb_types.LB_API_ENCAP_TYPE_GRE4 || m.Encap == lb_types.LB_API_ENCAP_TYPE_GRE6 || m.Encap == lb_types.LB_API_ENCAP_TYPE_NAT6
	}
	if !ok {
		return ErrInvalidAddressFamily
	}
	if m.Encap == lb_types.LB_API_ENCAP_TYPE_L3DSR && m.Dscp >= 64 {
		return ErrValueExist // sic: lb_vip_add answers VALUE_EXIST
	}
	x := &VIP{Key: k, Encap: m.Encap, FlowTableLength: m.NewFlowsTableLength}
	switch m.Encap {
	case lb_types.LB_API_ENCAP_TYPE_L3DSR:
		x.Dscp = m.Dscp & 0x3f
	case lb_types.LB_API_ENCAP_TYPE_NAT4, lb_types.LB_API_ENCAP_TYPE_NAT6:
		x.SrvType, x.TargetPort = m.Type, m.TargetPort
	}
	v.vips = append(v.vips, x)
	return 0
}

// addDelAS follows lb_vip_add_ass and lb_vip_del_ass.
func (v *VPP) addDelAS(m *lb.LbAddDelAs) int32 {
	x := v.find(key(m.Pfx, m.Protocol, m.Port))
	if x == nil {
		return ErrNoSuchEntry
	}
	addr := vppaddr.Addr(m.AsAddress)
	now := v.now()
	v.collect(x, now)
	i := slices.IndexFunc(x.ASes, func(a AS) bool { return a.Address == addr })
	if m.IsDel {
		if i < 0 {
			return ErrNoSuchEntry
		}
		x.ASes[i].Used, x.ASes[i].LastUsed, x.ASes[i].Flushed = false, now, m.IsFlush
		return 0
	}
	if addr.Is4() != encapIs4(x.Encap) {
		return ErrInvalidAddressFamily
	}
	if i >= 0 {
		if x.ASes[i].Used {
			return ErrValueExist
		}
		// An AS still draining is reused.
		x.ASes[i].Used, x.ASes[i].Flushed = true, false
		return 0
	}
	x.ASes = append(x.ASes, AS{Address: addr, Used: true, LastUsed: now})
	return 0
}

// collect drops unused ASes whose flows have timed out
// (lb_vip_garbage_collection).
func (v *VPP) collect(x *VIP, now time.Time) {
	timeout := time.Duration(v.conf.FlowTimeout) * time.Second
	x.ASes = slices.DeleteFunc(x.ASes, func(a AS) bool { return !a.Used && now.Sub(a.LastUsed) > timeout })
}
