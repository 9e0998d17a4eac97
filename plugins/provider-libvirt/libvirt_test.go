package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"libvirt.org/go/libvirt"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/conformance"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// fakeImages makes an images dir holding a kernel-form image "guest"
// (files the test driver never reads).
func fakeImages(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "guest"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vmlinux", "initrd.gz"} {
		if err := os.WriteFile(filepath.Join(dir, "guest", f), []byte("not a kernel"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// serveTest serves the plugin in process on the test driver; every
// plugin of the test shares test:///default's one node.
func serveTest(t testing.TB) (*base.Conn, string) {
	state := t.TempDir()
	return testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": "test:///default", "state_dir": state,
		"images_dir": fakeImages(t), "name_prefix": "ut-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-"}), state
}

func create(t testing.TB, c *base.Conn, id string, cfg map[string]any) (*pluginv1.Resource, error) {
	t.Helper()
	r, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: id, Config: testbin.Struct(t, cfg),
		Labels: map[string]string{"unyo.dev/node": "n1", "unyo.dev/cluster": "c1", "unyo.dev/compute": id, "unyo.dev/service": "web"}})
	return r.GetResource(), err
}

func del(t testing.TB, c *base.Conn, id string) {
	t.Cleanup(func() { _, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: id}) })
}

// watch opens a Watch of ids for the rest of the test and forwards its
// events (the channel closes when the stream ends).
func watch(t testing.TB, c *base.Conn, ids ...string) <-chan *pluginv1.WatchResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Provider.Watch(ctx, &pluginv1.WatchRequest{Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *pluginv1.WatchResponse, 64)
	go func() {
		defer close(events)
		for {
			e, err := w.Recv()
			if err != nil {
				return
			}
			events <- e
		}
	}()
	time.Sleep(100 * time.Millisecond) // registered for events
	return events
}

// fingerprints opens the Fingerprint stream (one a second).
func fingerprints(t testing.TB, c *base.Conn) pluginv1.Provider_FingerprintClient {
	t.Helper()
	fs, err := c.Provider.Fingerprint(t.Context(), &pluginv1.FingerprintRequest{Interval: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestTestDriver runs the operations against libvirt's test driver in
// process: the domain XML is accepted, metadata carries id and owner, and
// every operation answers.
func TestTestDriver(t *testing.T) {
	c, state := serveTest(t)
	ctx := context.Background()
	cfg := map[string]any{"image": "guest", "vcpus": 2.0, "memory_bytes": float64(128 << 20), "address": "169.254.33.2",
		"cpu_policy": "pinned", "tap": "uvtest0"}
	r, err := create(t, c, "web-1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	del(t, c, "web-1")
	if r.GetState() != sdk.Running {
		t.Errorf("created in state %v (%s)", r.GetState(), r.GetReason())
	}
	// Watch starts with the state of what exists, then follows events.
	watched := watch(t, c, "web-1")
	select {
	case e := <-watched:
		if e.GetId() != "web-1" || e.GetState() != sdk.Running {
			t.Errorf("Watch began with %v, want web-1 running", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch sent no current state")
	}
	a := r.GetAttributes()
	if a["tap"] != "uvtest0" || a["address"] != "169.254.33.2" || !strings.HasSuffix(a["domain"], "web-1") || a["uuid"] == "" ||
		a["console_log"] != filepath.Join(state, a["domain"], "console.log") {
		t.Errorf("attributes %v", a)
	}
	// Same config: the existing one; another: ALREADY_EXISTS.
	again, err := create(t, c, "web-1", cfg)
	if err != nil || again.GetAttributes()["uuid"] != a["uuid"] {
		t.Errorf("Create again: %v %v", again, err)
	}
	if _, err := create(t, c, "web-1", map[string]any{"image": "guest"}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("Create with another config: %v, want ALREADY_EXISTS", err)
	}
	l, err := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{"unyo.dev/node": "n1", "unyo.dev/service": "web"}})
	if err != nil || len(l.GetResources()) != 1 || l.GetResources()[0].GetId() != "web-1" {
		t.Errorf("List by owner: %v %v", l, err)
	}
	if l, _ := c.Provider.List(ctx, &pluginv1.ListRequest{Labels: map[string]string{"unyo.dev/node": "n2"}}); len(l.GetResources()) != 0 {
		t.Errorf("List by another owner: %v", l)
	}
	st, err := c.Provider.Stats(ctx, &pluginv1.StatsRequest{Id: "web-1"})
	got := map[string]bool{}
	for _, m := range st.GetMetrics() {
		got[m.GetLabel()] = true
	}
	for _, want := range []string{"cpu_seconds", "rss", "net_rx_bytes", "net_tx_bytes", "blkio_read_bytes", "blkio_write_bytes"} {
		if !got[want] {
			t.Errorf("Stats lacks %s: %v %v", want, st, err)
		}
	}
	fp, err := fingerprints(t, c).Recv()
	if err != nil || !fp.GetHealthy() || fp.GetCapacity().GetCpus() < 1 || fp.GetCapacity().GetMemoryBytes() <= 0 || fp.GetCapacity().GetDiskBytes() <= 0 ||
		fp.GetAttributes()["libvirt.hypervisor"] != "TEST" {
		t.Errorf("fingerprint: %v %v", fp, err)
	}
	// The pinned flavor's vCPUs are pinned in the defined domain.
	conn, err := libvirt.NewConnect("test:///default")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dom, err := conn.LookupDomainByName(a["domain"])
	if err != nil {
		t.Fatal(err)
	}
	d, err := domainDesc(dom)
	dom.Free()
	if err != nil || d.CPUTune == nil || len(d.CPUTune.VCPUPin) != 2 {
		t.Errorf("pinned vCPUs in the domain: %+v %v", d.CPUTune, err)
	}
	del, err := c.Provider.Delete(ctx, &pluginv1.DeleteRequest{Id: "web-1"})
	if err != nil || !del.GetExisted() {
		t.Fatalf("Delete: %v %v", del, err)
	}
	if _, err := os.Stat(filepath.Join(state, a["domain"])); !os.IsNotExist(err) {
		t.Errorf("Delete left the resource's dir: %v", err)
	}
	if _, err := conn.LookupDomainByName(a["domain"]); err == nil {
		t.Errorf("Delete left the domain defined")
	}
	// Watch saw it go.
	deadline := time.After(10 * time.Second)
	for deleted := false; !deleted; {
		select {
		case e := <-watched:
			deleted = e.GetState() == sdk.Deleted
		case <-deadline:
			t.Fatal("Watch reported no deletion")
		}
	}
}

// TestBadInput: a missing image, a flavor larger than the node and a
// domain name held by another resource fail Create with a clear error and
// leave nothing.
func TestBadInput(t *testing.T) {
	c, state := serveTest(t)
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		code codes.Code
		want string
	}{
		{"missing image", map[string]any{"image": "nowhere"}, codes.FailedPrecondition, `image "nowhere" does not exist`},
		{"too many vcpus", map[string]any{"image": "guest", "vcpus": 4096.0}, codes.FailedPrecondition, "4096 vCPUs"},
		{"too much memory", map[string]any{"image": "guest", "memory_bytes": float64(1 << 50)}, codes.FailedPrecondition, "MiB of memory"},
		{"invalid", map[string]any{"image": "guest", "tap": "a-tap-name-far-too-long"}, codes.InvalidArgument, "tap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := create(t, c, "bad-1", tc.cfg)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create: %v, want %v with %q", err, tc.code, tc.want)
			}
			if _, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "bad-1"}); status.Code(err) != codes.NotFound {
				t.Errorf("Get after the failed Create: %v", err)
			}
			if left, _ := os.ReadDir(state); len(left) != 0 {
				t.Errorf("the failed Create left %v in state_dir", left)
			}
		})
	}
}

// TestInterruptedCreate: a domain defined by a Create that died before
// starting it is absent for Get, and the next Create replaces it.
func TestInterruptedCreate(t *testing.T) {
	c, _ := serveTest(t)
	if _, err := create(t, c, "web-2", map[string]any{"image": "guest"}); err != nil {
		t.Fatal(err)
	}
	del(t, c, "web-2")
	g, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "web-2"})
	if err != nil {
		t.Fatal(err)
	}
	// Remove the started marker as if the plugin had died before it.
	dir := filepath.Dir(g.GetResource().GetAttributes()["console_log"])
	if err := os.Remove(filepath.Join(dir, startedMarker)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "web-2"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Get of a never-started domain: %v, want NOT_FOUND", err)
	}
	r, err := create(t, c, "web-2", map[string]any{"image": "guest"})
	if err != nil || r.GetState() != sdk.Running {
		t.Fatalf("Create over the remains: %v %v", r, err)
	}
}

// TestWithLibvirtd runs what needs resources to outlive a plugin process
// against a private libvirtd's test driver: the conformance suite with the
// plugin binary, and libvirt going away and coming back.
func TestWithLibvirtd(t *testing.T) {
	d := StartLibvirtd(t)
	images := fakeImages(t)

	t.Run("conformance", func(t *testing.T) {
		fx, err := conformance.LoadFixtures("testdata/conformance.yaml")
		if err != nil {
			t.Fatal(err)
		}
		fx.Config["uri"], fx.Config["state_dir"], fx.Config["images_dir"] = d.URI, t.TempDir(), images
		conformance.Run(t, conformance.Binary(conformance.Build(t, ".", "unyo-provider-libvirt"), fx))
	})

	t.Run("unreachable", func(t *testing.T) {
		c := testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": d.URI, "state_dir": t.TempDir(), "images_dir": images})
		ctx := context.Background()
		if _, err := create(t, c, "web-1", map[string]any{"image": "guest"}); err != nil {
			t.Fatal(err)
		}
		del(t, c, "web-1")
		fs := fingerprints(t, c)
		if fp, err := fs.Recv(); err != nil || !fp.GetHealthy() {
			t.Fatalf("fingerprint: %v %v", fp, err)
		}
		d.Kill()
		_, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "web-1"})
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), d.URI) {
			t.Errorf("Get with libvirtd down: %v, want UNAVAILABLE naming the URI", err)
		}
		_, err = create(t, c, "web-3", map[string]any{"image": "guest"})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("Create with libvirtd down: %v, want UNAVAILABLE", err)
		}
		var fp *pluginv1.FingerprintResponse
		for fp == nil || fp.GetHealthy() {
			if fp, err = fs.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(fp.GetReason(), "unreachable") {
			t.Errorf("fingerprint with libvirtd down: %v", fp)
		}
		d.Restart()
		// The test driver starts empty; the plugin connects again.
		if _, err := c.Provider.Get(ctx, &pluginv1.GetRequest{Id: "web-1"}); status.Code(err) != codes.NotFound {
			t.Errorf("Get after libvirtd came back: %v, want NOT_FOUND (the test driver forgot it)", err)
		}
		for !fp.GetHealthy() {
			if fp, err = fs.Recv(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestFingerprintWithoutLibvirt(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nothing.sock")
	c := testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": "test+unix:///default?socket=" + sock, "state_dir": t.TempDir()})
	fp, err := fingerprints(t, c).Recv()
	if err != nil || fp.GetHealthy() || !strings.Contains(fp.GetReason(), "unreachable") {
		t.Fatalf("fingerprint without libvirt: %v %v, want unhealthy with the reason", fp, err)
	}
}

// TestDiskOverlay: a disk image gets a qcow2 overlay backed by it (grown
// to disk_bytes) in the resource's dir, and a kernel image with
// disk_bytes an empty scratch disk; Delete removes them and keeps the
// image.
func TestDiskOverlay(t *testing.T) {
	qemuImg := testutil.NeedTool(t, "qemu-img", "apt-get install --no-install-recommends qemu-utils", "qemu-img")
	images := fakeImages(t)
	base := filepath.Join(images, "base.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", base, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	state := t.TempDir()
	c := testbin.Serve(t, &libvirtProvider{}, map[string]any{"uri": "test:///default", "state_dir": state, "images_dir": images,
		"name_prefix": "ut-overlay-"})
	info := func(path string) map[string]any {
		out, err := exec.Command(qemuImg, "info", "-U", "--output=json", path).Output()
		if err != nil {
			t.Fatalf("qemu-img info %s: %v", path, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		id, image string
		disk      float64
		backing   string
		size      float64
	}{
		{"disk-1", "base.qcow2", 256 << 20, base, 256 << 20},
		{"disk-2", "base.qcow2", 0, base, 64 << 20},
		{"disk-3", "base.qcow2", 1 << 20, base, 64 << 20}, // smaller than the image: the image's size
		{"disk-4", "guest", 32 << 20, "", 32 << 20},
	} {
		t.Run(tc.id, func(t *testing.T) {
			cfg := map[string]any{"image": tc.image}
			if tc.disk > 0 {
				cfg["disk_bytes"] = tc.disk
			}
			r, err := create(t, c, tc.id, cfg)
			if err != nil {
				t.Fatal(err)
			}
			del(t, c, tc.id)
			overlay := filepath.Join(filepath.Dir(r.GetAttributes()["console_log"]), "disk.qcow2")
			m := info(overlay)
			if m["format"] != "qcow2" || m["virtual-size"] != tc.size || (tc.backing != "" && m["backing-filename"] != tc.backing) {
				t.Errorf("overlay: format %v size %v backing %v", m["format"], m["virtual-size"], m["backing-filename"])
			}
			if _, err := c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: tc.id}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(overlay); !os.IsNotExist(err) {
				t.Errorf("Delete left the disk: %v", err)
			}
		})
	}
	if _, err := os.Stat(base); err != nil {
		t.Errorf("the image is gone: %v", err)
	}
}

// TestRecoverRestarts: a VM the host's restart left shut off (no reason:
// defined again, never started since) is started again by Recover; one
// destroyed outside unyo stays FAILED.
func TestRecoverRestarts(t *testing.T) {
	c, _ := serveTest(t)
	ctx := context.Background()
	conn, err := libvirt.NewConnect("test:///default")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		id       string
		redefine bool // as after a host restart
		want     pluginv1.ResourceState
	}{
		{"host-restart", true, sdk.Running},
		{"destroyed", false, sdk.Broken},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r, err := create(t, c, tc.id, map[string]any{"image": "guest"})
			if err != nil {
				t.Fatal(err)
			}
			del(t, c, tc.id)
			dom, err := conn.LookupDomainByName(r.GetAttributes()["domain"])
			if err != nil {
				t.Fatal(err)
			}
			defer dom.Free()
			if err := dom.Destroy(); err != nil {
				t.Fatal(err)
			}
			if tc.redefine {
				doc, err := dom.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
				if err != nil {
					t.Fatal(err)
				}
				if err := dom.Undefine(); err != nil {
					t.Fatal(err)
				}
				again, err := conn.DomainDefineXML(doc)
				if err != nil {
					t.Fatal(err)
				}
				again.Free()
			}
			rec, err := c.Provider.Recover(ctx, &pluginv1.RecoverRequest{Id: tc.id, Handle: r.GetHandle()})
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.GetResource(); got.GetState() != tc.want {
				t.Errorf("recovered %v (%s), want %v", got.GetState(), got.GetReason(), tc.want)
			}
		})
	}
}
