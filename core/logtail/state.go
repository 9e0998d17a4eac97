package logtail

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/unyo-ops/unyo/core/atomicfile"
)

const (
	stateVersion = 1
	// fingerprintBytes of a file's start are hashed into its state entry so
	// that a reused inode (file deleted while the agent was down, new file
	// got the same inode) is not resumed at the old offset.
	fingerprintBytes = 256
)

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// String is the form used in Record.FileID and the state file: "dev:inode".
func (id fileID) String() string {
	return strconv.FormatUint(id.dev, 10) + ":" + strconv.FormatUint(id.ino, 10)
}

// stateEntry is the committed position in one file.
type stateEntry struct {
	ID     string `json:"id"`     // fileID.String()
	Path   string `json:"path"`   // the path the file was found under
	Offset int64  `json:"offset"` // everything before it was delivered
	// Align: Offset may be inside a line (the first read started near the
	// end of an existing file); skip to the next line start.
	Align  bool   `json:"align,omitempty"`
	FPLen  int    `json:"fp_len,omitempty"` // bytes hashed into FP
	FP     string `json:"fp,omitempty"`     // FNV-1a 64 of the first FPLen bytes, hex
	fpDone bool   // FPLen reached fingerprintBytes
}

type stateDoc struct {
	Version int           `json:"version"`
	Files   []*stateEntry `json:"files"`
}

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) (map[string]*stateEntry, error) {
	m := make(map[string]*stateEntry)
	if path == "" {
		return m, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log offsets %s: %w", path, err)
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read log offsets %s: %w", path, err)
	}
	if doc.Version != stateVersion {
		return nil, fmt.Errorf("read log offsets %s: unknown version %d", path, doc.Version)
	}
	for _, e := range doc.Files {
		if e == nil || e.ID == "" || e.Offset < 0 {
			return nil, fmt.Errorf("read log offsets %s: bad entry %+v", path, e)
		}
		e.fpDone = e.FPLen >= fingerprintBytes
		m[e.ID] = e
	}
	return m, nil
}

// saveState writes the state atomically: a crash leaves the old or the new
// file, never a mix.
func saveState(path string, state map[string]*stateEntry) error {
	doc := stateDoc{Version: stateVersion, Files: make([]*stateEntry, 0, len(state))}
	for _, e := range state {
		doc.Files = append(doc.Files, e)
	}
	slices.SortFunc(doc.Files, func(a, b *stateEntry) int {
		if a.Path != b.Path {
			if a.Path < b.Path {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	data, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return fmt.Errorf("write log offsets %s: %w", path, err)
	}
	data = append(data, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write log offsets %s: %w", path, err)
	}
	// 0600 like all state: the offsets name the files tailed.
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write log offsets %s: %w", path, err)
	}
	return nil
}

// fingerprint hashes the first n bytes of f.
func fingerprint(f *os.File, n int, buf []byte) (string, bool) {
	if n > len(buf) {
		n = len(buf)
	}
	if got, _ := f.ReadAt(buf[:n], 0); got != n {
		return "", false
	}
	h := fnv.New64a()
	h.Write(buf[:n])
	return strconv.FormatUint(h.Sum64(), 16), true
}
