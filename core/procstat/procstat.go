// Package procstat reads processes' state from /proc, for supervisors and
// tests that must tell a running process from one that has exited. A zombie
// counts as exited: it runs nothing and only waits for its parent (on these
// machines often a PID 1 that never reaps) to collect it. Without /proc
// (other systems) every process reads as absent.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// Proc is what /proc/PID/stat says of a process.
type Proc struct {
	// State is the state letter: R, S, D, T, Z, X, ...
	State byte
	PPID  int
	// UTime and STime are the CPU time used, in clock ticks (USER_HZ).
	UTime, STime uint64
	// StartTicks is when the process started, in clock ticks since boot:
	// with the pid it names one process, even after the pid is reused.
	StartTicks uint64
	RSSPages   int64
}

// Read returns pid's /proc/PID/stat; ok is false when there is no such
// process.
func Read(pid int) (p Proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, false
	}
	// The fields after the command name, which is in parentheses and may
	// itself contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return Proc{}, false
	}
	p.State = f[0][0]
	p.PPID, _ = strconv.Atoi(f[1])
	p.UTime, _ = strconv.ParseUint(f[11], 10, 64)
	p.STime, _ = strconv.ParseUint(f[12], 10, 64)
	p.StartTicks, _ = strconv.ParseUint(f[19], 10, 64)
	p.RSSPages, _ = strconv.ParseInt(f[21], 10, 64)
	return p, true
}

// Alive reports whether pid exists and has not exited.
func Alive(pid int) bool {
	p, ok := Read(pid)
	return ok && p.State != 'Z' && p.State != 'X'
}

// PIDsOf lists the live processes running the executable at path.
func PIDsOf(path string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == path && Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
