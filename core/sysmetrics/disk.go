package sysmetrics

// The statistics columns of /proc/diskstats after "major minor name".
// Kernels before 4.18 print the first 11 (14 fields per line), 4.18 added
// the four discard columns (18 fields) and 5.5 the two flush columns (20).
const (
	dkReads = iota
	dkReadsMerged
	dkReadSectors
	dkReadMs
	dkWrites
	dkWritesMerged
	dkWriteSectors
	dkWriteMs
	dkInFlight
	dkIOMs
	dkWeightedMs
	dkDiscards
	dkDiscardsMerged
	dkDiscardSectors
	dkDiscardMs
	dkFlushes
	dkFlushMs
	dkCount
)

var diskNames = [dkCount]string{
	"node_disk_reads_completed_per_second",
	"node_disk_reads_merged_per_second",
	"node_disk_read_bytes_per_second",
	"node_disk_read_time_seconds_per_second",
	"node_disk_writes_completed_per_second",
	"node_disk_writes_merged_per_second",
	"node_disk_written_bytes_per_second",
	"node_disk_write_time_seconds_per_second",
	"node_disk_io_now",
	"node_disk_io_time_seconds_per_second",
	"node_disk_io_time_weighted_seconds_per_second",
	"node_disk_discards_completed_per_second",
	"node_disk_discards_merged_per_second",
	"node_disk_discarded_bytes_per_second",
	"node_disk_discard_time_seconds_per_second",
	"node_disk_flush_requests_per_second",
	"node_disk_flush_request_time_seconds_per_second",
}

// diskUnit converts a column to base units: sectors are always 512 bytes
// in diskstats, whatever the device's sector size, and times are in
// milliseconds. Dividing by 1000 rather than multiplying by 1e-3 keeps
// round numbers exact.
var diskUnit = [dkCount]struct{ mul, div float64 }{
	dkReads: {1, 1}, dkReadsMerged: {1, 1}, dkReadSectors: {512, 1}, dkReadMs: {1, 1000},
	dkWrites: {1, 1}, dkWritesMerged: {1, 1}, dkWriteSectors: {512, 1}, dkWriteMs: {1, 1000},
	dkInFlight: {1, 1}, dkIOMs: {1, 1000}, dkWeightedMs: {1, 1000},
	dkDiscards: {1, 1}, dkDiscardsMerged: {1, 1}, dkDiscardSectors: {512, 1}, dkDiscardMs: {1, 1000},
	dkFlushes: {1, 1}, dkFlushMs: {1, 1000},
}

// diskWrap32 marks the columns the kernel prints with %u: the millisecond
// times are 32-bit on every kernel and wrap after 49.7 days of busy time,
// while the request and sector counts are unsigned long.
var diskWrap32 = [dkCount]bool{dkReadMs: true, dkWriteMs: true, dkIOMs: true, dkWeightedMs: true, dkDiscardMs: true, dkFlushMs: true}

type diskState struct {
	clk  clock
	devs map[string]*diskDev
}

type diskDev struct {
	gen    uint64
	labels []Label
	n      int
	prev   [dkCount]uint64
}

func (c *Collector) collectDiskstats() {
	pz := c.p.diskstats
	data := c.read(pz, false)
	if data == nil {
		return
	}
	s := &c.disk
	if s.devs == nil {
		s.devs = make(map[string]*diskDev)
	}
	dt, prev := c.begin(&s.clk)
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		_, rest := nextField(line) // major
		_, rest = nextField(rest)  // minor
		name, rest := nextField(rest)
		var cur [dkCount]uint64
		k := 0
		bad := false
		for {
			var f []byte
			f, rest = nextField(rest)
			if len(f) == 0 {
				break
			}
			if k == dkCount {
				continue // columns added by kernels newer than this code
			}
			v, ok := parseUint(f)
			if !ok {
				bad = true
				break
			}
			cur[k] = v
			k++
		}
		if bad || len(name) == 0 || k < dkDiscards {
			c.malformed(pz, n, "malformed diskstats line")
			continue
		}
		switch {
		case k >= dkCount:
			k = dkCount
		case k >= dkFlushes:
			k = dkFlushes
		default:
			k = dkDiscards
		}
		if skipDisk(name, &cur) {
			continue
		}
		d := s.devs[string(name)]
		if d == nil {
			d = &diskDev{}
			typ := "disk"
			if exists(c.p.blockClass + string(name) + "/partition") {
				typ = "part"
			}
			d.labels = []Label{{Name: "device", Value: string(name)}, {Name: "type", Value: typ}}
			s.devs[string(name)] = d
		}
		c.diskRates(d, &cur, k, prev, dt)
	}
	for k, d := range s.devs {
		if d.gen != c.gen {
			delete(s.devs, k)
		}
	}
	c.done(&s.clk)
}

// skipDisk drops RAM disks, which only mirror memory, and loop devices
// that never did any I/O: unused loop devices are many on hosts with snaps
// and say nothing, while a busy one (an image mount) is real I/O.
func skipDisk(name []byte, cur *[dkCount]uint64) bool {
	switch {
	case len(name) > 3 && string(name[:3]) == "ram" && isDigits(name[3:]):
		return true
	case len(name) > 4 && string(name[:4]) == "loop" && isDigits(name[4:]):
		return cur[dkReads] == 0 && cur[dkWrites] == 0
	}
	return false
}

// diskRates emits the device's rates. Any 64-bit column going backwards
// means the device was replaced (or its stats reset), and the whole device
// skips one round; a 32-bit time column going backwards alone is a wrap.
func (c *Collector) diskRates(d *diskDev, cur *[dkCount]uint64, k int, prev uint64, dt float64) {
	c.add(diskNames[dkInFlight], d.labels, float64(cur[dkInFlight]))
	for i := 0; i < k; i++ {
		if i != dkInFlight {
			c.total(diskNames[i], d.labels, float64(cur[i])*diskUnit[i].mul/diskUnit[i].div)
		}
	}
	ok := prev != 0 && d.gen == prev && d.n == k
	for i := 0; ok && i < k; i++ {
		if i != dkInFlight && cur[i] < d.prev[i] && !diskWrap32[i] {
			ok = false
		}
	}
	for i := 0; ok && i < k; i++ {
		if i == dkInFlight {
			continue
		}
		if dv, good := delta(d.prev[i], cur[i], diskWrap32[i]); good {
			c.add(diskNames[i], d.labels, float64(dv)*diskUnit[i].mul/diskUnit[i].div/dt)
		}
	}
	d.prev, d.n, d.gen = *cur, k, c.gen
}
