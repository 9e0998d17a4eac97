//go:build unix

package spool

import (
	"os"
	"syscall"
)

// crashMidWrite writes the first half of buf at off and kills the process.
func crashMidWrite(f *os.File, buf []byte, off int64) {
	_, _ = f.WriteAt(buf[:len(buf)/2], off)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
