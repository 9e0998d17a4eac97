package host

import (
	"os"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel send SIGTERM to a plugin when the host dies,
// so that no plugin outlives it even after a SIGKILL of the host. (The SDK
// also polls its parent, for plugins started some other way.) Pdeathsig is
// tied to the thread that forked; Go only retires threads whose goroutine
// exits while locked to them, which the host never does. Each plugin leads
// its own process group, so that killGroup can end whatever it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}

// killGroup SIGKILLs the process group a plugin led: children it leaked
// (left running, or orphaned by its crash). A child that made a session
// or group of its own has opted out and is not found this way.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// fileID is what the kernel says about a file's identity and last change.
type fileID struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
}

func (id fileID) changed() time.Time { return time.Unix(0, max(id.Mtime, id.Ctime)) }

// identity returns fi's fileID; false where the platform gives none.
func identity(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: int64(st.Size), // widths differ by arch
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}
