// Package atomicfile replaces small state files (offsets, caches, handles)
// so that a reader, or the process after a crash or a power loss, finds the
// old content or the new one, never a part.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to path+".tmp", syncs it, renames it over path and
// syncs the directory, so that the rename itself is durable. One writer per
// path at a time: the temporary name is fixed, so that a crash leaves at
// most one behind, which the next write replaces.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	// A temporary file a crash left behind would keep its mode through
	// O_TRUNC, and pass it to path: start afresh so that perm applies.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeSynced(tmp, data, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeSynced(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
