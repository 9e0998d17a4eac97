//go:build unix

package logtail

import (
	"io/fs"
	"syscall"
)

// fileIDOf returns the device and inode of a file: its identity across
// renames, which is how rotation is told apart from appends.
func fileIDOf(fi fs.FileInfo, _ string) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)} // Dev is int32 on some systems
	}
	return fileID{}
}
