package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unyo-ops/unyo/core/atomicfile"
)

// The persistent digest cache (Config.DigestCache) keeps verified digests
// across restarts of the core, so that a binary is hashed once per change
// of the file rather than once per start of the agent: hashing a ~20 MB
// plugin costs about as much as starting it.
//
// Trust model. An entry is used only while the file's device, inode, size,
// mtime and ctime are all as they were when it was hashed. Replacing the
// file gives a new inode (or a new ctime, should the inode be reused);
// writing it in place changes mtime and ctime; and ctime cannot be set back
// by an unprivileged user, since the kernel sets it to the current time on
// every change. Files changed within racyWindow before the hash are not
// cached, so that a change within the file system's timestamp granularity
// cannot hide. The cache file is written 0600 in the core's private data
// directory: whoever can write it (or set the clock back, or write the
// block device) is root or the core's own user, who could replace the pin
// in the configuration just as well.

// digestFile is the cache file's content.
type digestFile struct {
	Version int           `json:"version"`
	Entries []digestEntry `json:"entries"`
}

const digestFileVersion = 1

// loadDigests reads the cache file; a missing file is an empty cache, an
// unreadable one is reported and ignored (everything is hashed again).
func (h *Host) loadDigests() {
	path := h.cfg.DigestCache
	if path == "" {
		return
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var f digestFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err == nil && f.Version != digestFileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, digestFileVersion)
	}
	if err != nil {
		h.log.Warn("ignoring the plugin digest cache; plugins are hashed again", "path", path, "err", err)
		return
	}
	for _, e := range f.Entries {
		h.digests[e.Path] = e
	}
}

// saveDigests writes the cache file whole, through a rename so that a
// reader (or a crash) never sees half of it. Called with digestMu held.
func (h *Host) saveDigests() {
	path := h.cfg.DigestCache
	if path == "" {
		return
	}
	f := digestFile{Version: digestFileVersion}
	for _, e := range h.digests {
		f.Entries = append(f.Entries, e)
	}
	err := func() error {
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		return atomicfile.WriteFile(path, b, 0o600)
	}()
	if err != nil {
		h.log.Warn("cannot write the plugin digest cache; plugins will be hashed again at the next start", "path", path, "err", err)
	}
}
