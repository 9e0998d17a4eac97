//go:build !linux

package footprint

import "errors"

// ReleaseExecutable is Linux's: elsewhere the executable's pages are left
// to the system.
func ReleaseExecutable() (int64, error) {
	return 0, errors.ErrUnsupported
}
