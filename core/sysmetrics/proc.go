package sysmetrics

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// reportedStates are always reported, so their series do not come and go;
// other states (t, X, W, P, K...) are reported when present.
const reportedStates = "RSDZTI"

type procState struct {
	counts [256]int
	labels [256][]Label
	path   []byte // scratch "PID/stat\x00"
}

func (c *Collector) initProcs() {
	for _, st := range []byte(reportedStates + "tXxWPK") {
		c.procs.labels[st] = labels1("state", string(st))
	}
}

// collectProcesses counts processes by state and threads, from each
// /proc/PID/stat. Directories are listed with getdents and each file is
// opened relative to the /proc descriptor, so a scan costs three system
// calls per process and no allocation.
func (c *Collector) collectProcesses() {
	s := &c.procs
	clear(s.counts[:])
	procs, threads := 0, 0
	stopped := false
	err := c.dirents(c.p.proc, func(dirfd int, name []byte) bool {
		if !isDigits(name) {
			return true
		}
		if procs&255 == 255 && c.ctx != nil && c.ctx.Err() != nil {
			stopped = true
			return false
		}
		s.path = append(append(s.path[:0], name...), "/stat\x00"...)
		data, err := c.readAt(dirfd, s.path, true)
		if err != nil {
			if !absent(err) { // absent: the process exited since the listing
				c.fail(&fs.PathError{Op: "read", Path: pathString(c.p.proc) + "/" + pathString(s.path), Err: err})
			}
			return true
		}
		state, nthreads, ok := parsePidStat(data)
		if !ok {
			c.malformed(cpath(pathString(c.p.proc), "/", pathString(s.path)), 1, "malformed stat line")
			return true
		}
		procs++
		threads += nthreads
		s.counts[state]++
		return true
	})
	if err != nil {
		c.fail(err)
		return
	}
	if stopped {
		return // partial counts would mislead; Collect reports ctx.Err()
	}
	if procs == 0 {
		return // no /proc/PID directories: not a procfs (or a fixture without them)
	}
	for st, n := range s.counts {
		if n == 0 && strings.IndexByte(reportedStates, byte(st)) < 0 {
			continue
		}
		if s.labels[st] == nil {
			s.labels[st] = labels1("state", string(rune(st)))
		}
		c.add("node_processes_state", s.labels[st], float64(n))
	}
	c.add("node_processes", nil, float64(procs))
	c.add("node_processes_threads", nil, float64(threads))
}

// parsePidStat returns the state and thread count of a /proc/PID/stat
// line. The command name in parentheses may itself hold spaces and ')',
// so fields are counted from the last ')'.
func parsePidStat(data []byte) (state byte, threads int, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	rest := data[i+1:]
	// After ')': state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads.
	const threadsField = 17
	var f []byte
	for k := 0; k <= threadsField; k++ {
		f, rest = nextField(rest)
		if len(f) == 0 {
			return 0, 0, false
		}
		if k == 0 {
			if len(f) != 1 {
				return 0, 0, false
			}
			state = f[0]
		}
	}
	n, ok := parseUint(f)
	if !ok {
		return 0, 0, false
	}
	return state, int(n), true
}

// utmp layout of glibc on Linux x86_64 (and the other LP64 ports with the
// 32-bit time compatibility layout): 384-byte records starting with
// ut_type, a short followed by two bytes of padding.
const (
	utmpRecord      = 384
	utmpUserProcess = 7
)

// collectUsers counts USER_PROCESS records of utmp, what who(1) lists.
func (c *Collector) collectUsers() {
	pz := c.p.utmp
	data, err := c.readAt(unix.AT_FDCWD, pz, false)
	if err != nil && absent(err) {
		pz = c.p.runUtmp
		data, err = c.readAt(unix.AT_FDCWD, pz, false)
	}
	if err != nil {
		if !absent(err) {
			c.fail(&fs.PathError{Op: "read", Path: pathString(pz), Err: err})
		}
		return
	}
	users := 0
	for off := 0; off+utmpRecord <= len(data); off += utmpRecord {
		if int16(binary.NativeEndian.Uint16(data[off:])) == utmpUserProcess {
			users++
		}
	}
	if len(data)%utmpRecord != 0 {
		c.malformed(pz, len(data)/utmpRecord+1, "truncated utmp record")
	}
	c.add("node_users_logged_in", nil, float64(users))
}
