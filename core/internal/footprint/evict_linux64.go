//go:build linux && !(386 || arm || mips || mipsle)

package footprint

import "golang.org/x/sys/unix"

// evictFile drops the file's pages no process maps from the page cache, as
// a raw system call (see ReleaseExecutable).
func evictFile(fd uintptr) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_FADVISE64, fd, 0, 0, unix.FADV_DONTNEED, 0, 0)
	return e
}
