package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Libvirtd is a private libvirtd of one test, serving libvirt's test
// driver on a socket in a temp dir (no hypervisor driver is loaded, so it
// touches nothing outside that dir), for tests whose resources must
// outlive a plugin process (conformance) or the daemon itself.
type Libvirtd struct {
	t testing.TB
	// Dir holds the config, socket, pid file and log.
	Dir string
	// URI reaches the daemon's test driver.
	URI  string
	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	// hold keeps a connection open: the test driver frees its domains
	// when its last connection closes, and a plugin process killed by a
	// test must not take them with it (a real libvirtd keeps them).
	hold *libvirt.Connect
}

// StartLibvirtd starts a libvirtd serving the test driver and waits until
// its socket answers; it is stopped and its dir removed when the test
// ends. Without libvirtd or root the test skips (fails with CI=true).
func StartLibvirtd(t testing.TB) *Libvirtd {
	t.Helper()
	bin := testutil.NeedTool(t, "libvirtd", "apt-get install --no-install-recommends libvirt-daemon", "/usr/sbin/libvirtd", "libvirtd")
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "a private libvirtd needs root")
	}
	// Short: the socket path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "uvd")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sock", "drivers"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf("unix_sock_dir = %q\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\nlog_outputs = \"3:file:%s\"\n",
		filepath.Join(dir, "sock"), filepath.Join(dir, "libvirtd.log"))
	if err := os.WriteFile(filepath.Join(dir, "libvirtd.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Libvirtd{t: t, Dir: dir, bin: bin,
		URI: "test+unix:///default?socket=" + filepath.Join(dir, "sock", "libvirt-sock")}
	t.Cleanup(func() {
		d.Kill()
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing libvirtd's dir: %v", err)
		}
	})
	d.start()
	return d
}

func (d *Libvirtd) start() {
	d.t.Helper()
	out, err := os.OpenFile(filepath.Join(d.Dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer out.Close()
	d.cmd = exec.Command(d.bin, "-f", filepath.Join(d.Dir, "libvirtd.conf"), "-p", filepath.Join(d.Dir, "libvirtd.pid"))
	// An empty driver dir: libvirtd loads no hypervisor, network or
	// storage driver (they would write under /etc, /run and /var/lib and
	// probe QEMU for seconds); the test driver is built into libvirt.
	d.cmd.Env = append(os.Environ(), "LIBVIRT_DRIVER_DIR="+filepath.Join(d.Dir, "drivers"))
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("starting libvirtd: %v", err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(d.cmd, d.done)
	sock := filepath.Join(d.Dir, "sock", "libvirt-sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			if d.hold, err = libvirt.NewConnect(d.URI); err == nil {
				return
			}
		}
		select {
		case <-d.done:
			d.t.Fatalf("libvirtd exited at start: %s", d.Log())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("libvirtd made no socket within 30s: %s", d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log is the daemon's output so far.
func (d *Libvirtd) Log() string {
	a, _ := os.ReadFile(filepath.Join(d.Dir, "stderr.log"))
	b, _ := os.ReadFile(filepath.Join(d.Dir, "libvirtd.log"))
	return string(a) + string(b)
}

// Kill SIGKILLs the daemon (the test driver's domains die with it).
func (d *Libvirtd) Kill() {
	if d.cmd == nil {
		return
	}
	if d.hold != nil {
		_, _ = d.hold.Close()
		d.hold = nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.cmd = nil
	_ = os.Remove(filepath.Join(d.Dir, "sock", "libvirt-sock"))
	_ = os.Remove(filepath.Join(d.Dir, "sock", "libvirt-sock-ro"))
	_ = os.Remove(filepath.Join(d.Dir, "sock", "libvirt-admin-sock"))
}

// Restart starts the daemon again.
func (d *Libvirtd) Restart() {
	d.t.Helper()
	d.Kill()
	d.start()
}
