//go:build !linux

// Package datasync flushes a file's data to disk, as the spool and the
// telemetry WAL need before they report a write done.
package datasync

import "os"

// File flushes f to disk (fsync where fdatasync is not available).
func File(f *os.File) error { return f.Sync() }
