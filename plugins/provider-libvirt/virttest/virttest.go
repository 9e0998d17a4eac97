// Package virttest prepares what tests of real VMs need (provider-libvirt's
// and integration's), following RECIPES-provisioning.md, and removes all
// of it when the test ends. It does not use libvirt's Go binding (cgo), so
// a test package importing it builds without libvirt-dev:
//
//   - Embed: a root dir for qemu:///embed (QEMU driven from inside the
//     plugin, no daemon) with the qemu.conf it needs and the libvirt-qemu
//     user libvirt resolves before reading it (created when missing and
//     deleted again); QEMU processes and cgroups left under it are killed
//     and removed;
//   - Guest: a kernel+initramfs image directory: Debian's kernel unpacked
//     by integration/guest-kernel.sh and an initramfs of busybox, the
//     virtio modules and an /init that configures eth0 from unyo.ip= and
//     unyo.gw=, starts httpd and prints ReadyLine on the console.
package virttest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// ReadyLine is what a Guest's init prints on the console once its network
// and httpd are up.
const ReadyLine = "UNYO-GUEST: ready"

// KernelDir is where integration/guest-kernel.sh unpacks the guests'
// kernel ($UNYO_TEST_KERNEL_DIR overrides it).
func KernelDir() string {
	if d := os.Getenv("UNYO_TEST_KERNEL_DIR"); d != "" {
		return d
	}
	return "/var/cache/unyo-test/linux"
}

// RunDirGuard notes whether /run/libvirt exists and returns a func that
// removes it again if it did not: libvirt writes its identity token
// (/run/libvirt/common/system.token) there as soon as a root process
// opens any driver, the test driver in process included. Call it from
// TestMain around m.Run.
func RunDirGuard() func() {
	const dir = "/run/libvirt"
	if _, err := os.Stat(dir); err == nil {
		return func() {}
	}
	return func() { _ = os.RemoveAll(dir) }
}

// qemuConf makes the embedded QEMU driver run guests as root without a
// security driver, write chardev logs itself (no virtlogd) and leave no
// owner-remembering xattrs on the images (several VMs share one).
const qemuConf = `user = "root"
group = "root"
security_driver = "none"
stdio_handler = "file"
remember_owner = 0
`

// Embed is a root dir for qemu:///embed.
type Embed struct {
	// Root is the embed driver's root; URI opens it.
	Root string
	URI  string
}

// NewEmbed prepares an embed root for a test that boots real VMs (one per
// test process: libvirt opens a single embed root per process, ever; a
// benchmark makes it once with b.Loop). Without
// QEMU, libvirt's QEMU driver, the guest kernel or root the test skips
// (fails with CI=true). When the test ends, QEMU processes started under
// the root are killed, their cgroups removed, the root removed, and the
// libvirt-qemu user deleted if this made it.
func NewEmbed(t testing.TB) *Embed {
	t.Helper()
	testutil.NeedTool(t, "qemu-system-x86_64", "apt-get install --no-install-recommends qemu-system-x86", "qemu-system-x86_64")
	testutil.NeedTool(t, "libvirt's QEMU driver", "apt-get install --no-install-recommends libvirt-daemon-driver-qemu",
		"/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so")
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "qemu:///embed with tap devices needs root")
	}
	root, err := os.MkdirTemp("", "uve")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "qemu.conf"), []byte(qemuConf), 0o600); err != nil {
		t.Fatal(err)
	}
	cgroupsBefore := machineCgroups()
	madeUser := ensureUser(t, "libvirt-qemu")
	t.Cleanup(func() {
		killUnder(root)
		removeNewCgroups(t, cgroupsBefore)
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("removing the embed root: %v", err)
		}
		if madeUser {
			if out, err := exec.Command("userdel", "libvirt-qemu").CombinedOutput(); err != nil {
				t.Errorf("userdel libvirt-qemu: %v: %s", err, out)
			}
		}
	})
	return &Embed{Root: root, URI: "qemu:///embed?root=" + root}
}

// ensureUser creates a system user (and its group) when missing: libvirt's
// QEMU driver resolves libvirt-qemu before it reads qemu.conf, and only
// libvirt-daemon-system would create it.
func ensureUser(t testing.TB, name string) bool {
	if err := exec.Command("id", name).Run(); err == nil {
		return false
	}
	if out, err := exec.Command("useradd", "--system", "-M", "-U", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	return true
}

// killUnder SIGKILLs every process whose command line names dir (QEMU of
// the embed root) and waits for them to go.
func killUnder(dir string) {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, _ := os.ReadFile(c)
		if bytes.Contains(b, []byte(dir+"/")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c))); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		for i := 0; i < 100; i++ {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// machineCgroups lists the cgroup directories libvirt's QEMU driver uses
// (machine and machine/*), in every hierarchy.
func machineCgroups() map[string]bool {
	out := map[string]bool{}
	for _, pat := range []string{"/sys/fs/cgroup/*/machine", "/sys/fs/cgroup/*/machine/*", "/sys/fs/cgroup/machine", "/sys/fs/cgroup/machine/*"} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out[d] = true
			}
		}
	}
	return out
}

// removeNewCgroups removes the cgroup directories that appeared since
// before, deepest first (libvirt leaves machine/ and the VMs' own).
func removeNewCgroups(t testing.TB, before map[string]bool) {
	var dirs []string
	for d := range machineCgroups() {
		if !before[d] {
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
	}
	// Deepest first.
	for i := 0; i < len(dirs); i++ {
		for j := i + 1; j < len(dirs); j++ {
			if strings.Count(dirs[j], "/") > strings.Count(dirs[i], "/") {
				dirs[i], dirs[j] = dirs[j], dirs[i]
			}
		}
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			t.Errorf("a cgroup is left behind: %v", err)
		}
	}
}

// GuestInit is the /init of a Guest: it loads the virtio modules, sets
// eth0 from unyo.ip= and unyo.gw= on the kernel command line, serves
// /www on port 80 and prints ReadyLine.
const GuestInit = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net virtio_blk; do
  [ -f /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko 2>/dev/null
done
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -1; }
ip link set lo up
addr=$(arg unyo.ip); gw=$(arg unyo.gw)
if [ -n "$addr" ]; then
  ip link set eth0 up
  ip addr add "$addr" dev eth0
  [ -n "$gw" ] && ip route add "$gw" dev eth0 && ip route add default via "$gw"
fi
mkdir -p /www && echo "unyo guest $(hostname)" > /www/index.html
httpd -h /www -p 80
echo "` + ReadyLine + ` addr=$addr uptime=$(cut -d' ' -f1 /proc/uptime)"
while :; do sleep 3600; done
`

// PanicInit is an /init that exits at once: the kernel panics ("Attempted
// to kill init").
const PanicInit = "#!/bin/sh\necho 'UNYO-GUEST: this init exits'\nexit 3\n"

// Guest writes a kernel+initramfs image directory into dir (vmlinux,
// initrd.gz) whose /init is init, and returns dir. Without the kernel
// (integration/guest-kernel.sh) or busybox the test skips (fails with
// CI=true).
func Guest(t testing.TB, dir, init string) string {
	t.Helper()
	kdir := KernelDir()
	kernel := testutil.NeedTool(t, "the guest kernel", "bash integration/guest-kernel.sh "+kdir, filepath.Join(kdir, "vmlinux"))
	bb := testutil.NeedTool(t, "busybox (static)", "apt-get install busybox-static", "/bin/busybox", "/usr/bin/busybox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A hard link when the filesystems allow (64 MB), a copy otherwise.
	if err := os.Link(kernel, filepath.Join(dir, "vmlinux")); err != nil {
		if err := copyFile(kernel, filepath.Join(dir, "vmlinux")); err != nil {
			t.Fatal(err)
		}
	}
	initrd, err := Initramfs(bb, filepath.Join(kdir, "modules"), init)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "initrd.gz"), initrd, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// Initramfs is a gzipped newc cpio archive: busybox at /bin/busybox (sh
// linked to it), the .ko files of modulesDir under /lib/modules, /init,
// and /dev/console (the kernel opens it before init runs: without it init
// has no output).
func Initramfs(busybox, modulesDir, init string) ([]byte, error) {
	var raw bytes.Buffer
	w := &cpioWriter{w: &raw}
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "www", "lib", "lib/modules"} {
		w.add(d, 0o040755, nil, 0, 0)
	}
	w.add("dev/console", 0o020600, nil, 5, 1)
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("reading busybox: %w", err)
	}
	w.add("bin/busybox", 0o100755, bb, 0, 0)
	w.add("bin/sh", 0o120777, []byte("busybox"), 0, 0)
	mods, _ := filepath.Glob(filepath.Join(modulesDir, "*.ko"))
	for _, m := range mods {
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, err
		}
		w.add("lib/modules/"+filepath.Base(m), 0o100644, b, 0, 0)
	}
	w.add("init", 0o100755, []byte(init), 0, 0)
	w.add("TRAILER!!!", 0, nil, 0, 0)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gz.Bytes(), nil
}

// cpioWriter writes the newc ("070701") format the kernel unpacks.
type cpioWriter struct {
	w   *bytes.Buffer
	ino int
}

func (c *cpioWriter) add(name string, mode uint32, data []byte, rmajor, rminor int) {
	c.ino++
	fmt.Fprintf(c.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.pad()
	c.w.Write(data)
	c.pad()
}

func (c *cpioWriter) pad() {
	for c.w.Len()%4 != 0 {
		c.w.WriteByte(0)
	}
}

// QEMUProcesses lists the pids of the QEMU processes whose command line
// names the libvirt domain, so that tests can see a VM's process go.
func QEMUProcesses(domain string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, _ := os.ReadFile(c)
		if strings.Contains(string(b), "qemu-system") && strings.Contains(string(b), "guest="+domain+",") {
			out = append(out, filepath.Base(filepath.Dir(c)))
		}
	}
	return out
}
