package sysmetrics

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// Sample is one value of one series.
type Sample struct {
	Name string
	// Labels are sorted by name. The slice is shared between samples and
	// between collections (that is what makes Collect allocation-free in
	// steady state): treat it as read-only.
	Labels []Label
	Value  float64
}

// Label is one name="value" pair of a series: the TSDB's own, so that a
// collection goes into a metric batch without copying its labels.
type Label = tsdb.Label

// FS is the statfs(2) view of one mounted filesystem.
type FS struct {
	Device, MountPoint, Type string
	ReadOnly                 bool
	// Size, Free and Avail are in bytes; Avail is what unprivileged users
	// may still write (Free minus the root reserve).
	Size, Free, Avail uint64
	Files, FilesFree  uint64
}

// Options configures a Collector. The zero value collects from the running
// system.
type Options struct {
	// Root is prefixed to every path read: "/" (or "") in production, the
	// host's root mounted into a container, or a fixture tree in tests.
	Root string
	// Filesystems returns the filesystems to report. When nil, the mount
	// table under Root is read, pseudo and container-internal filesystems
	// are dropped (see the package documentation) and each remaining mount
	// point is statfs'ed. A custom source is reported as returned, except
	// that filesystems of size 0 are skipped.
	Filesystems func() ([]FS, error)
	// Now is the clock used for rates; time.Now when nil.
	Now func() time.Time
}

// Collector reads system metrics. It keeps the previous readings of every
// counter, so the first Collect returns gauges only and later ones add
// rates. A Collector is safe for concurrent use; calls are serialized.
type Collector struct {
	mu sync.Mutex

	root     string
	now      func() time.Time
	fsSource func() ([]FS, error)
	// statfs is a seam for tests of the default filesystem source.
	statfs        func(pz []byte, st *unix.Statfs_t) error
	remoteTimeout time.Duration
	pageSize      float64

	gen  uint64          // incremented by every Collect
	ts   time.Time       // this collection's time
	ctx  context.Context // this collection's context, for long scans
	out  []Sample
	errs []error

	buf    []byte // file contents, reused
	dirbuf []byte // getdents records, reused

	p paths

	// totals maps a rate's name to its counter's node_exporter name
	// (…_per_second to …_total), built once per name.
	totals map[string]string

	stat  statState
	mem   memState
	numa  numaState
	vm    vmState
	buddy buddyState
	disk  diskState
	fs    fsState
	net   netState
	snmp  snmpState
	procs procState
}

// paths holds every fixed input as a NUL-terminated absolute path.
type paths struct {
	stat, loadavg, uptime, meminfo, vmstat, buddyinfo, diskstats []byte
	netdev, snmp, netstat, proc, nodes, utmp, runUtmp            []byte
	mounts                                                       [][]byte // first readable wins
	blockClass                                                   string
}

// New returns a Collector for opts.
func New(opts Options) *Collector {
	root := strings.TrimRight(opts.Root, "/")
	c := &Collector{
		root:          root,
		now:           opts.Now,
		fsSource:      opts.Filesystems,
		statfs:        statfs,
		remoteTimeout: remoteStatfsTimeout,
		pageSize:      float64(os.Getpagesize()),
		buf:           make([]byte, 64<<10),
		dirbuf:        make([]byte, 32<<10),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.fsSource == nil {
		c.fsSource = c.mountedFilesystems
	}
	proc := root + "/proc/"
	c.p = paths{
		stat:       cpath(proc, "stat"),
		loadavg:    cpath(proc, "loadavg"),
		uptime:     cpath(proc, "uptime"),
		meminfo:    cpath(proc, "meminfo"),
		vmstat:     cpath(proc, "vmstat"),
		buddyinfo:  cpath(proc, "buddyinfo"),
		diskstats:  cpath(proc, "diskstats"),
		netdev:     cpath(proc, "net/dev"),
		snmp:       cpath(proc, "net/snmp"),
		netstat:    cpath(proc, "net/netstat"),
		proc:       cpath(root, "/proc"),
		nodes:      cpath(root, "/sys/devices/system/node"),
		mounts:     [][]byte{cpath(proc, "self/mounts"), cpath(proc, "mounts")},
		utmp:       cpath(root, "/var/run/utmp"),
		runUtmp:    cpath(root, "/run/utmp"),
		blockClass: root + "/sys/class/block/",
	}
	if root != "" {
		// Under another root (the host's, seen from a container), self is
		// the agent's own mount namespace; init's is the host's.
		c.p.mounts = append([][]byte{cpath(proc, "1/mounts")}, c.p.mounts...)
	}
	c.initProcs()
	return c
}

// Collect appends the current samples to dst and returns it. Rates cover
// the time since the previous Collect, so the first call returns gauges
// only, and a series that is new or whose counter went backwards (a reset)
// gets its rate from the next call on. Missing files are skipped, since
// not every kernel has every file; a file that cannot be read or parsed
// yields an error naming it (and the line), and everything else is still
// collected: the error is the errors.Join of all of them.
func (c *Collector) Collect(ctx context.Context, dst []Sample) ([]Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.ts = c.now()
	c.out = dst
	c.ctx = ctx
	c.errs = c.errs[:0]
	sources := [...]func(){
		c.collectStat, c.collectLoadavg, c.collectUptime, c.collectMeminfo,
		c.collectNUMA, c.collectVmstat, c.collectBuddyinfo, c.collectDiskstats,
		c.collectFilesystems, c.collectNetDev, c.collectSNMP, c.collectProcesses,
		c.collectUsers,
	}
	for _, collect := range sources {
		if err := ctx.Err(); err != nil {
			c.errs = append(c.errs, err)
			break
		}
		collect()
		if c.ctxDone(ctx) {
			break
		}
	}
	out := c.out
	c.out, c.ctx = nil, nil // do not pin the caller's slice
	if len(c.errs) == 0 {
		return out, nil
	}
	err := errors.Join(c.errs...)
	clear(c.errs)
	return out, err
}

// ctxDone records and reports cancellation; the process scan polls it.
func (c *Collector) ctxDone(ctx context.Context) bool {
	if err := ctx.Err(); err != nil {
		c.errs = append(c.errs, err)
		return true
	}
	return false
}

func (c *Collector) add(name string, labels []Label, v float64) {
	c.out = append(c.out, Sample{Name: name, Labels: labels, Value: v})
}

// total emits a counter's value (in base units) under node_exporter's name
// for the rate named rateName: name_per_second becomes name_total, so that
// dashboards written for node_exporter (rate(node_..._total[5m])) work.
// Counters are emitted from the first collection on, as they were read.
func (c *Collector) total(rateName string, labels []Label, v float64) {
	n, ok := c.totals[rateName]
	if !ok {
		if c.totals == nil {
			c.totals = make(map[string]string)
		}
		n = strings.TrimSuffix(rateName, "_per_second") + "_total"
		c.totals[rateName] = n
	}
	c.add(n, labels, v)
}

func (c *Collector) fail(err error) { c.errs = append(c.errs, err) }

// ParseError reports malformed content. Only the first bad line of a file
// is reported per collection; More counts the others.
type ParseError struct {
	Path string
	Line int // 1-based; the record number for binary files
	Msg  string
	More int
}

func (e *ParseError) Error() string {
	s := "sysmetrics: " + e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	if e.More > 0 {
		s += " (and " + strconv.Itoa(e.More) + " more malformed lines)"
	}
	return s
}

// malformed records a bad line of pz, folding repeats into the first.
func (c *Collector) malformed(pz []byte, line int, msg string) {
	if n := len(c.errs); n > 0 {
		if pe, ok := c.errs[n-1].(*ParseError); ok && pe.Path == pathString(pz) {
			pe.More++
			return
		}
	}
	c.fail(&ParseError{Path: pathString(pz), Line: line, Msg: msg})
}

// clock remembers when a source was last read successfully. A series may
// get a rate only if it was seen in that reading (its gen matches), and
// the rate then spans exactly the time since it, even if readings in
// between failed.
type clock struct {
	gen uint64
	at  time.Time
}

// begin returns the interval since the previous reading in seconds and that
// reading's generation; prev is 0 when there is none or time did not
// advance (an injected clock may stand still), which disables rates.
func (c *Collector) begin(k *clock) (dt float64, prev uint64) {
	if k.gen == 0 {
		return 0, 0
	}
	dt = c.ts.Sub(k.at).Seconds()
	if dt <= 0 {
		return 0, 0
	}
	return dt, k.gen
}

// done marks the source as read in this collection.
func (c *Collector) done(k *clock) { *k = clock{gen: c.gen, at: c.ts} }

// counter is the previous reading of one scalar counter.
type counter struct {
	v   uint64
	gen uint64
}

// rate emits name = scale * (cur - previous) / dt when the previous reading
// exists and is from the previous reading of the source (prev), and the
// counter did not go backwards; in every case cur becomes the previous
// reading. So a reset skips the rate once and never yields a negative one.
func (c *Collector) rate(k *counter, cur uint64, prev uint64, dt float64, name string, labels []Label, scale float64) {
	c.total(name, labels, float64(cur)*scale)
	if prev != 0 && k.gen == prev && cur >= k.v {
		c.add(name, labels, float64(cur-k.v)*scale/dt)
	}
	*k = counter{v: cur, gen: c.gen}
}

// delta returns cur - prev for a counter known to be 32 bits wide when
// wrap32 is set (a smaller cur then means it wrapped past 2^32), and
// reports false for any other decrease, which is a reset.
func delta(prev, cur uint64, wrap32 bool) (uint64, bool) {
	if cur >= prev {
		return cur - prev, true
	}
	if wrap32 && prev <= 1<<32-1 {
		return cur + 1<<32 - prev, true
	}
	return 0, false
}

// labels1 builds a one-label set; allocation happens only when a series is
// first seen.
func labels1(n, v string) []Label { return []Label{{Name: n, Value: v}} }
