//go:build linux

package conformance

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/unyo-ops/unyo/core/procstat"
)

// sysProcAttr: like the host, the plugin dies with the harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processAlive: zombies count as gone, they only wait to be reaped.
func processAlive(pid int) bool {
	return procstat.Alive(pid)
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
		if p, ok := procstat.Read(c); ok && p.State == 'Z' {
			out = append(out, c)
		}
	}
	return out, nil
}

// liveChildren lists pid's children that still run (not zombies).
func liveChildren(pid int) []int {
	var out []int
	for _, c := range children(pid) {
		if p, ok := procstat.Read(c); ok && p.State != 'Z' {
			out = append(out, c)
		}
	}
	return out
}

// describePIDs names processes by pid and command line, for a report.
func describePIDs(pids []int) string {
	parts := make([]string, 0, len(pids))
	for _, pid := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		parts = append(parts, fmt.Sprintf("pid %d: %s", pid, strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " ")))
	}
	return strings.Join(parts, ", ")
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
