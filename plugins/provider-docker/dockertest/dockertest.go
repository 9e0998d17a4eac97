// Package dockertest starts a private dockerd for a test and builds a tiny
// busybox image for it without any network, following
// RECIPES-provisioning.md: a socket, data root and exec root in a temp dir
// of their own, no bridge, no iptables and no ip_forward change on the
// host, a cgroup parent of its own; on cleanup the daemon is stopped and
// everything it leaves (the bind mount of its data root after a SIGKILL,
// its cgroup directories, the temp dir) is removed.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Daemon is a dockerd of one test.
type Daemon struct {
	t testing.TB
	// Dir holds the socket, data root, exec root and log.
	Dir string
	// Host is the address clients use (unix://DIR/docker.sock).
	Host string
	// CgroupParent is the cgroup all its containers live under.
	CgroupParent string
	bin          string
	cmd          *exec.Cmd
	done         chan struct{}
}

// Start starts a dockerd and waits until it answers; it is stopped and
// its traces removed when the test ends. Without dockerd or without root
// the test skips (fails with CI=true).
func Start(t testing.TB) *Daemon {
	t.Helper()
	bin := testutil.NeedTool(t, "dockerd", "apt-get install docker.io", "/usr/sbin/dockerd", "dockerd")
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "dockerd needs root")
	}
	// A short path: dockerd and containerd put sockets under it, and a
	// unix socket path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "unyo-dk")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, Dir: dir, Host: "unix://" + filepath.Join(dir, "docker.sock"), bin: bin,
		CgroupParent: "/" + filepath.Base(dir)}
	t.Cleanup(d.cleanup)
	d.start()
	return d
}

func (d *Daemon) start() {
	d.t.Helper()
	log, err := os.OpenFile(filepath.Join(d.Dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	d.cmd = exec.Command(d.bin, "--data-root", filepath.Join(d.Dir, "data"), "--exec-root", filepath.Join(d.Dir, "exec"),
		"--pidfile", filepath.Join(d.Dir, "pid"), "-H", d.Host,
		// Host hygiene: no docker0, no NAT rules, and above all no
		// net.ipv4.ip_forward=1 left on the host.
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
		"--cgroup-parent", d.CgroupParent)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		log.Close()
		d.t.Fatalf("starting dockerd: %v", err)
	}
	log.Close()
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(d.cmd, d.done)
	cli := d.Client()
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.done:
			d.t.Fatalf("dockerd exited at start: %s", d.Log())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("dockerd did not answer within 30s: %v\n%s", err, d.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client is a client of the daemon; close it after use.
func (d *Daemon) Client() *client.Client {
	cli, err := client.NewClientWithOpts(client.WithHost(d.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		d.t.Fatal(err)
	}
	return cli
}

// Log is the daemon's output so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "dockerd.log"))
	return string(b)
}

// Kill SIGKILLs dockerd as a crash would. Its containerd dies with it;
// the containers and their shims keep running. Kill returns once that
// containerd is gone (reaped by init), since a dockerd started while its
// pid still exists waits for it in vain; and removes the bind mount
// dockerd leaves on its data root.
func (d *Daemon) Kill() {
	if d.cmd == nil {
		return
	}
	containerd, _ := os.ReadFile(filepath.Join(d.Dir, "exec", "containerd", "containerd.pid"))
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.cmd = nil
	if pid := strings.TrimSpace(string(containerd)); pid != "" {
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat("/proc/" + pid); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	_ = syscall.Unmount(filepath.Join(d.Dir, "data"), syscall.MNT_DETACH)
}

// Restart starts dockerd again on the same data root.
func (d *Daemon) Restart() {
	d.t.Helper()
	d.start()
}

// stop stops dockerd gracefully (SIGTERM; SIGKILL after 20 s).
func (d *Daemon) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
	}
	d.cmd = nil
}

// cleanup removes every container, stops the daemon and removes what it
// leaves behind.
func (d *Daemon) cleanup() {
	if d.cmd != nil {
		// Remove the containers first: a stop with containers running
		// waits for each one's stop timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cli := d.Client()
		cs, err := cli.ContainerList(ctx, container.ListOptions{All: true})
		if err != nil {
			d.t.Logf("listing the test's containers: %v", err)
		}
		for _, c := range cs {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				d.t.Logf("removing container %s: %v", c.ID, err)
			}
		}
		cli.Close()
		cancel()
	}
	d.stop()
	killCgroup(d.CgroupParent, d.Dir)
	for _, m := range []string{filepath.Join(d.Dir, "data"), filepath.Join(d.Dir, "exec")} {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	// Mounts of containers that were running at a SIGKILL.
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && strings.HasPrefix(f[4], d.Dir+"/") {
				_ = syscall.Unmount(f[4], syscall.MNT_DETACH)
			}
		}
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		d.t.Errorf("removing dockerd's directory: %v", err)
	}
	removeCgroups(d.t, d.CgroupParent)
}

// killCgroup SIGKILLs every process left in the test's cgroups (the
// containers of a dockerd that failed to restart) and the containerd
// shims of this daemon, found by the exec root on their command line.
func killCgroup(parent, dir string) {
	var pids []int
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", parent), func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "cgroup.procs" {
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		return nil
	})
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, _ := os.ReadFile(c)
		if strings.Contains(string(b), "containerd-shim") && strings.Contains(string(b), dir+"/") {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(pids) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
}

// removeCgroups removes the test's cgroup parent in every v1 hierarchy
// (and v2), children first; dockerd leaves the empty directories.
func removeCgroups(t testing.TB, parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		dir := filepath.Join(root, parent)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				t.Errorf("a cgroup is left behind: %v", err)
			}
		}
	}
}

// BusyboxImage imports a busybox image named ref into the daemon: the
// static busybox binary (Debian's busybox-static) with applet links for
// sh, sleep, echo, cat, httpd and friends, built in memory; no registry.
func (d *Daemon) BusyboxImage(ref string) {
	d.t.Helper()
	bb := testutil.NeedTool(d.t, "busybox (static)", "apt-get install busybox-static", "/bin/busybox", "/usr/bin/busybox")
	tarball, err := BusyboxTar(bb)
	if err != nil {
		d.t.Fatal(err)
	}
	cli := d.Client()
	defer cli.Close()
	rd, err := cli.ImageImport(context.Background(), image.ImportSource{Source: bytes.NewReader(tarball), SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`CMD ["sh"]`, `ENV PATH=/bin`}})
	if err != nil {
		d.t.Fatalf("importing %s: %v", ref, err)
	}
	_, _ = io.Copy(io.Discard, rd)
	rd.Close()
}

// BusyboxTar is a root file system tar holding busybox at /bin/busybox and
// links to it for the usual applets.
func BusyboxTar(busybox string) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("reading busybox: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"bin/", "tmp/", "proc/", "sys/", "dev/", "etc/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, a := range []string{"sh", "sleep", "echo", "cat", "ls", "httpd", "wget", "true", "false", "kill", "ps", "head", "yes", "dd", "env"} {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
