package sysmetrics

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// remoteStatfsTimeout bounds statfs on network and FUSE filesystems, whose
// server may not answer; local ones are statfs'ed inline.
const remoteStatfsTimeout = 2 * time.Second

var errStatfsHung = errors.New("statfs timed out; skipped until it returns")

// pseudoFS reports filesystem types that hold no storage of their own
// (their "usage" is meaningless) or are layers of containers (overlay:
// the backing filesystem is reported where it is mounted).
func pseudoFS(typ []byte) bool {
	switch string(typ) {
	case "autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs",
		"devpts", "devtmpfs", "efivarfs", "fusectl", "hugetlbfs", "mqueue", "nsfs",
		"overlay", "proc", "pstore", "ramfs", "rootfs", "rpc_pipefs", "securityfs",
		"selinuxfs", "squashfs", "sysfs", "tracefs", "nfsd", "fuse.lxcfs",
		"fuse.gvfsd-fuse", "fuse.portal", "fuse.snapfuse":
		return true
	}
	return false
}

// remoteFS reports types whose statfs may block on a server.
func remoteFS(typ []byte) bool {
	switch string(typ) {
	case "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "9p", "afs",
		"lustre", "gpfs", "fuse":
		return true
	}
	return len(typ) > 5 && string(typ[:5]) == "fuse."
}

// skipMountPoint drops mounts under /dev, /proc and /sys (pseudo trees,
// including the /dev/shm tmpfs), systemd's per-service credential mounts
// and container runtimes' per-container mounts, like node_exporter's
// default --collector.filesystem.mount-points-exclude.
func skipMountPoint(mp string) bool {
	under := func(dir string) bool {
		return len(mp) >= len(dir) && mp[:len(dir)] == dir && (len(mp) == len(dir) || mp[len(dir)] == '/')
	}
	inside := func(dir string) bool {
		return len(mp) > len(dir)+1 && mp[:len(dir)] == dir && mp[len(dir)] == '/'
	}
	return under("/dev") || under("/proc") || under("/sys") || inside("/run/credentials") ||
		inside("/var/lib/docker") || inside("/var/lib/containers/storage")
}

type fsState struct {
	mounts map[string]*mountEntry // by the raw mount table line
	list   []*mountEntry
	byMP   map[string]int // mount point -> index in list, for de-duplication
	out    []FS
	st     unix.Statfs_t
	series map[fsKey]*fsSeries
}

type mountEntry struct {
	gen    uint64
	fs     FS
	pz     []byte // Root + mount point, NUL-terminated
	remote bool
	// state guards statfs on remote filesystems: 0 idle, 1 running,
	// 2 abandoned after a timeout (the goroutine resets it when it returns).
	state atomic.Int32
}

type fsKey struct{ dev, mp, typ string }

type fsSeries struct {
	gen    uint64
	labels []Label
}

// mountedFilesystems is the default Options.Filesystems: the mount table
// (/proc/self/mounts; under another Root, Root/proc/1/mounts first),
// filtered and de-duplicated by mount point (the last mount is the visible
// one), then statfs'ed. It runs inside Collect and reports problems
// directly; the slice and its strings are reused by the next call.
func (c *Collector) mountedFilesystems() ([]FS, error) {
	s := &c.fs
	if s.mounts == nil {
		s.mounts = make(map[string]*mountEntry)
		s.byMP = make(map[string]int)
	}
	var pz, data []byte
	var err error
	for _, pz = range c.p.mounts {
		if data, err = c.readAt(unix.AT_FDCWD, pz, false); err == nil {
			break
		}
	}
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, &fs.PathError{Op: "read", Path: pathString(pz), Err: err}
	}
	s.list = s.list[:0]
	clear(s.byMP)
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		if len(trimSpace(line)) == 0 {
			continue
		}
		e := s.mounts[string(line)]
		if e == nil {
			dev, rest := nextField(line)
			mp, rest := nextField(rest)
			typ, rest := nextField(rest)
			opts, _ := nextField(rest)
			if len(opts) == 0 {
				c.malformed(pz, n, "malformed mount line")
				continue
			}
			e = &mountEntry{fs: FS{Device: unescape(dev), MountPoint: unescape(mp), Type: string(typ), ReadOnly: hasOption(opts, "ro")}}
			if !pseudoFS(typ) && !skipMountPoint(e.fs.MountPoint) {
				e.pz = cpath(c.root, e.fs.MountPoint)
				e.remote = remoteFS(typ)
			}
			s.mounts[string(line)] = e
		}
		e.gen = c.gen
		if i, dup := s.byMP[e.fs.MountPoint]; dup {
			s.list[i] = e // mounted over: the later mount is the one visible
			continue
		}
		s.byMP[e.fs.MountPoint] = len(s.list)
		s.list = append(s.list, e)
	}
	for k, e := range s.mounts {
		if e.gen != c.gen {
			delete(s.mounts, k)
		}
	}
	s.out = s.out[:0]
	for _, e := range s.list {
		if e.pz == nil { // filtered out; still took part in de-duplication
			continue
		}
		var err error
		if e.remote {
			err = c.statfsRemote(e, &s.st)
		} else {
			err = c.statfs(e.pz, &s.st)
		}
		if err != nil {
			// Mount points of other namespaces or ones we may not enter
			// are routine in containers; only other failures are news.
			if !absent(err) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
				c.fail(&fs.PathError{Op: "statfs", Path: pathString(e.pz), Err: err})
			}
			continue
		}
		bs := uint64(s.st.Frsize)
		if bs == 0 {
			bs = uint64(s.st.Bsize)
		}
		f := e.fs
		f.Size, f.Free, f.Avail = s.st.Blocks*bs, s.st.Bfree*bs, s.st.Bavail*bs
		f.Files, f.FilesFree = s.st.Files, s.st.Ffree
		s.out = append(s.out, f)
	}
	return s.out, nil
}

// statfsRemote runs statfs in a goroutine so that a dead server costs one
// timeout, after which the mount is skipped until the call returns.
func (c *Collector) statfsRemote(e *mountEntry, st *unix.Statfs_t) error {
	if !e.state.CompareAndSwap(0, 1) {
		return errStatfsHung
	}
	type result struct {
		st  unix.Statfs_t
		err error
	}
	ch := make(chan result, 1)
	statfs := c.statfs
	go func() {
		var r result
		r.err = statfs(e.pz, &r.st)
		if !e.state.CompareAndSwap(1, 0) {
			e.state.Store(0) // abandoned by a timed-out Collect
			return
		}
		ch <- r
	}()
	t := time.NewTimer(c.remoteTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		*st = r.st
		return r.err
	case <-t.C:
		if e.state.CompareAndSwap(1, 2) {
			return errStatfsHung
		}
		r := <-ch // it finished just as the timer fired
		*st = r.st
		return r.err
	}
}

// unescape decodes the octal escapes (\040 for space...) of /proc/mounts.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' {
			if o, ok := octal3(b[i+1:]); ok {
				out = append(out, o)
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

func octal3(b []byte) (byte, bool) {
	if len(b) < 3 {
		return 0, false
	}
	v := 0
	for _, ch := range b[:3] {
		if ch < '0' || ch > '7' {
			return 0, false
		}
		v = v*8 + int(ch-'0')
	}
	if v > 255 {
		return 0, false
	}
	return byte(v), true
}

func hasOption(opts []byte, opt string) bool {
	for len(opts) > 0 {
		i := 0
		for i < len(opts) && opts[i] != ',' {
			i++
		}
		if string(opts[:i]) == opt {
			return true
		}
		if i == len(opts) {
			break
		}
		opts = opts[i+1:]
	}
	return false
}

func (c *Collector) collectFilesystems() {
	list, err := c.fsSource()
	if err != nil {
		c.fail(fmt.Errorf("sysmetrics: filesystems: %w", err))
	}
	s := &c.fs
	if s.series == nil {
		s.series = make(map[fsKey]*fsSeries)
	}
	for i := range list {
		f := &list[i]
		if f.Size == 0 { // no storage accounting: a pseudo filesystem
			continue
		}
		k := fsKey{f.Device, f.MountPoint, f.Type}
		se := s.series[k]
		if se == nil {
			se = &fsSeries{labels: []Label{{Name: "device", Value: f.Device}, {Name: "fstype", Value: f.Type}, {Name: "mountpoint", Value: f.MountPoint}}}
			s.series[k] = se
		}
		se.gen = c.gen
		ro := 0.0
		if f.ReadOnly {
			ro = 1
		}
		c.add("node_filesystem_size_bytes", se.labels, float64(f.Size))
		c.add("node_filesystem_free_bytes", se.labels, float64(f.Free))
		c.add("node_filesystem_avail_bytes", se.labels, float64(f.Avail))
		c.add("node_filesystem_files", se.labels, float64(f.Files))
		c.add("node_filesystem_files_free", se.labels, float64(f.FilesFree))
		c.add("node_filesystem_readonly", se.labels, ro)
	}
	for k, se := range s.series {
		if se.gen != c.gen {
			delete(s.series, k)
		}
	}
}
