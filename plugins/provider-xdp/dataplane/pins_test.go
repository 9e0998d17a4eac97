package dataplane

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/plugins/provider-xdp/xdptest"
)

func attachedTag(t *testing.T, d *Dataplane) string {
	t.Helper()
	info, err := d.xdp.Info()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pi, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	return pi.Tag
}

// TestPinnedReopen: a second Open (a restarted plugin) takes over the
// pinned maps and links with their contents, and brings its program to
// an attachment an older program holds; the last service gone, nothing
// is left attached, pinned or mounted.
func TestPinnedReopen(t *testing.T) {
	xdptest.NeedRoot(t)
	sfx := xdptest.Suffix()
	ns, peer := xdptest.NewNS(t, "uxr-"+sfx), xdptest.NewNS(t, "uxs-"+sfx)
	xdptest.Veth(t, ns, "v0", netip.MustParsePrefix("10.99.0.1/24"), peer, "v1", netip.MustParsePrefix("10.99.0.2/24"))
	pins := filepath.Join(t.TempDir(), "bpf")
	t.Cleanup(func() { _ = unix.Unmount(pins, unix.MNT_DETACH) })
	o := Options{Interface: "v0", Netns: ns.Path, PinDir: pins}
	first, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	s := Service{Key: Key{VIP: vip, Port: 80, Proto: TCP}, TargetPort: 80, Backends: three()}
	if err := first.Apply([]Service{s}); err != nil {
		t.Fatal(err)
	}
	ours := attachedTag(t, first)
	// An "older version" of the program behind the link.
	old, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := first.xdp.Update(old); err != nil {
		t.Fatal(err)
	}
	first.Close() // the plugin goes; the pins stay

	second, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !second.Attached() || second.Stale() {
		t.Fatalf("re-opened: attached=%v stale=%v", second.Attached(), second.Stale())
	}
	if got := attachedTag(t, second); got != ours {
		t.Errorf("program behind the link after re-opening: tag %s, want this version's %s", got, ours)
	}
	if cur := second.ringOf(0); cur[0] == noBackend || !second.backendAt(0).IsValid() {
		t.Errorf("the re-opened maps lost their contents")
	}
	if err := second.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if left := xdptest.Leftovers(nil, []string{pins}); len(left) > 0 {
		t.Errorf("left after the last service: %v", left)
	}
	if id, err := second.AttachedProgramID(); err != nil || id != 0 {
		t.Errorf("program %d still attached (%v)", id, err)
	}
}
