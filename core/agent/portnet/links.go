package portnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Ensure creates compute's port namespace with its node link, addresses,
// routes and ACL rules, or brings an existing one to that state (it is
// idempotent: an agent that restarts runs it again). The compute link is
// added by one of the Attach calls.
func (m *Manager) Ensure(p Port) error {
	if err := p.validate(); err != nil {
		return err
	}
	name := m.Name(p.Compute)
	ns, created, err := m.openOrCreate(name)
	if err != nil {
		return fmt.Errorf("port namespace %s of %s: %w", name, p.Compute, err)
	}
	defer ns.Close()
	if err := m.wire(ns, name, p); err != nil {
		if created {
			_ = m.remove(name)
		}
		return fmt.Errorf("port namespace %s of %s: %w", name, p.Compute, err)
	}
	return nil
}

// openOrCreate opens the namespace name, or creates it (with forwarding on
// inside it). An existing one must be a port namespace (only lo, or our
// host0 link).
func (m *Manager) openOrCreate(name string) (netns.NsHandle, bool, error) {
	ns, err := netns.GetFromName(name)
	if err == nil {
		if err := checkOurs(ns); err != nil {
			ns.Close()
			return netns.None(), false, err
		}
		return ns, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return netns.None(), false, err
	}
	err = m.inThread(func() error {
		n, err := netns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		ns = n
		// The thread is in the new namespace until inThread returns:
		// /proc/sys/net is the namespace's own here.
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
	})
	if err != nil {
		if ns.IsOpen() {
			ns.Close()
			_ = netns.DeleteNamed(name)
		}
		return netns.None(), false, err
	}
	return ns, true, nil
}

// checkOurs refuses a namespace holding links a port never has.
func checkOurs(ns netns.NsHandle) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		switch l.Attrs().Name {
		case "lo", nsHostLink, nsComputeLink:
		default:
			return fmt.Errorf("%w (it holds link %s)", ErrForeign, l.Attrs().Name)
		}
	}
	return nil
}

// wire makes the node link, its addresses and routes, and the rules.
func (m *Manager) wire(ns netns.NsHandle, name string, p Port) error {
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer nh.Close()
	hh, err := netlink.NewHandleAt(m.host)
	if err != nil {
		return err
	}
	defer hh.Close()
	if err := setUp(nh, "lo"); err != nil {
		return err
	}
	hv := hostLinkName(name)
	host, err := hh.LinkByName(hv)
	if err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hv}, PeerName: nsHostLink, PeerNamespace: netlink.NsFd(int(ns))}
		if err := hh.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", hv, nsHostLink, err)
		}
		if host, err = hh.LinkByName(hv); err != nil {
			return err
		}
	}
	inner, err := nh.LinkByName(nsHostLink)
	if err != nil {
		return fmt.Errorf("link %s: %w", nsHostLink, err)
	}
	if err := addAddr(hh, host, NodeSide); err != nil {
		return err
	}
	if err := addAddr(nh, inner, p.Link); err != nil {
		return err
	}
	if err := hh.LinkSetUp(host); err != nil {
		return fmt.Errorf("set %s up: %w", hv, err)
	}
	if err := nh.LinkSetUp(inner); err != nil {
		return fmt.Errorf("set %s up: %w", nsHostLink, err)
	}
	// The node: the link address on hv, the compute's /32 through it.
	if err := linkRoute(hh, host, p.Link); err != nil {
		return err
	}
	if err := viaRoute(hh, host, prefix32(p.Address), p.Link); err != nil {
		return err
	}
	// The port namespace: the node side on host0, everything else through it.
	if err := linkRoute(nh, inner, NodeSide); err != nil {
		return err
	}
	if err := viaRoute(nh, inner, netip.MustParsePrefix("0.0.0.0/0"), NodeSide); err != nil {
		return err
	}
	return applyRules(ns, p)
}

// Attach links compute's port to a container: a veth pair from the port
// namespace whose far end becomes eth0 in the container's namespace
// (target, a path such as /proc/PID/ns/net) with the compute's /32, a
// route to the gateway on the link and the default route through it.
func (m *Manager) Attach(p Port, target string) error {
	return m.inPort(p, func(_ netns.NsHandle, nh *netlink.Handle) error { return attachVeth(nh, p, target) })
}

func attachVeth(nh *netlink.Handle, p Port, target string) error {
	tns, err := netns.GetFromPath(target)
	if err != nil {
		return fmt.Errorf("port of %s: the compute's namespace %s: %w", p.Compute, target, err)
	}
	defer tns.Close()
	th, err := netlink.NewHandleAt(tns)
	if err != nil {
		return err
	}
	defer th.Close()
	if _, err := nh.LinkByName(nsComputeLink); err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: nsComputeLink}, PeerName: containerLink, PeerNamespace: netlink.NsFd(int(tns))}
		if err := nh.LinkAdd(veth); err != nil {
			return fmt.Errorf("port of %s: add veth %s/%s into %s: %w", p.Compute, nsComputeLink, containerLink, target, err)
		}
	}
	if err := computeSide(nh, p); err != nil {
		return fmt.Errorf("port of %s: %w", p.Compute, err)
	}
	eth, err := th.LinkByName(containerLink)
	if err != nil {
		return fmt.Errorf("port of %s: the compute's %s: %w", p.Compute, containerLink, err)
	}
	if err := setUp(th, "lo"); err != nil {
		return err
	}
	if err := addAddr(th, eth, p.Address); err != nil {
		return err
	}
	if err := th.LinkSetUp(eth); err != nil {
		return fmt.Errorf("port of %s: set the compute's %s up: %w", p.Compute, containerLink, err)
	}
	if err := linkRoute(th, eth, Gateway); err != nil {
		return err
	}
	return viaRoute(th, eth, netip.MustParsePrefix("0.0.0.0/0"), Gateway)
}

// AttachTap moves a VM's tap (a link in the node's namespace) into
// compute's port namespace as its compute link. The guest configures its
// own /32 with the gateway 169.254.1.1.
func (m *Manager) AttachTap(p Port, tap string) error {
	return m.inPort(p, func(ns netns.NsHandle, nh *netlink.Handle) error { return m.moveTap(ns, nh, p, tap) })
}

func (m *Manager) moveTap(ns netns.NsHandle, nh *netlink.Handle, p Port, tap string) error {
	if _, err := nh.LinkByName(nsComputeLink); err != nil {
		hh, err := netlink.NewHandleAt(m.host)
		if err != nil {
			return err
		}
		defer hh.Close()
		l, err := hh.LinkByName(tap)
		if err != nil {
			return fmt.Errorf("port of %s: tap %s: %w", p.Compute, tap, err)
		}
		if err := hh.LinkSetNsFd(l, int(ns)); err != nil {
			return fmt.Errorf("port of %s: move tap %s into %s: %w", p.Compute, tap, m.Name(p.Compute), err)
		}
		l, err = nh.LinkByName(tap)
		if err != nil {
			return fmt.Errorf("port of %s: tap %s after the move: %w", p.Compute, tap, err)
		}
		// A link is renamed only while down.
		if err := nh.LinkSetDown(l); err != nil {
			return err
		}
		if err := nh.LinkSetName(l, nsComputeLink); err != nil {
			return fmt.Errorf("port of %s: rename tap %s: %w", p.Compute, tap, err)
		}
	}
	if err := computeSide(nh, p); err != nil {
		return fmt.Errorf("port of %s: %w", p.Compute, err)
	}
	return nil
}

// AttachLocal is the port of a process that runs in the port namespace
// itself (provider-exec): the compute's /32 and the metadata address are
// on the namespace's lo, so the process answers on its own address and
// reaches the agent on 169.254.1.2 without a link of its own.
func (m *Manager) AttachLocal(p Port) error {
	return m.inPort(p, func(_ netns.NsHandle, nh *netlink.Handle) error { return addLocal(nh, p) })
}

func addLocal(nh *netlink.Handle, p Port) error {
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return err
	}
	for _, a := range []netip.Addr{p.Address, Metadata} {
		if err := addAddr(nh, lo, a); err != nil {
			return fmt.Errorf("port of %s: %w", p.Compute, err)
		}
	}
	return nil
}

// computeSide puts the gateway and metadata addresses on cmp0, sets it up
// and routes the compute's /32 through it.
func computeSide(nh *netlink.Handle, p Port) error {
	l, err := nh.LinkByName(nsComputeLink)
	if err != nil {
		return err
	}
	for _, a := range []netip.Addr{Gateway, Metadata} {
		if err := addAddr(nh, l, a); err != nil {
			return err
		}
	}
	if err := nh.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", nsComputeLink, err)
	}
	return linkRoute(nh, l, p.Address)
}

// inPort runs fn with p's port namespace and a netlink handle in it (the
// namespace must exist: Ensure first).
func (m *Manager) inPort(p Port, fn func(ns netns.NsHandle, nh *netlink.Handle) error) error {
	if err := p.validate(); err != nil {
		return err
	}
	ns, nh, err := m.open(p.Compute)
	if err != nil {
		return err
	}
	defer ns.Close()
	defer nh.Close()
	return fn(ns, nh)
}

// open returns compute's port namespace (it must exist: Ensure first).
func (m *Manager) open(compute string) (netns.NsHandle, *netlink.Handle, error) {
	name := m.Name(compute)
	ns, err := netns.GetFromName(name)
	if err != nil {
		return netns.None(), nil, fmt.Errorf("port of %s: namespace %s: %w", compute, name, err)
	}
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return netns.None(), nil, err
	}
	return ns, nh, nil
}

// Remove deletes compute's port: its links (and so their peers: the node's
// hv with its routes, the container's eth0) and its namespace. Removing a
// port that does not exist succeeds.
func (m *Manager) Remove(compute string) error {
	return m.remove(m.Name(compute))
}

func (m *Manager) remove(name string) error {
	// The links go first and explicitly: the namespace itself lives on
	// while anything holds it open (a listener socket, a process), and
	// its links with it.
	if ns, err := netns.GetFromName(name); err == nil {
		if err := checkOurs(ns); err != nil {
			ns.Close()
			return fmt.Errorf("remove port namespace %s: %w", name, err)
		}
		if nh, err := netlink.NewHandleAt(ns); err == nil {
			for _, ln := range []string{nsComputeLink, nsHostLink} {
				if l, err := nh.LinkByName(ln); err == nil {
					if err := nh.LinkDel(l); err != nil {
						nh.Close()
						ns.Close()
						return fmt.Errorf("remove port namespace %s: delete %s: %w", name, ln, err)
					}
				}
			}
			nh.Close()
		}
		ns.Close()
	}
	if hh, err := netlink.NewHandleAt(m.host); err == nil {
		if l, err := hh.LinkByName(hostLinkName(name)); err == nil {
			_ = hh.LinkDel(l)
		}
		hh.Close()
	}
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove port namespace %s: %w", name, err)
	}
	return nil
}

// Prune removes every port namespace of this node whose compute keep does
// not name (the agent's reconcile on start and after each assignment
// list), and returns the names removed.
func (m *Manager) Prune(keep map[string]bool) ([]string, error) {
	names, err := m.List()
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for c := range keep {
		wanted[m.Name(c)] = true
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if wanted[n] {
			continue
		}
		if err := m.remove(n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// Listen opens a TCP listener inside compute's port namespace (on
// 169.254.1.2:port for the metadata server): a socket keeps the namespace
// it was created in.
func (m *Manager) Listen(compute string, addr string) (net.Listener, error) {
	ns, err := netns.GetFromPath(filepath.Join(runDir, m.Name(compute)))
	if err != nil {
		return nil, fmt.Errorf("port of %s: %w", compute, err)
	}
	defer ns.Close()
	var l net.Listener
	err = m.inNS(ns, func() error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("port of %s: listen on %s: %w", compute, addr, err)
	}
	return l, nil
}

// inThread runs fn on a locked thread and puts the thread back into the
// namespace it was in after it; a thread that cannot go back is left
// locked, so the runtime retires it rather than reuse it in another
// namespace.
func (m *Manager) inThread(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("the thread's namespace: %w", err)
	}
	defer orig.Close()
	err = fn()
	if serr := netns.Set(orig); serr != nil {
		return errors.Join(err, fmt.Errorf("return to the agent's namespace: %w", serr))
	}
	runtime.UnlockOSThread()
	return err
}

// inNS runs fn with its thread in ns.
func (m *Manager) inNS(ns netns.NsHandle, fn func() error) error {
	return m.inThread(func() error {
		if err := netns.Set(ns); err != nil {
			return err
		}
		return fn()
	})
}

func setUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	return h.LinkSetUp(l)
}

func prefix32(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, 32) }

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// addAddr puts a/32 on l (already there is fine).
func addAddr(h *netlink.Handle, l netlink.Link, a netip.Addr) error {
	err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(prefix32(a))})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s/32 to %s: %w", a, l.Attrs().Name, err)
	}
	return nil
}

// linkRoute routes a/32 straight onto l.
func linkRoute(h *netlink.Handle, l netlink.Link, a netip.Addr) error {
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipnet(prefix32(a)), Scope: netlink.SCOPE_LINK}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s/32 dev %s: %w", a, l.Attrs().Name, err)
	}
	return nil
}

// viaRoute routes dst via gw on l.
func viaRoute(h *netlink.Handle, l netlink.Link, dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipnet(dst), Gw: gw.AsSlice(), Flags: int(netlink.FLAG_ONLINK)}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", dst, gw, l.Attrs().Name, err)
	}
	return nil
}

func dup(h netns.NsHandle) (netns.NsHandle, error) {
	fd, err := unix.Dup(int(h))
	if err != nil {
		return netns.None(), fmt.Errorf("portnet: dup namespace handle: %w", err)
	}
	return netns.NsHandle(fd), nil
}

// Attachment is how a port is attached to its compute.
type Attachment int

const (
	// NotAttached: no compute link yet (or the namespace is missing, or
	// the link went with its peer: a container that restarted has a new
	// namespace, and the agent attaches it again).
	NotAttached Attachment = iota
	// LinkAttached: cmp0 links the compute (a container's veth, a tap).
	LinkAttached
	// LocalAttached: the compute's /32 is on the namespace's lo (a
	// process running in the namespace itself).
	LocalAttached
)

// Attached says how compute's port is attached.
func (m *Manager) Attached(p Port) Attachment {
	ns, nh, err := m.open(p.Compute)
	if err != nil {
		return NotAttached
	}
	defer ns.Close()
	defer nh.Close()
	if _, err := nh.LinkByName(nsComputeLink); err == nil {
		return LinkAttached
	}
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return NotAttached
	}
	addrs, err := nh.AddrList(lo, netlink.FAMILY_V4)
	if err != nil {
		return NotAttached
	}
	for _, a := range addrs {
		if a.IP.Equal(p.Address.AsSlice()) {
			return LocalAttached
		}
	}
	return NotAttached
}
