//go:build !linux

package spool

import "os"

func datasync(f *os.File) error { return f.Sync() }
