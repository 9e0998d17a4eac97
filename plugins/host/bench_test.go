package host

import (
	"context"
	"fmt"
	"io"
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

// BenchmarkStartToFirstCall: host start of one plugin (hash check, exec,
// handshake, Info, Configure) to its first answered check.
func BenchmarkStartToFirstCall(b *testing.B) {
	t := &testing.T{}
	pc := crashy(t)
	var ds []time.Duration
	for b.Loop() {
		dir := shortTempDirB(b)
		h, err := New(Config{Dirs: []string{binDir}, Plugins: []PluginConfig{pc}, TempDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := h.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		p, _ := h.Plugin("check", "crashy")
		if _, err := p.Check(context.Background(), &pluginv1.RunRequest{}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
		_ = h.Close(context.Background())
	}
	b.ReportMetric(float64(median(ds).Microseconds())/1000, "median-ms")
}

// BenchmarkRestartToFirstCall: a start of a plugin its Host has started
// before (as after a crash: hash check, exec, handshake, Info, Configure) to
// its first answered check.
func BenchmarkRestartToFirstCall(b *testing.B) {
	t := &testing.T{}
	h, err := New(Config{Dirs: []string{binDir}, Plugins: []PluginConfig{crashy(t)}, TempDir: shortTempDirB(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	h.racy = 0 // the binary was built moments ago; cache its digest anyway
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
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

// BenchmarkStreamedRuns: checks per second through one plugin's RunStream.
func BenchmarkStreamedRuns(b *testing.B) {
	t := &testing.T{}
	h, err := New(Config{Dirs: []string{binDir}, Plugins: []PluginConfig{crashy(t)}, TempDir: shortTempDirB(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	b.ResetTimer()
	t0 := time.Now()
	err = p.Do(context.Background(), func(ctx context.Context, c *base.Conn) error {
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

// BenchmarkRecoveryAfterSIGKILL: from SIGKILL of the plugin to the next
// successful call through the supervisor (backoff minimum 10ms).
func BenchmarkRecoveryAfterSIGKILL(b *testing.B) {
	t := &testing.T{}
	h, err := New(Config{Dirs: []string{binDir}, Plugins: []PluginConfig{crashy(t)}, TempDir: shortTempDirB(b),
		BackoffMin: 10 * time.Millisecond, CrashLoopLimit: 1 << 30,
		// Measure a first recovery every time, not the grown backoff.
		StableAfter: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	h.racy = 0 // the binary was built moments ago; cache its digest anyway
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	p, _ := h.Plugin("check", "crashy")
	var ds []time.Duration
	for b.Loop() {
		pid := p.PID()
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
}

func shortTempDirB(b *testing.B) string {
	d := b.TempDir()
	if len(d) > 60 {
		b.Skip("temp dir too long for unix sockets")
	}
	return d
}
