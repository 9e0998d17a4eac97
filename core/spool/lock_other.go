//go:build !unix

package spool

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir only creates the lock file on platforms without flock: opening one
// directory twice is not detected there.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) { f.Close() }
