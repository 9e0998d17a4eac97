//go:build unix

package failpoint

import (
	"os"
	"syscall"
)

// Kill ends the process with SIGKILL, as a crash would: no deferred
// function, flush or shutdown runs.
func Kill() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
