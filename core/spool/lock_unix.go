//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on dir/lock so that two agents (or two
// Spools in one process) never interleave appends in the same directory.
// The kernel releases it if the process dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock spool directory %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock spool directory %s: %w", dir, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	// Closing the descriptor releases the flock.
	f.Close()
}
