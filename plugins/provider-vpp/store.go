package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/unyo-ops/unyo/core/atomicfile"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// record is one resource as the plugin stores it: <state_dir>/<id>.json.
// VPP's tables say what is applied; the records say what is wanted, and
// which VIPs the plugin owns, so they survive plugin and VPP restarts.
type record struct {
	ID        string            `json:"id"`
	Labels    map[string]string `json:"labels,omitempty"`
	Config    map[string]any    `json:"config"`
	CreatedAt time.Time         `json:"created_at"`
	// DrainUntil is set while a Delete drains the resource's flows.
	DrainUntil time.Time `json:"drain_until,omitzero"`
}

const recordExt = ".json"

// store is the state directory. Every change of the records and of VPP's
// tables happens under its lock (an flock on <state_dir>/lock), so that
// two plugin instances sharing the directory (one being replaced) never
// apply different views.
type store struct {
	dir string
}

func (s store) path(id string) (string, error) {
	if id == "" || id == "." || id == ".." {
		return "", sdk.Invalid("id", "%q cannot name a resource", id)
	}
	return filepath.Join(s.dir, url.PathEscape(id)+recordExt), nil
}

// lock takes the directory's lock; the returned func releases it.
func (s store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("provider vpp: state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("provider vpp: locking the state directory: %w", err)
	}
	return func() { f.Close() }, nil
}

// get reads one record; sdk.ErrNotFound when there is none.
func (s store) get(id string) (record, error) {
	p, err := s.path(id)
	if err != nil {
		return record{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, fmt.Errorf("provider vpp: resource %s: %w", id, sdk.ErrNotFound)
	}
	if err != nil {
		return record{}, fmt.Errorf("provider vpp: resource %s: %w", id, err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("provider vpp: resource %s: %s is damaged: %w", id, p, err)
	}
	return r, nil
}

func (s store) put(r record) error {
	p, err := s.path(r.ID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("provider vpp: resource %s: %w", r.ID, err)
	}
	return nil
}

func (s store) remove(id string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("provider vpp: resource %s: %w", id, err)
	}
	return nil
}

// all reads every record, by id.
func (s store) all() ([]record, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("provider vpp: state directory: %w", err)
	}
	var out []record
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), recordExt)
		if !ok || e.IsDir() {
			continue
		}
		id, err := url.PathUnescape(name)
		if err != nil {
			continue
		}
		r, err := s.get(id)
		if errors.Is(err, sdk.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
