package sysmetrics

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxFileSize bounds the read buffer so that a file that never reaches EOF
// cannot make the agent eat memory. /proc/stat on a machine with thousands
// of CPUs and interrupts is the largest input and stays well below this.
const maxFileSize = 64 << 20

// cpath builds a NUL-terminated path. Paths are kept in this form so the
// hot path can call openat(2) directly: syscall.Open and os.Open copy the
// string into a fresh []byte on every call.
func cpath(parts ...string) []byte {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return append(b, 0)
}

// pathString strips the NUL terminator, for error messages only.
func pathString(pz []byte) string {
	if n := len(pz); n > 0 && pz[n-1] == 0 {
		pz = pz[:n-1]
	}
	return string(pz)
}

func openat(dirfd int, pz []byte, flags int) (int, error) {
	for {
		r, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd),
			uintptr(unsafe.Pointer(&pz[0])), uintptr(flags|unix.O_CLOEXEC), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// statfs is statfs(2) on a NUL-terminated path; see openat for why.
func statfs(pz []byte, st *unix.Statfs_t) error {
	for {
		_, _, e := syscall.Syscall(syscall.SYS_STATFS,
			uintptr(unsafe.Pointer(&pz[0])), uintptr(unsafe.Pointer(st)), 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// absent reports errors that mean "this kernel or this process does not
// have the file", which are skipped silently rather than reported.
func absent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ESRCH)
}

// readAt reads the whole file at dirfd/pz into c.buf and returns the filled
// part, valid until the next read. With once set, a short read is taken as
// the end: true for sysfs attributes and /proc/PID/stat, which the kernel
// renders in one go, and it saves a read(2) per process.
func (c *Collector) readAt(dirfd int, pz []byte, once bool) ([]byte, error) {
	fd, err := openat(dirfd, pz, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	n := 0
	for {
		if n == len(c.buf) {
			if len(c.buf) >= maxFileSize {
				unix.Close(fd)
				return nil, errors.New("file larger than " + strconv.Itoa(maxFileSize) + " bytes")
			}
			nb := make([]byte, 2*len(c.buf))
			copy(nb, c.buf[:n])
			c.buf = nb
		}
		m, err := unix.Read(fd, c.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
		if once && n < len(c.buf) {
			break
		}
	}
	unix.Close(fd)
	return c.buf[:n], nil
}

// read reads an absolute path. A missing file returns (nil, nil); any
// other failure is recorded as an error naming the file and returns nil.
func (c *Collector) read(pz []byte, once bool) []byte {
	data, err := c.readAt(unix.AT_FDCWD, pz, once)
	if err != nil {
		if !absent(err) {
			c.fail(&fs.PathError{Op: "read", Path: pathString(pz), Err: err})
		}
		return nil
	}
	return data
}

// dirents calls fn with the name of each entry of the directory at pz
// (excluding "." and ".."), using getdents64 on a reused buffer so that
// listing /proc does not allocate a string per process like os.ReadDir.
// fn's name argument is only valid during the call. A missing directory
// is not an error.
func (c *Collector) dirents(pz []byte, fn func(dirfd int, name []byte) bool) error {
	fd, err := openat(unix.AT_FDCWD, pz, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if absent(err) {
			return nil
		}
		return &fs.PathError{Op: "open", Path: pathString(pz), Err: err}
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Getdents(fd, c.dirbuf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: pathString(pz), Err: err}
		}
		if n <= 0 {
			return nil
		}
		b := c.dirbuf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				return &fs.PathError{Op: "getdents", Path: pathString(pz), Err: errors.New("bad record length")}
			}
			name := b[19:reclen]
			for i, ch := range name {
				if ch == 0 {
					name = name[:i]
					break
				}
			}
			b = b[reclen:]
			if len(name) == 0 || name[0] == '.' && (len(name) == 1 || len(name) == 2 && name[1] == '.') {
				continue
			}
			if !fn(fd, name) {
				return nil
			}
		}
	}
}

// exists reports whether a path exists; used only when a block device is
// first seen, so the allocation in os.Stat does not matter.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// nextLine splits off the first line of b.
func nextLine(b []byte) (line, rest []byte) {
	for i, ch := range b {
		if ch == '\n' {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// nextField splits off the first space- or tab-separated field of b.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

// trimSpace trims spaces and tabs on both sides.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseUint parses a decimal uint64 without the string conversion that
// strconv.ParseUint would need.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseFloat parses b in place. strconv copies its input into any error it
// returns, so handing it an unsafe view of the read buffer is safe.
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	return v, err == nil
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}
