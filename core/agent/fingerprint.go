package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Fingerprint describes this machine: what the scheduler may place on it and
// what operators see in `unyo nodes get`.
func Fingerprint(diskPath string) (*unyov1.Capacity, string, string) {
	capacity := &unyov1.Capacity{Cpus: int32(runtime.NumCPU())}
	if mem, err := memTotal("/proc/meminfo"); err == nil {
		capacity.MemoryBytes = mem
	}
	var st unix.Statfs_t
	if err := unix.Statfs(diskPath, &st); err == nil {
		capacity.DiskBytes = int64(st.Blocks) * st.Bsize
	}
	var uts unix.Utsname
	osName, kernel := runtime.GOOS, ""
	if err := unix.Uname(&uts); err == nil {
		osName = unix.ByteSliceToString(uts.Sysname[:])
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	if pretty := osRelease("/etc/os-release"); pretty != "" {
		osName = pretty
	}
	return capacity, osName, kernel
}

// memTotal reads MemTotal from a meminfo file by field name.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemTotal" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: MemTotal: %w", path, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

func osRelease(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// dmiSerialPath is where Linux shows the machine's serial number (readable
// by root only on most systems).
const dmiSerialPath = "/sys/class/dmi/id/product_serial"

// hardwareSerial reads the machine's serial number from path, for root to
// match the node to its inventory entry. Unreadable, empty or placeholder
// values (firmware that was never filled in) give "": many machines share
// those, so they identify none.
func hardwareSerial(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(data))
	switch strings.ToLower(s) {
	case "", "0", "none", "n/a", "not specified", "not applicable", "default string",
		"to be filled by o.e.m.", "system serial number", "0123456789":
		return ""
	}
	return s
}
