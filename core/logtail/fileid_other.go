//go:build !unix

package logtail

import (
	"hash/fnv"
	"io/fs"
)

// fileIDOf falls back to the path where there are no inodes: rotation by
// rename then looks like a truncation or a new file.
func fileIDOf(_ fs.FileInfo, path string) fileID {
	h := fnv.New64a()
	h.Write([]byte(path))
	return fileID{ino: h.Sum64()}
}
