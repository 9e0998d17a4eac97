package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// TestMakeDist runs `make dist` in a copy of the checkout, as a release
// would: the tarball holds the binary, the bundled plugins, the example
// configurations, the systemd units, the Prometheus rules and the man
// pages; the .deb declares its package and version, lays the same files out
// for Debian, and the unyo it installs (dpkg -x into a temporary root)
// reports the version the build was given.
func TestMakeDist(t *testing.T) {
	mk := testutil.NeedTool(t, "make", "apt-get install -y make", "make")
	dpkgDeb := testutil.NeedTool(t, "dpkg-deb", "apt-get install -y dpkg", "dpkg-deb")
	tar := testutil.NeedTool(t, "tar", "apt-get install -y tar", "tar")
	dir := t.TempDir()
	copyCheckout(t, dir)

	const version = "1.2.3"
	// The release builds every plugin, provider-libvirt with cgo among them.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mk, "dist", "VERSION=v"+version)
	cmd.Dir = dir
	// With -trimpath the copy's build reuses TestMain's cached packages.
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}

	arch := runtime.GOARCH
	name := "unyo-v" + version + "-linux-" + arch
	out, err := exec.Command(tar, "-tzf", filepath.Join(dir, "dist", name+".tar.gz")).Output()
	if err != nil {
		t.Fatalf("list the tarball: %v", err)
	}
	for _, want := range []string{
		"bin/unyo", "bin/unyo-agent", "lib/unyo/plugins/check-http", "lib/unyo/plugins/provider-exec",
		"etc/unyo/agent.yaml", "etc/unyo/cluster.yaml", "etc/unyo/root.yaml",
		"lib/systemd/system/unyo-agent.service", "share/unyo/prometheus/unyo-rules.yml", "share/man/man1/unyo.1",
	} {
		if !strings.Contains(string(out), name+"/"+want+"\n") {
			t.Errorf("the tarball has no %s:\n%s", want, out)
		}
	}

	// provider-libvirt (cgo) is in the release wherever it can be built,
	// and where it cannot, have-libvirt.sh says why.
	if exec.Command("bash", filepath.Join(dir, "integration/dist/have-libvirt.sh")).Run() == nil &&
		!strings.Contains(string(out), name+"/lib/unyo/plugins/provider-libvirt\n") {
		t.Errorf("cgo and libvirt-dev are here and the tarball has no provider-libvirt:\n%s", out)
	}
	noCgo := exec.Command("bash", filepath.Join(dir, "integration/dist/have-libvirt.sh"))
	noCgo.Env = append(os.Environ(), "CGO_ENABLED=0")
	if why, err := noCgo.CombinedOutput(); err == nil || !strings.Contains(string(why), "needs cgo") {
		t.Errorf("have-libvirt.sh without cgo: %v %q, want a refusal naming cgo", err, why)
	}

	debs, _ := filepath.Glob(filepath.Join(dir, "dist", "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("dist holds %d .deb packages, want 1: %v", len(debs), debs)
	}
	deb := debs[0]
	for field, want := range map[string]string{"Package": "unyo", "Version": version, "Architecture": arch} {
		got, err := exec.Command(dpkgDeb, "--field", deb, field).Output()
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("dpkg-deb --field %s: %q (%v), want %q", field, got, err, want)
		}
	}
	contents, err := exec.Command(dpkgDeb, "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v", err)
	}
	for _, want := range []string{
		"./usr/bin/unyo", "./usr/bin/unyo-agent", "./usr/lib/unyo/plugins/check-tcp", "./etc/unyo/agent.yaml",
		"./lib/systemd/system/unyo-cluster.service", "./usr/share/man/man1/unyo.1",
	} {
		if !strings.Contains(string(contents), want+"\n") {
			t.Errorf("the .deb has no %s:\n%s", want, contents)
		}
	}

	root := t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	got, err := exec.Command(filepath.Join(root, "usr", "bin", "unyo"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) {
		t.Errorf("the installed unyo version: %v\n%s\nwant %s in it", err, got, version)
	}
	got, err = exec.Command(filepath.Join(root, "usr", "bin", "unyo-agent"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "unyo-agent v"+version) {
		t.Errorf("the installed unyo-agent --version: %v %q, want unyo-agent v%s", err, got, version)
	}
}
