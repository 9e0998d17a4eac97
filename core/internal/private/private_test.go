package private

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestDirAndFiles(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name    string
		mode    fs.FileMode // 0: does not exist
		want    fs.FileMode
		wantLog bool
	}{
		{"new", 0, 0o700, false},
		{"loose", 0o755, 0o700, true},
		{"group only", 0o750, 0o700, true},
		{"already private", 0o700, 0o700, false},
		{"stricter stays", 0o500, 0o500, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			dir := filepath.Join(root, strings.ReplaceAll(tt.name, " ", "-"), "data")
			file := filepath.Join(dir, "state.db")
			if tt.mode != 0 {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(file, tt.mode&^0o111); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tt.mode); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(dir, 0o700) })
			}
			if err := Dir(dir, log); err != nil {
				t.Fatal(err)
			}
			if got := mode(t, dir); got != tt.want {
				t.Errorf("directory mode %04o, want %04o", got, tt.want)
			}
			if tt.mode == 0 {
				if got := mode(t, filepath.Dir(dir)); got != 0o700 {
					t.Errorf("created parent mode %04o, want 0700", got)
				}
			} else if tt.mode&0o200 != 0 {
				if err := Files(dir, log); err != nil {
					t.Fatal(err)
				}
				if got, want := mode(t, file), tt.want&^0o111; got != want {
					t.Errorf("file mode %04o, want %04o", got, want)
				}
			}
			if got := strings.Contains(logs.String(), "made a state file or directory private"); got != tt.wantLog {
				t.Errorf("logged %v, want %v: %s", got, tt.wantLog, logs.String())
			}
		})
	}
}

func TestFileMissingIsFine(t *testing.T) {
	if err := File(filepath.Join(t.TempDir(), "nope"), nil); err != nil {
		t.Errorf("File of a missing path: %v", err)
	}
}
