package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/conformance"
	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/provider-docker/dockertest"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const testImage = "unyo-test/busybox:1"

// startDocker starts a private dockerd with the busybox test image.
func startDocker(t testing.TB) *dockertest.Daemon {
	d := dockertest.Start(t)
	d.BusyboxImage(testImage)
	return d
}

func serve(t testing.TB, d *dockertest.Daemon) *base.Conn {
	return testbin.Serve(t, &dockerProvider{}, map[string]any{"host": d.Host})
}

func create(t testing.TB, c *base.Conn, id string, cfg map[string]any) (*pluginv1.Resource, error) {
	t.Helper()
	r, err := c.Provider.Create(context.Background(), &pluginv1.CreateRequest{Id: id, Config: testbin.Struct(t, cfg),
		Labels: map[string]string{"unyo.dev/node": "n1", "unyo.dev/cluster": "c1", "unyo.dev/compute": id, "unyo.dev/service": "web"}})
	return r.GetResource(), err
}

func sleeper(extra map[string]any) map[string]any {
	cfg := map[string]any{"image": testImage, "command": []any{"sleep", "3600"}}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// containers lists every container of the daemon (the plugin's or not).
func containers(t testing.TB, d *dockertest.Daemon) []container.Summary {
	t.Helper()
	cli := d.Client()
	defer cli.Close()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs()})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return cs
}

func waitFor(t testing.TB, c *base.Conn, id string, want pluginv1.ResourceState) *pluginv1.Resource {
	t.Helper()
	var last *pluginv1.Resource
	testutil.Eventually(t, 30*time.Second, id+" reaching "+want.String(), func() error {
		g, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: id})
		if err != nil {
			return err
		}
		last = g.GetResource()
		if last.GetState() != want {
			return status.Errorf(codes.Unknown, "state %v (%s)", last.GetState(), last.GetReason())
		}
		return nil
	})
	return last
}

// TestWithDockerd runs the cases that share one dockerd.
func TestWithDockerd(t *testing.T) {
	d := startDocker(t)

	t.Run("conformance", func(t *testing.T) {
		fx, err := conformance.LoadFixtures("testdata/conformance.yaml")
		if err != nil {
			t.Fatal(err)
		}
		fx.Config["host"] = d.Host
		conformance.Run(t, conformance.Binary(conformance.Build(t, ".", "unyo-provider-docker"), fx))
	})

	t.Run("limits_and_labels", func(t *testing.T) {
		c := serve(t, d)
		r, err := create(t, c, "web-1", sleeper(map[string]any{"vcpus": 0.5, "memory_bytes": float64(64 << 20), "pids_limit": 16.0,
			"env": map[string]any{"GREETING": "hi"}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: "web-1"}) })
		if r.GetState() != sdk.Running {
			t.Fatalf("created in state %v (%s)", r.GetState(), r.GetReason())
		}
		cli := d.Client()
		defer cli.Close()
		ins, err := cli.ContainerInspect(context.Background(), r.GetAttributes()["container_id"])
		if err != nil {
			t.Fatal(err)
		}
		hc := ins.HostConfig
		if hc.NanoCPUs != 5e8 || hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 16 || hc.NetworkMode != "none" {
			t.Errorf("host config: cpus %d mem %d swap %d pids %v net %s", hc.NanoCPUs, hc.Memory, hc.MemorySwap, hc.PidsLimit, hc.NetworkMode)
		}
		if got, want := r.GetAttributes()["netns"], fmt.Sprintf("/proc/%d/ns/net", ins.State.Pid); got != want {
			t.Errorf("netns attribute %q, want %q (where the agent wires the container's port)", got, want)
		}
		for k, v := range map[string]string{"unyo.dev/node": "n1", "unyo.dev/cluster": "c1", "unyo.dev/compute": "web-1", "unyo.dev/service": "web", labelID: "web-1"} {
			if ins.Config.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, ins.Config.Labels[k], v)
			}
		}
		if !strings.Contains(strings.Join(ins.Config.Env, " "), "GREETING=hi") {
			t.Errorf("env %v lacks GREETING=hi", ins.Config.Env)
		}
		l, err := c.Provider.List(context.Background(), &pluginv1.ListRequest{Labels: map[string]string{"unyo.dev/node": "n1"}})
		if err != nil || len(l.GetResources()) != 1 || l.GetResources()[0].GetId() != "web-1" {
			t.Errorf("List by owner: %v %v", l, err)
		}
		if l, _ := c.Provider.List(context.Background(), &pluginv1.ListRequest{Labels: map[string]string{"unyo.dev/node": "n2"}}); len(l.GetResources()) != 0 {
			t.Errorf("List by another owner: %v", l)
		}
		st, err := c.Provider.Stats(context.Background(), &pluginv1.StatsRequest{Id: "web-1"})
		got := map[string]bool{}
		for _, m := range st.GetMetrics() {
			got[m.GetLabel()] = true
		}
		for _, w := range []string{"cpu_seconds", "rss", "net_rx_bytes", "net_tx_bytes", "blkio_read_bytes", "blkio_write_bytes"} {
			if !got[w] {
				t.Errorf("Stats lacks %s: %v %v", w, st, err)
			}
		}
		fs, err := c.Provider.Fingerprint(context.Background(), &pluginv1.FingerprintRequest{Interval: durationpb.New(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		fp, err := fs.Recv()
		if err != nil || !fp.GetHealthy() || fp.GetCapacity().GetCpus() < 1 || fp.GetCapacity().GetMemoryBytes() <= 0 || fp.GetAttributes()["docker.version"] == "" {
			t.Errorf("fingerprint: %v %v", fp, err)
		}
	})

	t.Run("exits_at_once", func(t *testing.T) {
		c := serve(t, d)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, err := c.Provider.Watch(ctx, &pluginv1.WatchRequest{Ids: []string{"crash-1"}})
		if err != nil {
			t.Fatal(err)
		}
		events := make(chan *pluginv1.WatchResponse, 64)
		go func() {
			for {
				e, err := w.Recv()
				if err != nil {
					close(events)
					return
				}
				events <- e
			}
		}()
		time.Sleep(200 * time.Millisecond) // the event stream is open
		cfg := map[string]any{"image": testImage, "command": []any{"sh", "-c", "echo starting; echo boom-line >&2; exit 3"}, "max_restarts": 1.0}
		if _, err := create(t, c, "crash-1", cfg); err != nil {
			t.Fatalf("Create of a container that exits at once: %v (it started; its failure is its state)", err)
		}
		t.Cleanup(func() { _, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: "crash-1"}) })
		var r *pluginv1.Resource
		testutil.Eventually(t, 30*time.Second, "crash-1 failed after its restart", func() error {
			g, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "crash-1"})
			if err != nil {
				return err
			}
			r = g.GetResource()
			if r.GetState() != sdk.Broken || !strings.Contains(r.GetReason(), "after 1 restarts") {
				return status.Errorf(codes.Unknown, "%v: %s", r.GetState(), r.GetReason())
			}
			return nil
		})
		for _, want := range []string{"exited with status 3", "boom-line"} {
			if !strings.Contains(r.GetReason(), want) {
				t.Errorf("reason %q lacks %q", r.GetReason(), want)
			}
		}
		if r.GetAttributes()["exit_code"] != "3" {
			t.Errorf("exit_code attribute %q", r.GetAttributes()["exit_code"])
		}
		// Watch reported the failure (die events) as it happened.
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatal("Watch ended")
				}
				if e.GetId() == "crash-1" && e.GetState() == sdk.Broken && strings.Contains(e.GetReason(), "status 3") {
					return
				}
			case <-deadline:
				t.Fatal("Watch reported no failure of crash-1")
			}
		}
	})

	t.Run("oom_killed", func(t *testing.T) {
		c := serve(t, d)
		// dd's 32 MiB buffer does not fit in 8 MiB without swap.
		cfg := map[string]any{"image": testImage, "command": []any{"sh", "-c", "echo filling; dd if=/dev/zero of=/dev/null bs=32M count=4"},
			"memory_bytes": float64(8 << 20), "restart": "no"}
		if _, err := create(t, c, "oom-1", cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: "oom-1"}) })
		r := waitFor(t, c, "oom-1", sdk.Broken)
		if !strings.Contains(r.GetReason(), "OOM") {
			t.Errorf("reason %q does not name the OOM kill", r.GetReason())
		}
	})

	t.Run("missing_image", func(t *testing.T) {
		c := serve(t, d)
		before := len(containers(t, d))
		_, err := create(t, c, "noimg-1", map[string]any{"image": "unyo-test/nowhere:1"})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "unyo-test/nowhere:1") || !strings.Contains(err.Error(), "never pulls") {
			t.Fatalf("Create with a missing image: %v, want FAILED_PRECONDITION naming the image", err)
		}
		if after := len(containers(t, d)); after != before {
			t.Errorf("a failed Create left %d containers", after-before)
		}
		if _, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "noimg-1"}); status.Code(err) != codes.NotFound {
			t.Errorf("Get after the failed Create: %v", err)
		}
	})

	t.Run("flavor_too_large", func(t *testing.T) {
		c := serve(t, d)
		before := len(containers(t, d))
		_, err := create(t, c, "huge-1", sleeper(map[string]any{"vcpus": 4096.0}))
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "4096 vCPUs") {
			t.Fatalf("Create of a flavor larger than the node: %v", err)
		}
		if after := len(containers(t, d)); after != before {
			t.Errorf("a refused Create left %d containers", after-before)
		}
	})

	t.Run("image_tar", func(t *testing.T) {
		c := serve(t, d)
		// A tar that is not an image: loading fails with a clear error and
		// leaves nothing.
		bad := t.TempDir() + "/bad.tar"
		if err := writeFile(bad, "not a tar"); err != nil {
			t.Fatal(err)
		}
		_, err := create(t, c, "tar-1", map[string]any{"image": "unyo-test/fromtar:1", "image_tar": bad})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), bad) {
			t.Fatalf("Create from a bad tar: %v", err)
		}
	})
}

func TestFingerprintWithoutDockerd(t *testing.T) {
	c := testbin.Serve(t, &dockerProvider{}, map[string]any{"host": "unix://" + t.TempDir() + "/nothing.sock"})
	fs, err := c.Provider.Fingerprint(context.Background(), &pluginv1.FingerprintRequest{Interval: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fs.Recv()
	if err != nil || fp.GetHealthy() || !strings.Contains(fp.GetReason(), "does not answer") {
		t.Fatalf("fingerprint without dockerd: %v %v, want unhealthy with the reason", fp, err)
	}
}

// TestDockerdKilled: dockerd is SIGKILLed while a resource runs and
// started again; Recover from the stored handle finds the same container,
// running, and nothing is doubled.
func TestDockerdKilled(t *testing.T) {
	d := startDocker(t)
	c := serve(t, d)
	r, err := create(t, c, "web-1", sleeper(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Provider.Delete(context.Background(), &pluginv1.DeleteRequest{Id: "web-1"}) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Provider.Watch(ctx, &pluginv1.WatchRequest{Ids: []string{"web-1"}})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan *pluginv1.WatchResponse, 64)
	go func() {
		defer close(watched)
		for {
			e, err := w.Recv()
			if err != nil {
				return
			}
			watched <- e
		}
	}()
	time.Sleep(200 * time.Millisecond) // the event stream is open
	d.Kill()
	if _, err := c.Provider.Get(context.Background(), &pluginv1.GetRequest{Id: "web-1"}); err == nil {
		t.Errorf("Get with dockerd down succeeded")
	}
	d.Restart()
	rec, err := c.Provider.Recover(context.Background(), &pluginv1.RecoverRequest{Id: "web-1", Handle: r.GetHandle()})
	if err != nil {
		t.Fatalf("Recover after dockerd restarted: %v", err)
	}
	if rec.GetResource().GetState() != sdk.Running || rec.GetResource().GetAttributes()["container_id"] != r.GetAttributes()["container_id"] {
		t.Errorf("recovered %v (%s) container %s, want running container %s", rec.GetResource().GetState(), rec.GetResource().GetReason(),
			rec.GetResource().GetAttributes()["container_id"], r.GetAttributes()["container_id"])
	}
	// Create again (as an agent that lost its handles would): the same
	// container, not a second one.
	again, err := create(t, c, "web-1", sleeper(nil))
	if err != nil || again.GetAttributes()["container_id"] != r.GetAttributes()["container_id"] {
		t.Errorf("Create after recovery: %v %v", again, err)
	}
	if cs := containers(t, d); len(cs) != 1 {
		t.Errorf("%d containers after the restart, want 1", len(cs))
	}
	// Watch outlived dockerd: it reopened the event stream and reported
	// the resource's state again.
	deadline := time.After(15 * time.Second)
	for {
		select {
		case e, ok := <-watched:
			if !ok {
				t.Fatal("Watch ended when dockerd went away")
			}
			if e.GetId() == "web-1" && e.GetState() == sdk.Running {
				return
			}
		case <-deadline:
			t.Fatal("Watch reported nothing after dockerd came back")
		}
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
