package portnet

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// tableName is the nftables table (family ip) of a port namespace's ACL.
const tableName = "unyo"

// applyRules replaces the port namespace's ACL in one nftables
// transaction:
//
//	forward (policy drop): host0 -> cmp0 to the compute's /32,
//	                       cmp0 -> host0 from the compute's /32
//	input   (policy drop): lo; replies (ct established,related);
//	                       from the compute's /32 on cmp0 to the gateway
//	                       and the metadata address;
//	                       from host0 to the compute's /32 (a process in
//	                       the namespace itself) and ICMP to the link
//	                       address.
//
// A compute that forges its source address is dropped both ways, which is
// what lets the metadata server trust the source address.
func applyRules(ns netns.NsHandle, p Port) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: tableName})
	c.FlushTable(t)
	drop := nftables.ChainPolicyDrop
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	rule := func(ch *nftables.Chain, parts ...[]expr.Any) {
		var e []expr.Any
		for _, p := range parts {
			e = append(e, p...)
		}
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e})
	}
	rule(fwd, iif(nsHostLink), oif(nsComputeLink), daddr(p.Address))
	rule(fwd, iif(nsComputeLink), oif(nsHostLink), saddr(p.Address))
	rule(in, iif("lo"))
	rule(in, ctReply())
	rule(in, iif(nsComputeLink), saddr(p.Address), daddr(Metadata))
	rule(in, iif(nsComputeLink), saddr(p.Address), daddr(Gateway))
	rule(in, iif(nsHostLink), daddr(p.Address))
	rule(in, iif(nsHostLink), daddr(p.Link), icmpProto())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables rules: %w", err)
	}
	return nil
}

// hasRules says whether the namespace holds the port's table (tests).
func hasRules(ns netns.NsHandle) (bool, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return false, err
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		if t.Name == tableName {
			return true, nil
		}
	}
	return false, nil
}

func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func iif(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n)}}
}

func oif(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n)}}
}

// addrMatch matches the IPv4 header's source (offset 12) or destination
// (16) address.
func addrMatch(offset uint32, a netip.Addr) []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()}}
}

func saddr(a netip.Addr) []expr.Any { return addrMatch(12, a) }
func daddr(a netip.Addr) []expr.Any { return addrMatch(16, a) }

func icmpProto() []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMP}}}
}

func ctReply() []expr.Any {
	return []expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)}}
}
