package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// record is one load balancer as kept in the state directory: what the
// caller asked for and its backends' last known health. The maps in the
// kernel are derived from the records; a restarted plugin reads them back.
type record struct {
	ID        string                   `json:"id"`
	Labels    map[string]string        `json:"labels,omitempty"`
	Config    map[string]any           `json:"config"`
	CreatedAt time.Time                `json:"created_at"`
	Health    map[string]backendHealth `json:"health,omitempty"`
}

// store is the state directory: one JSON file per resource, and a lock
// file that serializes changes between plugin processes (a restarted
// plugin may overlap with the one it replaces).
type store struct {
	dir string
}

func (s store) resDir() string { return filepath.Join(s.dir, "resources") }

func (s store) path(id string) string {
	return filepath.Join(s.resDir(), url.PathEscape(id)+".json")
}

// lock takes the state directory's lock until the returned func.
func (s store) lock() (func(), error) {
	if err := os.MkdirAll(s.resDir(), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// load reads every record, oldest first.
func (s store) load() ([]record, error) {
	ents, err := os.ReadDir(s.resDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state directory: %w", err)
	}
	var out []record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.resDir(), e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading the state directory: %w", err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("state file %s is unreadable: %w", e.Name(), err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// save writes a record atomically.
func (s store) save(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := s.path(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the state of %s: %w", r.ID, err)
	}
	if err := os.Rename(tmp, s.path(r.ID)); err != nil {
		return fmt.Errorf("writing the state of %s: %w", r.ID, err)
	}
	return nil
}

// remove deletes a record; false if there was none.
func (s store) remove(id string) (bool, error) {
	err := os.Remove(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing the state of %s: %w", id, err)
	}
	return true, nil
}
