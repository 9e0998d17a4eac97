//go:build !linux

package host

import (
	"os"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup: only Linux starts plugins in process groups of their own.
func killGroup(int) {}

// fileID is empty where the platform gives no identity: nothing is cached.
type fileID struct{}

func (fileID) changed() time.Time { return time.Time{} }

func identity(os.FileInfo) (fileID, bool) { return fileID{}, false }
