package spool

import (
	"os"
	"syscall"
)

// datasync flushes f's data and size but not its timestamps: cheaper than
// fsync when the file did not grow (the position file).
func datasync(f *os.File) error {
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
