package host

import "syscall"

// sysProcAttr makes the kernel send SIGTERM to a plugin when the host dies,
// so that no plugin outlives it even after a SIGKILL of the host. (The SDK
// also polls its parent, for plugins started some other way.) Pdeathsig is
// tied to the thread that forked; Go only retires threads whose goroutine
// exits while locked to them, which the host never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
