package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-libvirt/virttest"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// readyDeadline bounds a guest's boot to its ready line: about 3 s under
// software emulation on an idle machine, more on a loaded 2-core one.
const readyDeadline = 60 * time.Second

// vmEnv is an embed root with the guest images "guest" (boots to
// virttest.ReadyLine) and "panic" (its init exits: a kernel panic), and a
// plugin on it.
type vmEnv struct {
	embed  *virttest.Embed
	state  string
	images string
	c      *base.Conn
}

func startVMs(t testing.TB) *vmEnv {
	t.Helper()
	e := virttest.NewEmbed(t)
	images := t.TempDir()
	virttest.Guest(t, filepath.Join(images, "guest"), virttest.GuestInit)
	virttest.Guest(t, filepath.Join(images, "panic"), virttest.PanicInit)
	state := t.TempDir()
	c := testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": e.URI, "state_dir": state, "images_dir": images})
	return &vmEnv{embed: e, state: state, images: images, c: c}
}

// waitConsole waits until the console log holds line and returns how long
// that took.
func waitConsole(t testing.TB, path, line string, d time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for time.Since(began) < d {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), line) {
			return time.Since(began)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("no %q on the console within %v; console:\n%s", line, d, lastLines(string(b), 30))
	return 0
}

// TestVM boots real VMs under qemu:///embed with software emulation: a
// guest reaches its ready line on the console and Delete leaves nothing;
// a guest whose init exits panics and is FAILED with the console's last
// lines.
func TestVM(t *testing.T) {
	env := startVMs(t)
	ctx := context.Background()

	t.Run("boot_and_delete", func(t *testing.T) {
		began := time.Now()
		// With a scratch disk: QEMU opens the qcow2 made in the VM's dir.
		r, err := create(t, env.c, "vm-1", map[string]any{"image": "guest", "address": "169.254.33.2", "vcpus": 1.0,
			"memory_bytes": float64(256 << 20), "disk_bytes": float64(64 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		del(t, env.c, "vm-1")
		a := r.GetAttributes()
		if r.GetState() != sdk.Running {
			t.Fatalf("created in state %v (%s)", r.GetState(), r.GetReason())
		}
		took := waitConsole(t, a["console_log"], virttest.ReadyLine, readyDeadline)
		t.Logf("Create returned after %v, ready line %v after it", time.Since(began)-took, took)
		b, _ := os.ReadFile(a["console_log"])
		t.Logf("guest: %s", lastLines(string(b), 1))
		if !strings.Contains(string(b), "addr=169.254.33.2/32") {
			t.Errorf("the guest did not get its address from the command line; console:\n%s", lastLines(string(b), 10))
		}
		if _, err := os.Stat("/sys/class/net/" + a["tap"]); err != nil {
			t.Errorf("the VM's tap %q is not on the host: %v", a["tap"], err)
		}
		if len(virttest.QEMUProcesses(a["domain"])) != 1 {
			t.Errorf("QEMU processes of %s: %v, want 1", a["domain"], virttest.QEMUProcesses(a["domain"]))
		}
		st, err := env.c.Provider.Stats(ctx, &pluginv1.StatsRequest{Id: "vm-1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.GetMetrics() {
			if m.GetLabel() == "cpu_seconds" && m.GetValue() <= 0 {
				t.Errorf("cpu_seconds %v of a booted VM", m.GetValue())
			}
		}
		// Another plugin instance (a restarted plugin: a new connection to
		// the embed root) recovers the running VM from the handle.
		other := testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": env.embed.URI, "state_dir": env.state, "images_dir": env.images})
		rec, err := other.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: "vm-1", Handle: r.GetHandle()})
		if err != nil || rec.GetResource().GetState() != sdk.Running || rec.GetResource().GetAttributes()["uuid"] != a["uuid"] {
			t.Errorf("Recover from another plugin instance: %v %v", rec, err)
		}
		d, err := env.c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "vm-1"})
		if err != nil || !d.GetExisted() {
			t.Fatalf("Delete: %v %v", d, err)
		}
		if _, err := env.c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "vm-1"}); status.Code(err) != codes.NotFound {
			t.Errorf("Get after Delete: %v", err)
		}
		if l, err := env.c.Provider.List(ctx, &pluginv1.ListRequest{}); err != nil || len(l.GetResources()) != 0 {
			t.Errorf("List after Delete: %v %v", l, err)
		}
		if _, err := os.Stat(filepath.Dir(a["console_log"])); !os.IsNotExist(err) {
			t.Errorf("Delete left the VM's dir (disk, console): %v", err)
		}
		testutil.Eventually(t, 10*time.Second, "QEMU and the tap gone", func() error {
			if p := virttest.QEMUProcesses(a["domain"]); len(p) > 0 {
				return fmt.Errorf("QEMU processes %v", p)
			}
			if _, err := os.Stat("/sys/class/net/" + a["tap"]); err == nil {
				return fmt.Errorf("tap %s is still there", a["tap"])
			}
			return nil
		})
	})

	t.Run("existing_tap", func(t *testing.T) {
		// A tap made beforehand (by whoever wires the port) is used as it
		// is (managed='no') and outlives the VM.
		ip := testutil.NeedTool(t, "ip", "apt-get install iproute2", "ip")
		tap := "uvt" + digest(t.Name()+time.Now().String(), 8)
		if out, err := exec.Command(ip, "tuntap", "add", "dev", tap, "mode", "tap").CombinedOutput(); err != nil {
			t.Fatalf("ip tuntap add: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command(ip, "link", "del", tap).Run() })
		r, err := create(t, env.c, "vm-tap", map[string]any{"image": "guest", "tap": tap})
		if err != nil {
			t.Fatal(err)
		}
		del(t, env.c, "vm-tap")
		if r.GetState() != sdk.Running || r.GetAttributes()["tap"] != tap {
			t.Fatalf("created %v (%s) with tap %q, want running on %s", r.GetState(), r.GetReason(), r.GetAttributes()["tap"], tap)
		}
		if _, err := env.c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "vm-tap"}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat("/sys/class/net/" + tap); err != nil {
			t.Errorf("Delete removed the tap it did not make: %v", err)
		}
	})

	t.Run("bad_kernel", func(t *testing.T) {
		// QEMU refuses a kernel that is not one: Create fails saying so
		// and leaves no domain, directory or QEMU.
		dir := filepath.Join(env.images, "garbage")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "vmlinux"), []byte("this is not a kernel\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := create(t, env.c, "vm-bad", map[string]any{"image": "garbage"})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "starting domain") {
			t.Fatalf("Create with a garbage kernel: %v, want FAILED_PRECONDITION from the start", err)
		}
		if _, err := env.c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "vm-bad"}); status.Code(err) != codes.NotFound {
			t.Errorf("Get after the failed Create: %v", err)
		}
		if left, _ := os.ReadDir(env.state); len(left) != 0 {
			t.Errorf("the failed Create left %v in state_dir", left)
		}
		if p := virttest.QEMUProcesses(domainName("unyo-", "vm-bad")); len(p) > 0 {
			t.Errorf("the failed Create left QEMU %v", p)
		}
	})

	t.Run("kernel_panic", func(t *testing.T) {
		events := watch(t, env.c, "vm-panic")
		if _, err := create(t, env.c, "vm-panic", map[string]any{"image": "panic"}); err != nil {
			t.Fatalf("Create of a VM whose kernel panics: %v (it started; its failure is its state)", err)
		}
		del(t, env.c, "vm-panic")
		deadline := time.After(readyDeadline)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatal("Watch ended")
				}
				if e.GetState() != sdk.Broken {
					continue
				}
				for _, want := range []string{"kernel panicked", "Kernel panic", "this init exits"} {
					if !strings.Contains(e.GetReason(), want) {
						t.Errorf("FAILED reason %q lacks %q", e.GetReason(), want)
					}
				}
				g, err := env.c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "vm-panic"})
				if err != nil || g.GetResource().GetState() != sdk.Broken {
					t.Errorf("Get after the panic: %v %v", g, err)
				}
				dom := g.GetResource().GetAttributes()["domain"]
				if _, err := env.c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "vm-panic"}); err != nil {
					t.Fatal(err)
				}
				if p := virttest.QEMUProcesses(dom); len(p) > 0 {
					t.Errorf("QEMU left after deleting the panicked VM: %v", p)
				}
				return
			case <-deadline:
				t.Fatal("Watch reported no FAILED state for the panicking VM")
			}
		}
	})
}
