package execute

import (
	"context"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/testutil"
)

// BenchmarkRunCheckDummy runs monitoring-plugins' check_dummy, the
// cheapest real plugin, and reports the CPU time per run of this process
// (what Run adds around the fork and exec: pipes, capture, waiting,
// output cleaning) and of the children (the plugin itself), from
// getrusage, with the allocations.
func BenchmarkRunCheckDummy(b *testing.B) {
	path := testutil.NeedTool(b, "check_dummy", "apt-get install -y monitoring-plugins-basic", filepath.Join(pluginDir, "check_dummy"))
	ctx := context.Background()
	cmd := Command{Path: path, Args: []string{"0", "fine"}, Env: []string{"PATH=/usr/bin:/bin"}}
	self0, kids0 := rusage(unix.RUSAGE_SELF), rusage(unix.RUSAGE_CHILDREN)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if res := Run(ctx, cmd); res.Err != nil || res.ExitCode != 0 {
			b.Fatalf("check_dummy: exit %d, %v", res.ExitCode, res.Err)
		}
	}
	b.StopTimer()
	self, kids := rusage(unix.RUSAGE_SELF)-self0, rusage(unix.RUSAGE_CHILDREN)-kids0
	b.ReportMetric(self/float64(b.N)*1e6, "self-CPU-µs/run")
	b.ReportMetric(kids/float64(b.N)*1e6, "plugin-CPU-µs/run")
}

// rusage is the CPU seconds (user and system) getrusage reports for who.
func rusage(who int) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
