package wal

import (
	"os"
	"syscall"
)

// datasync flushes f's data and size, not its timestamps: all a reader of
// the log needs, and cheaper than fsync.
func datasync(f *os.File) error {
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
