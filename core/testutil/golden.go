package testutil

import (
	"bytes"
	"os"
	"testing"
)

// Golden compares got with the golden file at path, or, when update is
// set (a test's -update flag), rewrites the file with got. A difference is
// reported at its first differing line, with both versions of that line.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(g), len(w)) {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			t.Errorf("%s differs from the golden file (go test -update rewrites it), first at line %d:\n got %s\nwant %s", path, i+1, gl, wl)
			return
		}
	}
}
