// Package private keeps unyo's state readable by its own user only: data
// directories 0700 and state files 0600, also when they already exist with
// looser modes (made by an older version, a package script or by hand).
// The state holds tokens, check env secrets and webhook headers.
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Modes of state directories and files.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Dir creates dir (and missing parents) with DirMode, or takes group and
// other permissions away from it if it exists. Parents that exist are left
// alone: they may be shared (/var/lib).
func Dir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return tighten(dir, log)
}

// File takes group and other permissions away from path if it exists; a
// missing file is fine (it is created private later).
func File(path string, log *slog.Logger) error {
	err := tighten(path, log)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Files tightens every regular file directly in dir (not below): for a
// directory that holds only state, such as a spool.
func Files(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() {
			errs = append(errs, File(filepath.Join(dir, e.Name()), log))
		}
	}
	return errors.Join(errs...)
}

// tighten clears the group and other bits of path's mode, and logs when
// it changed anything. Symbolic links are followed: a data directory may
// be a link to another disk.
func tighten(path string, log *slog.Logger) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	old := fi.Mode().Perm()
	want := old &^ 0o077
	if old == want {
		return nil
	}
	if err := os.Chmod(path, want); err != nil {
		return fmt.Errorf("make %s private (chmod %04o, it is %04o): %w", path, want, old, err)
	}
	if log != nil {
		log.Info("made a state file or directory private to unyo's user", "path", path, "was", fmt.Sprintf("%04o", old), "now", fmt.Sprintf("%04o", want))
	}
	return nil
}
