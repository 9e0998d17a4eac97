package footprint

import (
	"os"
	"runtime"
	"testing"
)

func TestParseSmaps(t *testing.T) {
	data, err := os.ReadFile("testdata/smaps")
	if err != nil {
		t.Fatal(err)
	}
	all, err := parseSmaps(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 {
		t.Fatalf("%d mappings, want 8", len(all))
	}
	tests := []struct {
		i         int
		start     uintptr
		perms     string
		path      string
		rss, anon int64
	}{
		{1, 0x402000, "r-xp", "/opt/unyo/bin/unyo", 22128 << 10, 0},
		{3, 0x331f000, "r--p", "/opt/unyo/bin/unyo", 4 << 10, 4 << 10}, // relocations made read-only
		{5, 0x915fcc00000, "rw-p", "", 7032 << 10, 7032 << 10},
		{7, 0x7ffd1c3e0000, "rw-p", "[stack]", 20 << 10, 20 << 10},
	}
	for _, tt := range tests {
		m := all[tt.i]
		if m.start != tt.start || m.perms != tt.perms || m.path != tt.path || m.rss != tt.rss || m.anon != tt.anon {
			t.Errorf("mapping %d = %+v, want start %x perms %s path %q rss %d anon %d", tt.i, m, tt.start, tt.perms, tt.path, tt.rss, tt.anon)
		}
	}
}

func TestParseSmapsRejectsGarbage(t *testing.T) {
	if _, err := parseSmaps([]byte("not-a-mapping\n")); err == nil {
		t.Error("parseSmaps accepted a line that is neither a mapping nor a field")
	}
}

// TestReleaseExecutable: the test binary's code and read-only data are
// resident after it started; releasing them leaves less resident, and the
// program goes on running the code it dropped.
func TestReleaseExecutable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	resident := func() int64 {
		maps, err := executableMappings(exe)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, m := range maps {
			sum += m.rss
		}
		return sum
	}
	before := resident()
	if before == 0 {
		t.Fatal("no resident read-only pages of the test binary before releasing")
	}
	released, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	after := resident()
	if released <= 0 || after >= before {
		t.Errorf("released %d bytes; resident %d before, %d after: want some released and fewer resident", released, before, after)
	}
	if _, err := parseSmaps([]byte("00400000-00401000 r--p 00000000 fe:00 1 /x\nRss: 4 kB\n")); err != nil {
		t.Errorf("code released and faulted back in fails: %v", err)
	}
}
