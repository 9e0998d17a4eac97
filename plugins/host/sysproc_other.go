//go:build !linux

package host

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
