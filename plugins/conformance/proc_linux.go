//go:build linux

package conformance

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr: like the host, the plugin dies with the harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func procState(pid int) (byte, int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// processAlive: zombies count as gone, they only wait to be reaped.
func processAlive(pid int) bool {
	st, _, ok := procState(pid)
	return ok && st != 'Z' && st != 'X'
}

// children lists pid's child processes (every thread's).
func children(pid int) []int {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func childOf(pid int) int {
	if cs := children(pid); len(cs) > 0 {
		return cs[0]
	}
	return 0
}

// zombies lists pid's children that ended but were not reaped.
func zombies(pid int) ([]int, error) {
	var out []int
	for _, c := range children(pid) {
		if st, _, ok := procState(c); ok && st == 'Z' {
			out = append(out, c)
		}
	}
	return out, nil
}

func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// rssBytes is the resident set size from /proc/PID/status.
func rssBytes(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errNoProc
}
