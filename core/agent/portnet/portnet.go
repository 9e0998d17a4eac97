// Package portnet wires a node's compute ports: one network namespace per
// port, between the node (the agent's own namespace) and the compute.
//
//	node ns                 port ns (unyo-<node>-<compute>)          compute
//	hv (169.254.0.1/32) ── veth ── host0 (link address/32)
//	                               cmp0 (169.254.1.1/32, 169.254.1.2/32) ── eth0 (compute/32)
//
// The node routes the compute's /32 via the port's link address (one of
// 169.254.32.0/19, which the cluster allocates per node); the port
// namespace routes it to the compute link and everything else back to the
// node; the compute's gateway is 169.254.1.1 and the node's agent answers
// on 169.254.1.2 inside the port namespace (metadata and proxy). The
// compute link is a veth whose far end is the container's eth0 (Attach
// with a netns path), a VM's tap moved in (AttachTap), or nothing for a
// process that runs in the port namespace itself (AttachLocal: the
// compute's /32 is then on the namespace's lo).
//
// nftables rules inside each port namespace are its ACL: forwarded traffic
// only to and from the compute's /32, and the gateway and metadata
// addresses only from the compute.
//
// Everything is done through netlink from Go; nothing shells out. A port
// namespace holds the whole port: deleting it (Remove) deletes its links,
// their peers (the container's eth0, the node's hv) and the node's routes
// through them.
package portnet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// The fixed addresses of every port.
var (
	// LinkRange is the range a node's port link addresses come from
	// (8,192 per node; the cluster allocates them).
	LinkRange = netip.MustParsePrefix("169.254.32.0/19")
	// Gateway is the compute's default gateway (on cmp0).
	Gateway = netip.MustParseAddr("169.254.1.1")
	// Metadata is where the node's agent answers a compute (on cmp0).
	Metadata = netip.MustParseAddr("169.254.1.2")
	// NodeSide is the address of every port's node-side link (hv): the
	// port namespace's default gateway. The same address on every hv is
	// fine, as each is only ever reached over its own link.
	NodeSide = netip.MustParseAddr("169.254.0.1")
)

// The links' names inside a port namespace and a container.
const (
	nsHostLink    = "host0"
	nsComputeLink = "cmp0"
	containerLink = "eth0"
	runDir        = "/run/netns"
	maxComputeLen = 40
)

// ErrForeign is a namespace of a port's name that is not a port namespace
// (a clash with something else on the node).
var ErrForeign = errors.New("a network namespace of that name exists and is not a unyo port")

// Port is one compute port.
type Port struct {
	// Compute names the compute (the namespace's name derives from it).
	Compute string
	// Link is the port's link address (from LinkRange).
	Link netip.Addr
	// Address is the compute's own address (its /32 from the Network's IPAM).
	Address netip.Addr
}

func (p Port) validate() error {
	switch {
	case p.Compute == "":
		return errors.New("port: no compute")
	case !p.Link.Is4() || !LinkRange.Contains(p.Link):
		return fmt.Errorf("port of %s: link address %q is not in %s", p.Compute, p.Link, LinkRange)
	case !p.Address.Is4():
		return fmt.Errorf("port of %s: compute address %q is not IPv4", p.Compute, p.Address)
	}
	return nil
}

// Manager creates and removes the port namespaces of one node.
type Manager struct {
	prefix string
	// host is the node's namespace (where hv links and the node's routes
	// live): the agent's own, or another one (tests).
	host netns.NsHandle
}

// New returns the manager of node's ports; their namespaces are named
// unyo-<hash of node>-..., so that the agents of several nodes on one
// machine (tests) never take each other's. host is the node's namespace;
// netns.None() means the caller's. Close releases it.
func New(node string, host netns.NsHandle) (*Manager, error) {
	if node == "" {
		return nil, errors.New("portnet: no node name")
	}
	if !host.IsOpen() {
		runtime.LockOSThread()
		h, err := netns.Get()
		runtime.UnlockOSThread()
		if err != nil {
			return nil, fmt.Errorf("portnet: the agent's network namespace: %w", err)
		}
		host = h
	} else {
		fd, err := dup(host)
		if err != nil {
			return nil, err
		}
		host = fd
	}
	return &Manager{prefix: "unyo-" + hash(node, 6) + "-", host: host}, nil
}

// Close releases the manager's handle on the node's namespace.
func (m *Manager) Close() error { return m.host.Close() }

// Name is the namespace name of compute's port: bounded, readable, and
// collision-safe (a hash of the whole compute name ends it).
func (m *Manager) Name(compute string) string {
	var b strings.Builder
	for _, r := range compute {
		if b.Len() >= maxComputeLen {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return m.prefix + b.String() + "-" + hash(compute, 8)
}

// Path is the namespace file of compute's port (what a process joins).
func (m *Manager) Path(compute string) string { return filepath.Join(runDir, m.Name(compute)) }

// hostLinkName is the node-side link of a namespace (IFNAMSIZ bounds it to
// 15 bytes, so it is a hash).
func hostLinkName(ns string) string { return "uh" + hash(ns, 12) }

// List returns the namespace names of this node's ports.
func (m *Manager) List() ([]string, error) {
	ents, err := os.ReadDir(runDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list port namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), m.prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func hash(s string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())[:n]
}
