//go:build !linux

package conformance

import (
	"errors"
	"fmt"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func childOf(int) int                { return 0 }
func zombies(int) ([]int, error)     { return nil, errNoProc }
func liveChildren(int) []int         { return nil }
func describePIDs(pids []int) string { return fmt.Sprint(pids) }
func openFDs(int) (int, error)       { return 0, errNoProc }
func rssBytes(int) (int64, error)    { return 0, errNoProc }
