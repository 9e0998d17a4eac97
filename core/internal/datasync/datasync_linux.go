// Package datasync flushes a file's data to disk, as the spool and the
// telemetry WAL need before they report a write done.
package datasync

import (
	"os"
	"syscall"
)

// File flushes f's data and size but not its timestamps (fdatasync): all a
// reader of an append-only file needs, and cheaper than fsync.
func File(f *os.File) error {
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
