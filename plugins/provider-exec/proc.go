package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

// procStat is what we read from /proc/PID/stat.
type procStat struct {
	state        byte
	utime, stime uint64
	start        uint64
	rssPages     int64
}

// readStat parses /proc/PID/stat; ok is false when there is no such file.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, false
	}
	var st procStat
	st.state = f[0][0]
	st.utime, _ = strconv.ParseUint(f[11], 10, 64)
	st.stime, _ = strconv.ParseUint(f[12], 10, 64)
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	st.rssPages, _ = strconv.ParseInt(f[21], 10, 64)
	return st, true
}

func haveProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// startTicks is pid's start time, 0 where /proc is missing.
func startTicks(pid int) uint64 {
	st, _ := readStat(pid)
	return st.start
}

// alive says whether pid runs and, when ticks is known, is the process
// that started at ticks rather than a later one reusing the pid. Zombies
// count as gone: they have ended and only wait to be reaped.
func alive(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	if haveProc() {
		st, ok := readStat(pid)
		if !ok || st.state == 'Z' || st.state == 'X' {
			return false
		}
		return ticks == 0 || st.start == ticks
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func procStats(pid int) []sdk.Metric {
	st, ok := readStat(pid)
	if !ok {
		return nil
	}
	zero := 0.0
	return []sdk.Metric{
		{Label: "cpu_seconds", Value: float64(st.utime+st.stime) / clockTicks, Unit: "c", Min: &zero},
		{Label: "rss", Value: float64(st.rssPages * int64(os.Getpagesize())), Unit: "B", Min: &zero},
	}
}
