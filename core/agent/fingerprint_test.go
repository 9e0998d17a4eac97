package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHardwareSerial: a serial number root can match by, and none from a
// file that is missing, empty or holds a placeholder many machines share.
func TestHardwareSerial(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ content, want string }{
		{"CZ20411ABC\n", "CZ20411ABC"},
		{"  SN-1  \n", "SN-1"},
		{"", ""},
		{"To Be Filled By O.E.M.\n", ""},
		{"Not Specified\n", ""},
		{"System Serial Number\n", ""},
		{"0\n", ""},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, "serial")
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := hardwareSerial(path); got != tt.want {
			t.Errorf("%d: serial of %q = %q, want %q", i, tt.content, got, tt.want)
		}
	}
	if got := hardwareSerial(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("serial of a missing file = %q", got)
	}
}
