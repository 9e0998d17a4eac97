package footprint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutable unmaps from this process the resident pages of its
// executable's clean read-only mappings (code, read-only data) and drops
// from the page cache those of the file's pages no other process maps.
// Nothing is lost: the kernel reads each page back from the file when it
// is next used, and only that page (MADV_RANDOM): the page cache may hold
// the file in large folios (as written by one large write), which would
// map whole megabytes back at the first touch. A mapping with any page of
// its own (Anonymous, such as the relocations the dynamic loader wrote
// before making them read-only) is left alone. It returns how many
// resident bytes those mappings held.
func ReleaseExecutable() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("find the executable: %w", err)
	}
	maps, err := executableMappings(exe)
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("open the executable: %w", err)
	}
	defer f.Close()
	var released int64
	var errs []error
	for _, m := range maps {
		if err := m.madvise(unix.MADV_RANDOM); err != nil {
			errs = append(errs, fmt.Errorf("madvise(MADV_RANDOM) %x-%x: %w", m.start, m.end, err))
		}
		released += m.rss
	}
	// Unmapping and evicting run back to back in raw system calls, without
	// the scheduler's bookkeeping between them: a page of the file the
	// process touches in between is mapped again, and with it the whole
	// large folio (up to 2 MiB) the page cache holds it in, which can then
	// not be evicted. Pages still mapped elsewhere (another unyo on the
	// machine) stay.
	dontneed := make([]unix.Errno, len(maps))
	for i, m := range maps {
		_, _, dontneed[i] = unix.RawSyscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED)
	}
	fe := evictFile(f.Fd())
	for i, e := range dontneed {
		if e != 0 {
			errs = append(errs, fmt.Errorf("madvise(MADV_DONTNEED) %x-%x: %w", maps[i].start, maps[i].end, e))
		}
	}
	if fe != 0 {
		errs = append(errs, fmt.Errorf("fadvise(POSIX_FADV_DONTNEED) %s: %w", exe, fe))
	}
	return released, errors.Join(errs...)
}

// mapping is one line of /proc/self/smaps with the fields used here.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
	rss, anon  int64
}

// madvise gives the kernel advice on the mapping. The range is passed as
// addresses: it is not Go memory, and a []byte over it would only be
// built for the call.
func (m mapping) madvise(advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// executableMappings returns the clean read-only mappings of exe.
func executableMappings(exe string) ([]mapping, error) {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	all, err := parseSmaps(data)
	if err != nil {
		return nil, err
	}
	var out []mapping
	for _, m := range all {
		if m.path == exe && !strings.Contains(m.perms, "w") && m.anon == 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseSmaps reads the address range, permissions, path, Rss and
// Anonymous of each mapping in the /proc/PID/smaps format.
func parseSmaps(data []byte) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(f[0], ":"); ok {
			if len(out) == 0 || len(f) < 2 {
				continue
			}
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue // VmFlags and other non-size fields
			}
			switch key {
			case "Rss":
				out[len(out)-1].rss = kb << 10
			case "Anonymous":
				out[len(out)-1].anon = kb << 10
			}
			continue
		}
		// A mapping's header: start-end perms offset dev inode [path].
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok || len(f) < 5 {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("smaps: line %q: %w", line, err)
		}
		m := mapping{start: uintptr(start), end: uintptr(end), perms: f[1]}
		if len(f) >= 6 {
			m.path = strings.Join(f[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
