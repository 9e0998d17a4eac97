package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkStartToFirstCall: what an agent start does for one plugin: a
// new Host (with the agent's digest cache file), Start (digest check, exec,
// handshake, Info, Configure) and the first check answered over its stream.
// "cold" is the first start after the binary was installed or changed (no
// cache entry: it is hashed); "restart" is every later start of the agent.
func BenchmarkStartToFirstCall(b *testing.B) {
	t := &testing.T{}
	pc := crashy(t)
	waitOutRacyWindow(b, filepath.Join(binDir, "unyo-check-crashy"))
	for _, cold := range []bool{true, false} {
		name := map[bool]string{true: "cold", false: "restart"}[cold]
		b.Run(name, func(b *testing.B) {
			cache := filepath.Join(b.TempDir(), "plugin-digests.json")
			// start is one agent start; it returns how long the plugin took
			// to answer and how many times its binary was hashed.
			start := func() (time.Duration, int64) {
				h, err := New(Config{Dirs: []string{binDir}, Plugins: []PluginConfig{pc}, TempDir: shortTempDirB(b), DigestCache: cache})
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(context.Background())
				t0 := time.Now()
				if err := h.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				p, _ := h.Plugin("check", "crashy")
				if _, err := p.Check(context.Background(), &pluginv1.RunRequest{}); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0), h.hashes.Load()
			}
			start() // the agent's earlier run, which left the cache file
			var ds []time.Duration
			for b.Loop() {
				if cold {
					_ = os.Remove(cache)
				}
				d, n := start()
				if (n == 1) != cold {
					b.Fatalf("%d hashes in a %s start", n, name)
				}
				ds = append(ds, d)
			}
			b.ReportMetric(float64(median(ds).Microseconds())/1000, "median-ms")
		})
	}
}

// waitOutRacyWindow waits until the binary built moments ago is older than
// racyWindow, as any installed binary is, so that its digest is cached.
func waitOutRacyWindow(b *testing.B, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	if id, ok := identity(fi); ok {
		time.Sleep(time.Until(id.changed().Add(racyWindow + 10*time.Millisecond)))
	}
}

// BenchmarkRestartToFirstCall: a start of a plugin its Host has started
// before (as after a crash: hash check, exec, handshake, Info, Configure) to
// its first answered check.
func BenchmarkRestartToFirstCall(b *testing.B) {
	p := startedCrashy(b, Config{})
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		inst, err := p.start(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inst.conn.Check.Run(context.Background(), &pluginv1.RunRequest{}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
		p.kill(inst)
	}
	b.ReportMetric(float64(median(ds).Microseconds())/1000, "median-ms")
}

// BenchmarkStreamedRuns: checks per second through one plugin's RunStream,
// one sender and one receiver (the protocol's ceiling).
func BenchmarkStreamedRuns(b *testing.B) {
	p := startedCrashy(b, Config{})
	b.ResetTimer()
	t0 := time.Now()
	err := p.Do(context.Background(), func(ctx context.Context, c *base.Conn) error {
		st, err := c.Check.RunStream(ctx)
		if err != nil {
			return err
		}
		errc := make(chan error, 1)
		go func() {
			for i := range b.N {
				if err := st.Send(&pluginv1.RunStreamRequest{RequestId: fmt.Sprint(i), Run: &pluginv1.RunRequest{}}); err != nil {
					errc <- err
					return
				}
			}
			errc <- st.CloseSend()
		}()
		n := 0
		for {
			_, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			n++
		}
		if n != b.N {
			return fmt.Errorf("got %d answers for %d runs", n, b.N)
		}
		return <-errc
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "runs/s")
}

// BenchmarkStreamedChecks: checks per second through Plugin.Check, as the
// agent runs them: many concurrent callers multiplexed over the instance's
// one stream.
func BenchmarkStreamedChecks(b *testing.B) {
	p := startedCrashy(b, Config{})
	b.SetParallelism(32) // callers per core: runs in flight, like the agent's check workers
	b.ResetTimer()
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Check(context.Background(), &pluginv1.RunRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "runs/s")
}

// BenchmarkRecoveryAfterSIGKILL: from SIGKILL of the plugin to the next
// check answered through Plugin.Check (over a new stream to the restarted
// plugin). "agent" uses the supervisor's defaults, as the agent does
// (backoff 250ms ±20%); "backoff-10ms" shows the restart itself. Each
// kill is measured as a first crash (StableAfter 1ns resets the backoff).
func BenchmarkRecoveryAfterSIGKILL(b *testing.B) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
	}{{"agent", 0}, {"backoff-10ms", 10 * time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			p := startedCrashy(b, Config{BackoffMin: tc.backoff, CrashLoopLimit: 1 << 30, StableAfter: time.Nanosecond})
			var ds []time.Duration
			for b.Loop() {
				pid := p.PID()
				if _, err := p.Check(context.Background(), &pluginv1.RunRequest{}); err != nil {
					b.Fatal(err) // the stream is open before the kill
				}
				t0 := time.Now()
				_ = syscall.Kill(pid, syscall.SIGKILL)
				for {
					if p.PID() != pid {
						if _, err := p.Check(context.Background(), &pluginv1.RunRequest{}); err == nil {
							break
						}
					}
					time.Sleep(time.Millisecond)
				}
				ds = append(ds, time.Since(t0))
			}
			b.ReportMetric(float64(median(ds).Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(slices.Max(ds).Microseconds())/1000, "max-ms")
		})
	}
}

// startedCrashy starts a Host running the crashy plugin with cfg (its
// Dirs, Plugins and TempDir filled in), closed when the benchmark ends.
func startedCrashy(b *testing.B, cfg Config) *Plugin {
	cfg.Dirs, cfg.Plugins, cfg.TempDir = []string{binDir}, []PluginConfig{crashy(&testing.T{})}, shortTempDirB(b)
	h, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(context.Background()) })
	h.racy = 0 // the binary was built moments ago; cache its digest anyway
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	return p
}

// shortTempDirB keeps socket paths under the unix limit (b.TempDir() of a
// sub-benchmark may not).
func shortTempDirB(b *testing.B) string {
	d, err := os.MkdirTemp("", "ub")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}
