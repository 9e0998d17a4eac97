package sysmetrics

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// BenchmarkCollect measures a steady-state collection of this machine:
// the first two calls (every series new, then every rate first computed)
// are left out. cpu-ns/op is user+system CPU of the whole process per
// collection, garbage collection included, from getrusage(2); it is the
// figure to compare with BenchmarkNodeExporterScrape.
func BenchmarkCollect(b *testing.B) {
	c := New(Options{Root: "/"})
	ctx := context.Background()
	dst, err := c.Collect(ctx, nil)
	if err != nil {
		b.Logf("first collection: %v", err)
	}
	dst, _ = c.Collect(ctx, dst[:0])
	b.ReportAllocs()
	before := cpuSelf(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if dst, err = c.Collect(ctx, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuSelf(b)-before)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(len(dst)), "samples")
}

func cpuSelf(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNodeExporterScrape measures Debian's prometheus-node-exporter
// answering one scrape of /metrics, as Prometheus does it (gzip), on a
// private 127.0.0.1 port with an empty textfile directory. cpu-ns/op is
// the exporter's own utime+stime per scrape, from /proc/PID/stat; the
// client's cost is not counted. Clock ticks are 10 ms, so run it with
// enough scrapes, e.g. -benchtime=200x. "default" runs the packaged
// collector set; "processes" adds --collector.processes, which is off by
// default there but always on in this package. Skipped when the binary is
// not installed (apt-get install prometheus-node-exporter).
func BenchmarkNodeExporterScrape(b *testing.B) {
	bin := testutil.NeedTool(b, "node-exporter", "apt-get install -y prometheus-node-exporter", "prometheus-node-exporter", "node_exporter")
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default", nil},
		{"processes", []string{"--collector.processes"}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchExporter(b, bin, tc.flags) })
	}
}

func benchExporter(b *testing.B, bin string, flags []string) {
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "exporter.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"--web.listen-address=" + addr, "--collector.textfile.directory=" + dir}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the benchmark even if it is killed before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	url := "http://" + addr + "/metrics"
	client := &http.Client{Timeout: 30 * time.Second}
	scrape := func() int64 {
		resp, err := client.Get(url)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return -1
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); scrape() < 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			b.Fatalf("exporter did not answer on %s:\n%s", addr, log)
		}
	}
	size := scrape() // warm: the first scrape initializes collectors
	before := procCPU(b, cmd.Process.Pid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if scrape() < 0 {
			b.Fatal("scrape failed")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(procCPU(b, cmd.Process.Pid)-before)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(size), "body-bytes")
}

// procCPU returns utime+stime of a process, in nanoseconds, assuming the
// USER_HZ of 100 that Linux uses on every architecture.
func procCPU(b *testing.B, pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// After the last ')': state is field 0, utime 11 and stime 12.
	f := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("bad /proc/%d/stat: %q", pid, data)
	}
	return (ut + st) * int64(time.Second/100)
}
