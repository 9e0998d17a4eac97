// Package dataplane loads unyo's XDP load balancer (lb.c), keeps its maps
// and links pinned in a bpffs directory so that they outlive the plugin
// process, and writes services into the maps in place: a service's Maglev
// table is diffed against the one in the kernel and only the buckets that
// change are written, so flows whose bucket keeps its backend are never
// disturbed and the program is never reloaded to change backends.
package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/maglev"
	"github.com/unyo-ops/unyo/plugins/provider-xdp/nsutil"
)

// Sizes of the kernel tables; lb.c has the same numbers.
const (
	// RingSize is the number of Maglev buckets per service: a prime 64
	// times MaxBackends, so that even a full service gives each backend
	// 64 buckets (its share is then within ~1.5% of the ideal) while a
	// table stays 128 KiB of kernel memory (16381 8-byte array slots).
	// 65537, as Katran uses, would quadruple that for backends counts
	// unyo's services do not reach.
	RingSize = 16381
	// MaxServices is how many VIP:port:protocol entries a node holds.
	MaxServices = 64
	// MaxBackends is how many backends one service holds.
	MaxBackends = 256
	noBackend   = 0xffffffff
)

// Pin names in the pin directory besides the maps (which keep their names).
const (
	pinXDP = "unyo_xdp_link"
	pinTCX = "unyo_tcx_link"
)

// Proto is an IP protocol number.
type Proto uint8

// The protocols a service can balance.
const (
	TCP Proto = unix.IPPROTO_TCP
	UDP Proto = unix.IPPROTO_UDP
)

// ParseProto reads "tcp" or "udp".
func ParseProto(s string) (Proto, error) {
	switch s {
	case "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	}
	return 0, fmt.Errorf("protocol %q is neither tcp nor udp", s)
}

func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return strconv.Itoa(int(p))
}

// Key is what a packet is matched on.
type Key struct {
	VIP   netip.Addr
	Port  uint16
	Proto Proto
}

func (k Key) String() string { return fmt.Sprintf("%s:%d/%s", k.VIP, k.Port, k.Proto) }

// Backend is one backend of a service.
type Backend struct {
	Addr   netip.Addr
	Weight int
	// InTable says whether it takes new flows (it is healthy); a backend
	// out of the table keeps its counters and its reverse-NAT entry.
	InTable bool
}

// Service is one VIP:port:protocol and its backends.
type Service struct {
	Key
	// TargetPort is the backends' port.
	TargetPort uint16
	Backends   []Backend
}

// Mode is how XDP attaches.
type Mode string

// The XDP modes.
const (
	// Generic runs the program on the kernel's skb path: works on every
	// interface.
	Generic Mode = "generic"
	// Native runs it in the driver: faster; on veth the peer must run an
	// XDP program too or redirected frames are lost.
	Native Mode = "native"
)

// Options say where the program runs and where its pins live.
type Options struct {
	Interface string
	// Netns is the path of the interface's network namespace; "" for the
	// caller's.
	Netns  string
	PinDir string
	Mode   Mode
	// Detached programs the maps but never attaches or pins anything
	// (unit tests and benchmarks of the program alone).
	Detached bool
}

// Dataplane is the loaded program and its maps.
type Dataplane struct {
	opts     Options
	objs     lbObjects
	xdp, tcx link.Link
	ring     *ebpf.Memory
	backends *ebpf.Memory
	ncpu     int
}

// Open loads the program. When the pin directory holds the maps of an
// earlier run they are reused with their contents, and the pinned links
// (the attachment) are taken over; otherwise nothing is pinned or attached
// until Apply has a service.
func Open(opts Options) (*Dataplane, error) {
	if opts.Mode == "" {
		opts.Mode = Generic
	}
	spec, err := loadLb()
	if err != nil {
		return nil, err
	}
	pinned := exists(filepath.Join(opts.PinDir, lbMapServices))
	var copts ebpf.CollectionOptions
	if pinned {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinByName
		}
		copts.Maps.PinPath = opts.PinDir
	}
	d := &Dataplane{opts: opts}
	if err := spec.LoadAndAssign(&d.objs, &copts); err != nil {
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("the maps pinned in %s were made by another version of the program; delete the load balancers (or remove the pins) first: %w", opts.PinDir, err)
		}
		return nil, fmt.Errorf("loading the XDP program: %w", err)
	}
	if d.ncpu, err = ebpf.PossibleCPU(); err != nil {
		d.Close()
		return nil, err
	}
	if d.ring, err = d.objs.Ring.Memory(); err != nil {
		d.Close()
		return nil, fmt.Errorf("mapping the Maglev tables: %w", err)
	}
	if d.backends, err = d.objs.Backends.Memory(); err != nil {
		d.Close()
		return nil, fmt.Errorf("mapping the backend table: %w", err)
	}
	if pinned {
		d.xdp = openLink(filepath.Join(opts.PinDir, pinXDP), func(i *link.Info) uint32 {
			if x := i.XDP(); x != nil {
				return x.Ifindex
			}
			return 0
		})
		d.tcx = openLink(filepath.Join(opts.PinDir, pinTCX), func(i *link.Info) uint32 {
			if x := i.TCX(); x != nil {
				return x.Ifindex
			}
			return 0
		})
		// A new plugin version brings its program to the running
		// attachment: swapped atomically, over the same maps.
		upgrade(d.xdp, d.objs.UnyoLb)
		upgrade(d.tcx, d.objs.UnyoLbReply)
	}
	return d, nil
}

// upgrade puts p behind the link when the program there now differs
// (another tag); when that cannot be done the old program stays, which
// reads the same maps.
func upgrade(l link.Link, p *ebpf.Program) {
	if l == nil {
		return
	}
	info, err := l.Info()
	if err != nil {
		return
	}
	old, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		return
	}
	defer old.Close()
	oi, err1 := old.Info()
	ni, err2 := p.Info()
	if err1 != nil || err2 != nil || oi.Tag == ni.Tag {
		return
	}
	_ = l.Update(p)
}

// openLink opens a pinned link; one whose interface is gone (defunct) is
// unpinned and dropped, so that attach makes a new one.
func openLink(path string, ifindex func(*link.Info) uint32) link.Link {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return nil
	}
	if info, err := l.Info(); err != nil || ifindex(info) == 0 {
		_ = l.Unpin()
		_ = l.Close()
		return nil
	}
	return l
}

// Close releases this process's handles; pinned maps and links, and with
// them the attached program, stay.
func (d *Dataplane) Close() error {
	for _, l := range []link.Link{d.xdp, d.tcx} {
		if l != nil {
			_ = l.Close()
		}
	}
	return d.objs.Close()
}

// Stale says whether the pins changed under this process (another plugin
// process pinned maps, or removed them, since Open): then Open again.
func (d *Dataplane) Stale() bool {
	if d.opts.Detached {
		return false
	}
	path := filepath.Join(d.opts.PinDir, lbMapServices)
	if !exists(path) {
		return d.objs.Services.IsPinned() || d.xdp != nil
	}
	if !d.objs.Services.IsPinned() {
		return true
	}
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return true
	}
	defer m.Close()
	a, err1 := m.Info()
	b, err2 := d.objs.Services.Info()
	if err1 != nil || err2 != nil {
		return true
	}
	ida, _ := a.ID()
	idb, _ := b.ID()
	return ida != idb || (d.xdp == nil) != !exists(filepath.Join(d.opts.PinDir, pinXDP))
}

// Attached says whether the program is attached to the interface.
func (d *Dataplane) Attached() bool { return d.xdp != nil }

// XDPProgram and ReplyProgram are the loaded programs (for tests and
// benchmarks: Program.Test).
func (d *Dataplane) XDPProgram() *ebpf.Program   { return d.objs.UnyoLb }
func (d *Dataplane) ReplyProgram() *ebpf.Program { return d.objs.UnyoLbReply }

// AttachedProgramID is the id of the XDP program attached to the
// interface, 0 if none (anyone's, not only ours).
func (d *Dataplane) AttachedProgramID() (uint32, error) {
	var id uint32
	err := nsutil.Do(d.opts.Netns, func() error {
		l, err := netlink.LinkByName(d.opts.Interface)
		if err != nil {
			return fmt.Errorf("interface %s: %w", d.opts.Interface, err)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = x.ProgId
		}
		return nil
	})
	return id, err
}

// Apply makes the maps hold exactly services (and attaches the program when
// there are any, detaches it and removes every pin when there are none).
func (d *Dataplane) Apply(services []Service) error {
	if len(services) > MaxServices {
		return fmt.Errorf("%d VIP ports asked for, this node's XDP tables hold %d", len(services), MaxServices)
	}
	current := map[lbSvcKey]lbSvc{}
	var k lbSvcKey
	var v lbSvc
	it := d.objs.Services.Iterate()
	for it.Next(&k, &v) {
		current[k] = v
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the service table: %w", err)
	}
	used := map[uint32]bool{}
	want := map[lbSvcKey]Service{}
	for _, s := range services {
		if len(s.Backends) > MaxBackends {
			return fmt.Errorf("service %s has %d backends, at most %d", s.Key, len(s.Backends), MaxBackends)
		}
		want[svcKey(s.Key)] = s
	}
	for k, v := range current {
		if _, ok := want[k]; ok {
			used[v.Slot] = true
		}
	}
	// Services that go: unmatched first, so no packet reaches a slot
	// while it is cleared.
	var freed []uint32
	for k, v := range current {
		if _, ok := want[k]; !ok {
			if err := d.objs.Services.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing service %s: %w", keyOf(k), err)
			}
			freed = append(freed, v.Slot)
		}
	}
	keys := make([]lbSvcKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyOf(keys[i]).String() < keyOf(keys[j]).String() })
	for _, k := range keys {
		s := want[k]
		cur, had := current[k]
		slot := cur.Slot
		if !had {
			slot = freeSlot(used)
			used[slot] = true
		}
		if err := d.program(slot, s, !had); err != nil {
			return fmt.Errorf("service %s: %w", s.Key, err)
		}
		nv := lbSvc{Slot: slot, TargetPort: htons(s.TargetPort)}
		if !had || cur != nv {
			if err := d.objs.Services.Update(k, nv, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("service %s: %w", s.Key, err)
			}
		}
	}
	for _, slot := range freed {
		if !used[slot] {
			if err := d.clearBackends(slot); err != nil {
				return err
			}
		}
	}
	if err := d.syncReverse(services); err != nil {
		return err
	}
	switch {
	case d.opts.Detached:
		return nil
	case len(services) == 0:
		return d.detach()
	}
	return d.attach()
}

func freeSlot(used map[uint32]bool) uint32 {
	for i := uint32(0); ; i++ {
		if !used[i] {
			return i
		}
	}
}

// program writes one service's backends and Maglev table into slot.
func (d *Dataplane) program(slot uint32, s Service, fresh bool) error {
	base := slot * MaxBackends
	// Backend indexes: an address keeps its index (and its counters);
	// a new one takes the lowest free index, with its counters zeroed.
	have := map[netip.Addr]uint32{}
	taken := make([]bool, MaxBackends)
	if fresh {
		// Whatever an interrupted earlier run left in the slot goes.
		if err := d.clearBackends(slot); err != nil {
			return err
		}
	} else {
		for i := range uint32(MaxBackends) {
			if a := d.backendAt(base + i); a.IsValid() {
				have[a] = i
				taken[i] = true
			}
		}
	}
	idx := make([]uint32, len(s.Backends))
	keep := map[uint32]bool{}
	for i, b := range s.Backends {
		if j, ok := have[b.Addr]; ok {
			idx[i] = j
			keep[j] = true
		}
	}
	for i, b := range s.Backends {
		if _, ok := have[b.Addr]; ok {
			continue
		}
		j, ok := freeIndex(taken, have, keep)
		if !ok {
			return fmt.Errorf("no free backend index for %s", b.Addr)
		}
		taken[j] = true
		idx[i] = j
		keep[j] = true
		if err := d.zero(d.objs.BackendStats, base+j); err != nil {
			return err
		}
		if err := d.objs.Backends.Update(base+j, lbBackend{Addr: addrU32(b.Addr)}, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing backend %s: %w", b.Addr, err)
		}
	}
	if fresh {
		for _, m := range []*ebpf.Map{d.objs.ServiceStats, d.objs.ServiceDrops} {
			if err := d.zero(m, slot); err != nil {
				return err
			}
		}
	}
	// The table over the backends in rotation, as backend indexes.
	var mb []maglev.Backend
	var mi []uint32
	for i, b := range s.Backends {
		if b.InTable {
			mb = append(mb, maglev.Backend{Key: b.Addr.String(), Weight: b.Weight})
			mi = append(mi, idx[i])
		}
	}
	table := maglev.Table(mb, RingSize)
	cur := d.ringOf(slot)
	var ks, vs []uint32
	for i, e := range table {
		v := uint32(noBackend)
		if e != maglev.Empty {
			v = mi[e]
		}
		if fresh || cur[i] != v {
			ks = append(ks, slot*RingSize+uint32(i))
			vs = append(vs, v)
		}
	}
	if len(ks) > 0 {
		if _, err := d.objs.Ring.BatchUpdate(ks, vs, nil); err != nil {
			return fmt.Errorf("writing %d buckets of the Maglev table: %w", len(ks), err)
		}
	}
	// Backends that left are cleared only now that no bucket names them.
	for a, j := range have {
		if !keep[j] {
			if err := d.objs.Backends.Update(base+j, lbBackend{}, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("clearing backend %s: %w", a, err)
			}
		}
	}
	return nil
}

// freeIndex is the lowest unused backend index or, when all 256 are in use,
// one whose backend leaves with this update.
func freeIndex(taken []bool, have map[netip.Addr]uint32, keep map[uint32]bool) (uint32, bool) {
	if j := slices.Index(taken, false); j >= 0 {
		return uint32(j), true
	}
	for _, j := range have {
		if !keep[j] {
			keep[j] = true
			return j, true
		}
	}
	return 0, false
}

func (d *Dataplane) clearBackends(slot uint32) error {
	for i := range uint32(MaxBackends) {
		if d.backendAt(slot*MaxBackends + i).IsValid() {
			if err := d.objs.Backends.Update(slot*MaxBackends+i, lbBackend{}, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("clearing a backend: %w", err)
			}
		}
	}
	return nil
}

// Array map values sit on 8-byte boundaries in the mapped memory.
const arrayStride = 8

func (d *Dataplane) backendAt(i uint32) netip.Addr {
	var b [4]byte
	if _, err := d.backends.ReadAt(b[:], int64(i)*arrayStride); err != nil || b == [4]byte{} {
		return netip.Addr{}
	}
	return netip.AddrFrom4(b)
}

// ringOf reads a service's table in one copy.
func (d *Dataplane) ringOf(slot uint32) []uint32 {
	buf := make([]byte, RingSize*arrayStride)
	out := make([]uint32, RingSize)
	if _, err := d.ring.ReadAt(buf, int64(slot)*RingSize*arrayStride); err != nil {
		for i := range out {
			out[i] = noBackend - 1 // unknown: every bucket is rewritten
		}
		return out
	}
	for i := range out {
		out[i] = binary.NativeEndian.Uint32(buf[i*arrayStride:])
	}
	return out
}

func (d *Dataplane) zero(m *ebpf.Map, key uint32) error {
	if err := m.Update(key, make([]lbCounter, d.ncpu), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("zeroing counter %d of %s: %w", key, m, err)
	}
	return nil
}

// syncReverse makes the reverse-NAT table map every backend of every
// service back to its VIP and port.
func (d *Dataplane) syncReverse(services []Service) error {
	want := map[lbRevKey]lbRev{}
	for _, s := range services {
		for _, b := range s.Backends {
			k := lbRevKey{Addr: addrU32(b.Addr), Port: htons(s.TargetPort), Proto: uint8(s.Proto)}
			v := lbRev{Vip: addrU32(s.VIP), Port: htons(s.Port)}
			if o, ok := want[k]; ok && o != v {
				return fmt.Errorf("backend %s:%d/%s is behind two VIPs (%s and %s:%d): replies could not be told apart",
					b.Addr, s.TargetPort, s.Proto, u32Addr(o.Vip), s.VIP, s.Port)
			}
			want[k] = v
		}
	}
	var k lbRevKey
	var v lbRev
	var stale []lbRevKey
	it := d.objs.Reverse.Iterate()
	for it.Next(&k, &v) {
		if w, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if w == v {
			delete(want, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the reverse-NAT table: %w", err)
	}
	for k, v := range want {
		if err := d.objs.Reverse.Update(k, v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing the reverse-NAT table: %w", err)
		}
	}
	for _, k := range stale {
		if err := d.objs.Reverse.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing the reverse-NAT table: %w", err)
		}
	}
	return nil
}

func (d *Dataplane) maps() map[string]*ebpf.Map {
	m := d.objs.lbMaps
	return map[string]*ebpf.Map{lbMapBackendStats: m.BackendStats, lbMapBackends: m.Backends, lbMapReverse: m.Reverse,
		lbMapRing: m.Ring, lbMapServiceDrops: m.ServiceDrops, lbMapServiceStats: m.ServiceStats, lbMapServices: m.Services, lbMapStats: m.Stats}
}

// attach pins the maps and attaches both programs (pinning their links),
// unless that is done already.
func (d *Dataplane) attach() error {
	if d.xdp != nil && d.tcx != nil {
		return nil
	}
	if err := ensureBPFFS(d.opts.PinDir); err != nil {
		return err
	}
	for name, m := range d.maps() {
		if !m.IsPinned() {
			if err := m.Pin(filepath.Join(d.opts.PinDir, name)); err != nil {
				return fmt.Errorf("pinning map %s in %s: %w", name, d.opts.PinDir, err)
			}
		}
	}
	return nsutil.Do(d.opts.Netns, func() error {
		l, err := netlink.LinkByName(d.opts.Interface)
		if err != nil {
			return fmt.Errorf("interface %s: %w", d.opts.Interface, err)
		}
		ifindex := l.Attrs().Index
		if d.xdp == nil {
			flags := link.XDPGenericMode
			if d.opts.Mode == Native {
				flags = link.XDPDriverMode
			}
			x, err := link.AttachXDP(link.XDPOptions{Program: d.objs.UnyoLb, Interface: ifindex, Flags: flags})
			if err != nil {
				return fmt.Errorf("attaching XDP (%s mode) to %s: %w", d.opts.Mode, d.opts.Interface, err)
			}
			if err := x.Pin(filepath.Join(d.opts.PinDir, pinXDP)); err != nil {
				_ = x.Close()
				return fmt.Errorf("pinning the XDP link: %w", err)
			}
			d.xdp = x
		}
		if d.tcx == nil {
			x, err := link.AttachTCX(link.TCXOptions{Program: d.objs.UnyoLbReply, Interface: ifindex, Attach: ebpf.AttachTCXEgress})
			if err != nil {
				return fmt.Errorf("attaching the reply program to %s's egress (TCX, Linux 6.6+): %w", d.opts.Interface, err)
			}
			if err := x.Pin(filepath.Join(d.opts.PinDir, pinTCX)); err != nil {
				_ = x.Close()
				return fmt.Errorf("pinning the TCX link: %w", err)
			}
			d.tcx = x
		}
		return nil
	})
}

// detach removes the links (so the programs leave the interface) and every
// pin; a bpffs mounted at the pin directory that is left empty is
// unmounted.
func (d *Dataplane) detach() error {
	var errs []error
	for _, l := range []*link.Link{&d.xdp, &d.tcx} {
		if *l == nil {
			continue
		}
		if err := (*l).Unpin(); err != nil {
			errs = append(errs, err)
		}
		if err := (*l).Close(); err != nil {
			errs = append(errs, err)
		}
		*l = nil
	}
	for _, m := range d.maps() {
		if m.IsPinned() {
			if err := m.Unpin(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Pins of a crashed earlier run that this process did not open.
	for _, name := range []string{pinXDP, pinTCX} {
		if err := os.Remove(filepath.Join(d.opts.PinDir, name)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := unmountIfEmpty(d.opts.PinDir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detaching from %s: %w", d.opts.Interface, err)
	}
	return nil
}

// ensureBPFFS mounts a bpffs at dir unless dir is on one already.
func ensureBPFFS(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin directory: %w", err)
	}
	if isBPFFS(dir) {
		return nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting a bpffs at %s: %w", dir, err)
	}
	return nil
}

func isBPFFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

// unmountIfEmpty unmounts the bpffs mounted at dir itself (not one dir
// merely lies on) when nothing is pinned in it any more.
func unmountIfEmpty(dir string) error {
	if !isBPFFS(dir) || !isMountPoint(dir) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		// The kernel's bpf_preload puts maps.debug and progs.debug in
		// every new bpffs.
		if !strings.HasSuffix(e.Name(), ".debug") {
			return nil
		}
	}
	if err := unix.Unmount(dir, 0); err != nil {
		return fmt.Errorf("unmounting the bpffs at %s: %w", dir, err)
	}
	return nil
}

func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(filepath.Dir(filepath.Clean(dir)), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Counter is packets and bytes.
type Counter struct {
	Packets, Bytes uint64
}

// Add sums two counters.
func (c Counter) Add(o Counter) Counter { return Counter{c.Packets + o.Packets, c.Bytes + o.Bytes} }

// ServiceCounters are one service's counters since it was created.
type ServiceCounters struct {
	// Forwarded to a backend, and dropped for want of one.
	Forwarded, Dropped Counter
	// Per backend address: forwarded to it.
	Backends map[netip.Addr]Counter
}

// Counters reads every service's counters.
func (d *Dataplane) Counters() (map[Key]ServiceCounters, error) {
	out := map[Key]ServiceCounters{}
	var k lbSvcKey
	var v lbSvc
	it := d.objs.Services.Iterate()
	for it.Next(&k, &v) {
		sc := ServiceCounters{Backends: map[netip.Addr]Counter{}}
		var err error
		if sc.Forwarded, err = d.sum(d.objs.ServiceStats, v.Slot); err != nil {
			return nil, err
		}
		if sc.Dropped, err = d.sum(d.objs.ServiceDrops, v.Slot); err != nil {
			return nil, err
		}
		for i := range uint32(MaxBackends) {
			a := d.backendAt(v.Slot*MaxBackends + i)
			if !a.IsValid() {
				continue
			}
			if sc.Backends[a], err = d.sum(d.objs.BackendStats, v.Slot*MaxBackends+i); err != nil {
				return nil, err
			}
		}
		out[keyOf(k)] = sc
	}
	return out, it.Err()
}

// Global counter names, in lb.c's order.
var globalNames = []string{"tx", "redirect", "kernel", "no_backend", "fragment", "reply"}

// Global returns the node-wide counters: tx and redirect (forwarded by
// XDP_TX and XDP_REDIRECT), kernel (rewritten but left to the kernel to
// forward), no_backend (dropped), fragment (passed unbalanced), reply
// (replies rewritten back to the VIP).
func (d *Dataplane) Global() (map[string]Counter, error) {
	out := map[string]Counter{}
	for i, n := range globalNames {
		c, err := d.sum(d.objs.Stats, uint32(i))
		if err != nil {
			return nil, err
		}
		out[n] = c
	}
	return out, nil
}

func (d *Dataplane) sum(m *ebpf.Map, key uint32) (Counter, error) {
	var vals []lbCounter
	if err := m.Lookup(key, &vals); err != nil {
		return Counter{}, fmt.Errorf("reading counter %d of %s: %w", key, m, err)
	}
	var c Counter
	for _, v := range vals {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c, nil
}

// FlowHash is lb.c's flow_hash: the bucket of a packet is
// FlowHash(...) % RingSize.
func FlowHash(src, dst netip.Addr, sport, dport uint16, proto Proto) uint64 {
	h := uint64(addrU32(src))<<32 | uint64(addrU32(dst))
	h ^= (uint64(htons(sport))<<32 | uint64(htons(dport))<<16 | uint64(proto)) * 0x9e3779b97f4a7c15
	return maglev.Mix64(h)
}

// Picker returns a function that tells which backend (an index into
// backends, or maglev.Empty) the program sends a flow to, computed as the
// program does: for tests and for telling which flows a change moves.
func Picker(backends []Backend) func(src, dst netip.Addr, sport, dport uint16, proto Proto) int {
	var mb []maglev.Backend
	var mi []int
	for i, b := range backends {
		if b.InTable {
			mb = append(mb, maglev.Backend{Key: b.Addr.String(), Weight: b.Weight})
			mi = append(mi, i)
		}
	}
	table := maglev.Table(mb, RingSize)
	return func(src, dst netip.Addr, sport, dport uint16, proto Proto) int {
		e := table[FlowHash(src, dst, sport, dport, proto)%RingSize]
		if e == maglev.Empty {
			return maglev.Empty
		}
		return mi[e]
	}
}

// addrU32 is an IPv4 address as the program reads it from a packet: the
// network-order bytes as a native integer.
func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func htons(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

func svcKey(k Key) lbSvcKey {
	return lbSvcKey{Vip: addrU32(k.VIP), Port: htons(k.Port), Proto: uint8(k.Proto)}
}

func keyOf(k lbSvcKey) Key {
	return Key{VIP: u32Addr(k.Vip), Port: htons(k.Port), Proto: Proto(k.Proto)}
}
