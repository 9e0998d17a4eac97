package vmembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkNotLocked fails when another process holds VictoriaMetrics' lock on
// dir. VictoriaMetrics panics or exits in that case; this turns it into an
// error. The probe lock is released at once (same lock call as lib/fs).
func checkNotLocked(dir string) error {
	path := filepath.Join(dir, "flock.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("vmembed: open lock file: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("vmembed: data directory %s is in use by another process (lock %s is held)", dir, path)
		}
		return fmt.Errorf("vmembed: lock %s: %w", path, err)
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
