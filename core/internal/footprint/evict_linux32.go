//go:build linux && (386 || arm || mips || mipsle)

package footprint

import (
	"errors"

	"golang.org/x/sys/unix"
)

// evictFile drops the file's pages no process maps from the page cache.
// 32-bit systems split the 64-bit offsets differently per architecture,
// so this goes through unix.Fadvise rather than a raw system call.
func evictFile(fd uintptr) unix.Errno {
	var e unix.Errno
	if err := unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED); !errors.As(err, &e) {
		return 0
	}
	return e
}
