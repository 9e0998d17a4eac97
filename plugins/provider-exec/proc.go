package main

import (
	"errors"
	"os"
	"syscall"

	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

func haveProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// startTicks is pid's start time, 0 where /proc is missing.
func startTicks(pid int) uint64 {
	st, _ := procstat.Read(pid)
	return st.StartTicks
}

// alive says whether pid runs and, when ticks is known, is the process
// that started at ticks rather than a later one reusing the pid. Zombies
// count as gone: they have ended and only wait to be reaped.
func alive(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	if haveProc() {
		st, ok := procstat.Read(pid)
		if !ok || st.State == 'Z' || st.State == 'X' {
			return false
		}
		return ticks == 0 || st.StartTicks == ticks
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func procStats(pid int) []sdk.Metric {
	st, ok := procstat.Read(pid)
	if !ok {
		return nil
	}
	zero := 0.0
	return []sdk.Metric{
		{Label: "cpu_seconds", Value: float64(st.UTime+st.STime) / clockTicks, Unit: "c", Min: &zero},
		{Label: "rss", Value: float64(st.RSSPages * int64(os.Getpagesize())), Unit: "B", Min: &zero},
	}
}
