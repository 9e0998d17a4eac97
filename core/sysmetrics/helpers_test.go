package sysmetrics

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// copyTree copies the regular files of src into dst, overwriting.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dst, rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeFiles writes name -> content under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := writeFile(filepath.Join(root, name), []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
}

// utmp record types of glibc's <utmp.h>.
const (
	utRunLvl       = 1
	utBootTime     = 2
	utLoginProcess = 6
	utUserProcess  = 7
	utDeadProcess  = 8
)

// utmpBytes builds a utmp file in glibc's x86_64 layout: 384-byte records,
// ut_type (short) at 0, ut_pid at 4, ut_line at 8, ut_user at 44.
func utmpBytes(types ...int16) []byte {
	b := make([]byte, utmpRecord*len(types))
	for i, typ := range types {
		r := b[i*utmpRecord:]
		binary.NativeEndian.PutUint16(r, uint16(typ))
		binary.NativeEndian.PutUint32(r[4:], uint32(1000+i))
		copy(r[8:], "pts/"+strconv.Itoa(i))
		if typ == utUserProcess {
			copy(r[44:], "user"+strconv.Itoa(i))
		}
	}
	return b
}

// fakeStatfs answers statfs for mount points under root with fixed,
// mount-dependent numbers, so golden files do not depend on this host.
func fakeStatfs(root string) func(pz []byte, st *unix.Statfs_t) error {
	return func(pz []byte, st *unix.Statfs_t) error {
		mp := strings.TrimPrefix(pathString(pz), root)
		k := uint64(len(mp))
		*st = unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 1000000 * k, Bfree: 400000 * k, Bavail: 350000 * k, Files: 65536 * k, Ffree: 60000 * k}
		return nil
	}
}

// testCollector returns a Collector on root whose clock is *now.
func testCollector(root string, now *time.Time) *Collector {
	c := New(Options{Root: root, Now: func() time.Time { return *now }})
	c.statfs = fakeStatfs(strings.TrimRight(root, "/"))
	c.pageSize = 4096 // the fixtures are from x86_64 machines
	return c
}

func collect(t *testing.T, c *Collector) []Sample {
	t.Helper()
	out, err := c.Collect(context.Background(), nil)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return out
}

// key renders a series as name{a="b",c="d"}.
func key(s Sample) string {
	var b strings.Builder
	b.WriteString(s.Name)
	if len(s.Labels) > 0 {
		b.WriteByte('{')
		for i, l := range s.Labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.Name + "=" + strconv.Quote(l.Value))
		}
		b.WriteByte('}')
	}
	return b.String()
}

// render is the golden form: one sorted "series value" line per sample.
func render(out []Sample) string {
	lines := make([]string, len(out))
	for i, s := range out {
		lines[i] = key(s) + " " + strconv.FormatFloat(s.Value, 'g', -1, 64)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// byKey indexes samples by series and fails on duplicates or labels that
// are not sorted.
func byKey(t *testing.T, out []Sample) map[string]float64 {
	t.Helper()
	m := make(map[string]float64, len(out))
	for _, s := range out {
		if !slices.IsSortedFunc(s.Labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("%s: labels not sorted", key(s))
		}
		k := key(s)
		if _, dup := m[k]; dup {
			t.Errorf("duplicate series %s", k)
		}
		m[k] = s.Value
	}
	return m
}
