package sysmetrics

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const netDevHeader = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

// netDevLine renders an interface with rx bytes/packets and tx
// bytes/packets set and every other counter 0.
func netDevLine(name string, rxBytes, rxPackets, txBytes, txPackets uint64) string {
	return name + ": " + u(rxBytes) + " " + u(rxPackets) + " 0 0 0 0 0 0 " + u(txBytes) + " " + u(txPackets) + " 0 0 0 0 0 0\n"
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// stepper collects from a synthetic root, advancing the clock 10 s per
// step after rewriting the given files.
type stepper struct {
	t    *testing.T
	root string
	now  time.Time
	c    *Collector
}

func newStepper(t *testing.T) *stepper {
	s := &stepper{t: t, root: t.TempDir(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.c = testCollector(s.root, &s.now)
	return s
}

func (s *stepper) step(files map[string]string) map[string]float64 {
	s.t.Helper()
	writeFiles(s.t, s.root, files)
	s.now = s.now.Add(10 * time.Second)
	return byKey(s.t, collect(s.t, s.c))
}

func TestCounterResetSkipsRateOnce(t *testing.T) {
	s := newStepper(t)
	stat := func(ctxt uint64) string { return "ctxt " + u(ctxt) + "\n" }
	disk := func(reads, ioMs uint64) string {
		return "   8       0 sda " + u(reads) + " 0 0 0 0 0 0 0 0 " + u(ioMs) + " 0\n"
	}
	files := func(ctxt, rx, reads uint64) map[string]string {
		return map[string]string{
			"proc/stat":      stat(ctxt),
			"proc/net/dev":   netDevHeader + netDevLine("eth0", rx, rx/100, 0, 0),
			"proc/diskstats": disk(reads, reads*10),
		}
	}
	const (
		ctxtRate = `node_context_switches_per_second`
		rxRate   = `node_network_receive_bytes_per_second{device="eth0"}`
		readRate = `node_disk_reads_completed_per_second{device="sda",type="disk"}`
	)
	s.step(files(1000, 100000, 500))
	got := s.step(files(2000, 200000, 600))
	if got[ctxtRate] != 100 || got[rxRate] != 10000 || got[readRate] != 10 {
		t.Fatalf("before reset: ctxt %v rx %v reads %v", got[ctxtRate], got[rxRate], got[readRate])
	}
	// Everything restarts from small values: counters reset, not wrapped.
	got = s.step(files(50, 1000, 5))
	for _, k := range []string{ctxtRate, rxRate, readRate} {
		if v, ok := got[k]; ok {
			t.Errorf("after reset: %s = %v, want no rate", k, v)
		}
	}
	if _, ok := got[`node_disk_io_now{device="sda",type="disk"}`]; !ok {
		t.Error("after reset: the gauge must still be reported")
	}
	got = s.step(files(150, 2000, 15))
	if got[ctxtRate] != 10 || got[rxRate] != 100 || got[readRate] != 1 {
		t.Errorf("after recovery: ctxt %v rx %v reads %v", got[ctxtRate], got[rxRate], got[readRate])
	}
}

func TestCPUIowaitMayDecrease(t *testing.T) {
	s := newStepper(t)
	s.step(map[string]string{"proc/stat": "cpu0 100 0 100 1000 50 0 0 0 0 0\ncpu1 100 0 100 1000 50 0 0 0 0 0\n"})
	got := s.step(map[string]string{"proc/stat": "cpu0 160 0 120 1120 48 0 0 0 0 0\ncpu1 100 0 100 1000 50 0 50 0 0 0\n"})
	// cpu0: iowait stepped back 2 ticks; the other modes still add up.
	want := map[string]float64{
		`node_cpu_usage_ratio{cpu="0",mode="user"}`:    0.3,
		`node_cpu_usage_ratio{cpu="0",mode="system"}`:  0.1,
		`node_cpu_usage_ratio{cpu="0",mode="idle"}`:    0.6,
		`node_cpu_usage_ratio{cpu="0",mode="iowait"}`:  0,
		`node_cpu_usage_ratio{cpu="1",mode="softirq"}`: 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// A busy column going back is a reset: the CPU skips a round.
	got = s.step(map[string]string{"proc/stat": "cpu0 10 0 120 1200 48 0 0 0 0 0\ncpu1 100 0 100 1100 50 0 50 0 0 0\n"})
	if v, ok := got[`node_cpu_usage_ratio{cpu="0",mode="idle"}`]; ok {
		t.Errorf("cpu0 after user went back: idle %v, want no ratio", v)
	}
	if got[`node_cpu_usage_ratio{cpu="1",mode="idle"}`] != 1 {
		t.Errorf("cpu1 = %v, want idle 1", got[`node_cpu_usage_ratio{cpu="1",mode="idle"}`])
	}
}

func TestWrap32(t *testing.T) {
	s := newStepper(t)
	const top = 1<<32 - 1
	s.step(map[string]string{
		"proc/net/dev": netDevHeader +
			netDevLine("eth0", top-999, 5000, 10, 1) + // near the top of 32 bits
			netDevLine("eth1", 5_000_000_000, 5000, 10, 1) + // proven 64-bit
			netDevLine("eth2", 1_000_000, 5000, 10, 1), // small: a decrease is a reset
		"proc/diskstats": "   8       0 sda 10 0 0 0 10 0 0 0 0 " + u(top-99) + " 0\n",
	})
	got := s.step(map[string]string{
		"proc/net/dev": netDevHeader +
			netDevLine("eth0", 1000, 5100, 20, 2) + // wrapped: +999+1+1000 = 2000
			netDevLine("eth1", 1000, 5100, 20, 2) + // 64-bit counter went back: reset
			netDevLine("eth2", 1000, 5100, 20, 2),
		"proc/diskstats": "   8       0 sda 20 0 0 0 20 0 0 0 0 900 0\n", // io ms +100+900
	})
	if v := got[`node_network_receive_bytes_per_second{device="eth0"}`]; v != 200 {
		t.Errorf("eth0 rx after 32-bit wrap = %v, want 200", v)
	}
	if v := got[`node_network_receive_packets_per_second{device="eth0"}`]; v != 10 {
		t.Errorf("eth0 rx packets = %v, want 10", v)
	}
	for _, dev := range []string{"eth1", "eth2"} {
		if v, ok := got[`node_network_receive_bytes_per_second{device="`+dev+`"}`]; ok {
			t.Errorf("%s: rate %v after a reset, want none", dev, v)
		}
	}
	if v := got[`node_disk_io_time_seconds_per_second{device="sda",type="disk"}`]; v != 0.1 {
		t.Errorf("sda io time across the 32-bit ms wrap = %v, want 0.1", v)
	}
}

func TestMissingFiles(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	c := testCollector(root, &now)
	out, err := c.Collect(context.Background(), nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("empty root: %d samples, err %v", len(out), err)
	}
	writeFiles(t, root, map[string]string{"proc/loadavg": "0.50 0.40 0.30 2/200 1234\n"})
	got := byKey(t, collect(t, c))
	want := map[string]float64{"node_load1": 0.5, "node_load5": 0.4, "node_load15": 0.3, "node_load_tasks_runnable": 2, "node_load_tasks": 200}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestMalformedNamesFileAndLine(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"proc/meminfo":   "MemTotal:       1000 kB\nMemFree:        abc kB\nCached:           10 kB\nBogus line\n",
		"proc/diskstats": "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n   8       1 sda1 1 2 3\n",
		"proc/loadavg":   "0.50 0.40 0.30 2/200 1234\n",
		"proc/net/snmp":  "Tcp: ActiveOpens CurrEstab\nTcp: 5\nUdp: InDatagrams\nUdp: 7\n",
	})
	now := time.Now()
	c := testCollector(root, &now)
	out, err := c.Collect(context.Background(), nil)
	if err == nil {
		t.Fatal("no error for malformed files")
	}
	wantErrs := map[string]int{"proc/meminfo": 2, "proc/diskstats": 2, "proc/net/snmp": 2}
	for file, line := range wantErrs {
		var found bool
		for _, e := range unjoin(err) {
			var pe *ParseError
			if errors.As(e, &pe) && strings.HasSuffix(pe.Path, file) {
				found = true
				if pe.Line != line {
					t.Errorf("%s: line %d, want %d", file, pe.Line, line)
				}
				if !strings.Contains(pe.Error(), filepath.Join(root, file)+":") {
					t.Errorf("error %q does not name %s", pe.Error(), file)
				}
				if file == "proc/meminfo" && (pe.More != 1 || !strings.Contains(pe.Error(), "1 more")) {
					t.Errorf("meminfo: More = %d (%q), want 1", pe.More, pe.Error())
				}
			}
		}
		if !found {
			t.Errorf("no ParseError for %s in %v", file, err)
		}
	}
	got := byKey(t, out)
	for _, k := range []string{"node_memory_MemTotal_bytes", "node_memory_Cached_bytes", "node_load1",
		`node_disk_io_now{device="sda",type="disk"}`} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s not collected next to the malformed lines", k)
		}
	}
	if _, ok := got["node_memory_MemFree_bytes"]; ok {
		t.Error("malformed MemFree reported")
	}
	if _, ok := got["node_netstat_Tcp_CurrEstab"]; ok {
		t.Error("Tcp values that do not pair with the header were reported")
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestFieldsByName feeds files whose columns and keys are in another order
// than the kernel's: values must follow the names, not the positions.
func TestFieldsByName(t *testing.T) {
	s := newStepper(t)
	hdr := "Inter-|   Transmit                     |  Receive\n" +
		" face |packets bytes errs drop carrier|drop errs multicast packets bytes\n"
	snmp := func(active, curr, inSegs uint64) string {
		return "Udp: OutDatagrams InDatagrams\nUdp: 0 0\n" +
			"Tcp: InSegs MaxConn CurrEstab RtoMin ActiveOpens\nTcp: " + u(inSegs) + " -1 " + u(curr) + " 200 " + u(active) + "\n"
	}
	s.step(map[string]string{
		"proc/net/dev":  hdr + "eth0: 10 1000 0 0 0 0 0 0 20 2000\n",
		"proc/net/snmp": snmp(100, 3, 5000),
		"proc/meminfo":  "Cached: 30 kB\nMemFree: 20 kB\nMemTotal: 100 kB\n",
		"proc/vmstat":   "pgmajfault 7\nfoo 1\npgfault 100\n",
	})
	got := s.step(map[string]string{
		"proc/net/dev":  hdr + "eth0: 20 3000 0 0 0 0 0 0 30 5000\n",
		"proc/net/snmp": snmp(150, 4, 6000),
		"proc/vmstat":   "pgfault 200\npgmajfault 17\n",
	})
	want := map[string]float64{
		`node_network_transmit_packets_per_second{device="eth0"}`: 1,
		`node_network_transmit_bytes_per_second{device="eth0"}`:   200,
		`node_network_receive_packets_per_second{device="eth0"}`:  1,
		`node_network_receive_bytes_per_second{device="eth0"}`:    300,
		`node_netstat_Tcp_ActiveOpens_per_second`:                 5,
		`node_netstat_Tcp_InSegs_per_second`:                      100,
		`node_netstat_Tcp_CurrEstab`:                              4,
		`node_memory_MemTotal_bytes`:                              100 * 1024,
		`node_memory_MemFree_bytes`:                               20 * 1024,
		`node_memory_Cached_bytes`:                                30 * 1024,
		`node_vmstat_pgfault_per_second`:                          10,
		`node_vmstat_pgmajfault_per_second`:                       1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got[`node_network_transmit_colls_per_second{device="eth0"}`]; ok {
		t.Error("a column that is not in the header was reported")
	}
}

func TestParsePidStat(t *testing.T) {
	for _, tc := range []struct {
		line    string
		state   byte
		threads int
		ok      bool
	}{
		{"1 (init) S 0 1 1 0 -1 4202752 1 2 3 4 5 6 7 8 20 0 1 0", 'S', 1, true},
		{"956 (x) (y) R 897 892 25833 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 12 0", 'R', 12, true},
		{"7 (a b)) D 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0", 'D', 3, true},
		{"7 (short) S 1 1", 0, 0, false},
		{"7 no parens S 1", 0, 0, false},
		{"7 (two) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0", 0, 0, false},
	} {
		st, th, ok := parsePidStat([]byte(tc.line))
		if st != tc.state || th != tc.threads || ok != tc.ok {
			t.Errorf("%q: got %q %d %v", tc.line, st, th, ok)
		}
	}
}

func TestUtmpTruncated(t *testing.T) {
	root := t.TempDir()
	b := append(utmpBytes(utUserProcess, utUserProcess, utLoginProcess), 1, 2, 3)
	writeFiles(t, root, map[string]string{"run/utmp": string(b)}) // no var/run: falls back to /run
	now := time.Now()
	c := testCollector(root, &now)
	out, err := c.Collect(context.Background(), nil)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.HasSuffix(pe.Path, "run/utmp") || pe.Line != 4 {
		t.Errorf("err = %v, want a ParseError for record 4 of run/utmp", err)
	}
	if got := byKey(t, out); got["node_users_logged_in"] != 2 {
		t.Errorf("users = %v, want 2", got["node_users_logged_in"])
	}
}

func TestMountTableFiltering(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"proc/mounts": `rootfs / rootfs rw 0 0
/dev/sda1 / ext4 rw 0 0
tmpfs /run tmpfs rw,nosuid 0 0
tmpfs /dev/shm tmpfs rw 0 0
overlay /var/lib/docker/overlay2/abc/merged overlay rw 0 0
/dev/sda2 /var/lib/docker xfs rw 0 0
/dev/sdb1 /mnt/a\040b\134c ext4 ro,noatime 0 0
/dev/sdc1 /mnt/over ext4 rw 0 0
/dev/sdd1 /mnt/over xfs rw 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw 0 0
`})
	now := time.Now()
	c := testCollector(root, &now)
	fss, err := c.mountedFilesystems()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fss {
		ro := ""
		if f.ReadOnly {
			ro = " ro"
		}
		got = append(got, f.Device+" "+f.MountPoint+" "+f.Type+ro)
	}
	want := []string{"/dev/sda1 / ext4", "/run tmpfs", "/dev/sda2 /var/lib/docker xfs", `/dev/sdb1 /mnt/a b\c ext4 ro`, "/dev/sdd1 /mnt/over xfs"}
	want[1] = "tmpfs " + want[1]
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("filesystems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRemoteStatfsTimeout: a hung NFS server costs one timeout, then the
// mount is skipped without waiting until its statfs returns.
func TestRemoteStatfsTimeout(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"proc/mounts": "/dev/sda1 / ext4 rw 0 0\nsrv:/x /mnt/nfs nfs4 rw 0 0\n"})
	now := time.Now()
	c := testCollector(root, &now)
	c.remoteTimeout = 20 * time.Millisecond
	release := make(chan struct{})
	local := fakeStatfs(root)
	c.statfs = func(pz []byte, st *unix.Statfs_t) error {
		if strings.HasSuffix(pathString(pz), "/mnt/nfs") {
			<-release
		}
		return local(pz, st)
	}
	nfs := `node_filesystem_size_bytes{device="srv:/x",fstype="nfs4",mountpoint="/mnt/nfs"}`
	for i := 0; i < 2; i++ {
		start := time.Now()
		out, err := c.Collect(context.Background(), nil)
		if !errors.Is(err, errStatfsHung) {
			t.Errorf("collection %d: err = %v, want errStatfsHung", i, err)
		}
		got := byKey(t, out)
		if _, ok := got[nfs]; ok {
			t.Errorf("collection %d: hung mount reported", i)
		}
		if _, ok := got[`node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"}`]; !ok {
			t.Errorf("collection %d: local filesystem missing", i)
		}
		if i == 1 && time.Since(start) > time.Second {
			t.Error("second collection waited for the hung mount again")
		}
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := c.Collect(context.Background(), nil)
		if _, ok := byKey(t, out)[nfs]; ok && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount still skipped after its statfs returned: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCustomFilesystems(t *testing.T) {
	c := New(Options{Root: t.TempDir(), Filesystems: func() ([]FS, error) {
		return []FS{
			{Device: "/dev/x", MountPoint: "/data", Type: "ext4", Size: 100, Free: 50, Avail: 40, Files: 10, FilesFree: 5, ReadOnly: true},
			{Device: "none", MountPoint: "/proc", Type: "proc"}, // size 0: skipped
		}, errors.New("one mount failed")
	}})
	out, err := c.Collect(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "one mount failed") {
		t.Errorf("err = %v, want the source's error", err)
	}
	got := byKey(t, out)
	lb := `{device="/dev/x",fstype="ext4",mountpoint="/data"}`
	want := map[string]float64{"node_filesystem_size_bytes" + lb: 100, "node_filesystem_free_bytes" + lb: 50,
		"node_filesystem_avail_bytes" + lb: 40, "node_filesystem_files" + lb: 10, "node_filesystem_files_free" + lb: 5,
		"node_filesystem_readonly" + lb: 1}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(Options{Root: filepath.Join("testdata", "kernel-2.6.32")}).Collect(ctx, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestConcurrentCollect is for the race detector: calls are serialized.
func TestConcurrentCollect(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join("testdata", "kernel-2.6.32"), root)
	now := time.Now()
	var mu sync.Mutex
	c := New(Options{Root: root, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }})
	c.statfs = fakeStatfs(root)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst []Sample
			for j := 0; j < 5; j++ {
				var err error
				if dst, err = c.Collect(context.Background(), dst[:0]); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestSteadyStateAllocs guards the cost promise: once every series has
// been seen, a collection into a reused slice does not allocate.
func TestSteadyStateAllocs(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join("testdata", "debian12-kernel-6.18.44-fc-v669"), root)
	writeFiles(t, root, map[string]string{"var/run/utmp": string(utmpBytes(utUserProcess))})
	now := time.Now()
	c := testCollector(root, &now)
	c.statfs = statfsNoAlloc
	ctx := context.Background()
	dst, _ := c.Collect(ctx, nil)
	allocs := testing.AllocsPerRun(20, func() {
		now = now.Add(10 * time.Second)
		var err error
		if dst, err = c.Collect(ctx, dst[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("%v allocations per steady-state Collect, want 0", allocs)
	}
}

func statfsNoAlloc(_ []byte, st *unix.Statfs_t) error {
	*st = unix.Statfs_t{Bsize: 4096, Blocks: 10, Bfree: 5, Bavail: 4, Files: 3, Ffree: 2}
	return nil
}
