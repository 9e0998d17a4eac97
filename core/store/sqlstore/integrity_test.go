package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func appendN(t *testing.T, s *Store, from, to int) {
	t.Helper()
	var batch []*unyov1.Event
	for i := from; i < to; i++ {
		batch = append(batch, &unyov1.Event{Id: fmt.Sprintf("e%06d", i), Node: fmt.Sprintf("n%d", i%7), Check: "c",
			Output: strings.Repeat("x", 200), StartedAt: timestamppb.New(time.Unix(1_750_000_000+int64(i), 0))})
	}
	if _, err := s.AppendEvents(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}

// damagePage overwrites page (1-based) of the database file at path.
func damagePage(t *testing.T, path string, page int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
	if _, err := f.WriteAt(junk, (page-1)*4096); err != nil {
		t.Fatal(err)
	}
}

func rootPage(t *testing.T, s *Store, name string) int64 {
	t.Helper()
	var p int64
	if err := s.w.QueryRowContext(t.Context(), "SELECT rootpage FROM sqlite_master WHERE name = $1", name).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenRefusesDamagedSQLite: a damaged page makes OpenSQLite fail with a
// message naming the file and what to do, instead of serving.
func TestOpenRefusesDamagedSQLite(t *testing.T) {
	for _, table := range []string{"events", "events_id", "latest_events"} {
		t.Run(table, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := openSQLite(t, path)
			appendN(t, s, 0, 2000)
			page := rootPage(t, s, table)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			damagePage(t, path, page)
			_, err := OpenSQLite(t.Context(), path)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenSQLite of a damaged file: %v", err)
			}
			for _, want := range []string{path, "damaged", "restore the last backup", ".recover"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}
		})
	}
}

// TestHealthFailsWhenReadsFail: with a page damaged under a running store,
// Health fails (and /healthz with it) instead of saying ok.
func TestHealthFailsWhenReadsFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSQLite(t, path)
	defer s.Close()
	appendN(t, s, 0, 2000)
	if err := s.Health(t.Context()); err != nil {
		t.Fatalf("Health of an intact store: %v", err)
	}
	if _, err := s.w.ExecContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	damagePage(t, path, rootPage(t, s, "events"))
	s.r.SetMaxIdleConns(0) // readers open afresh, without cached pages
	err := s.Health(t.Context())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("Health of a damaged store: %v", err)
	}
}

// TestAckedMarkFindsLostEvents: a store that comes back below the events
// it acknowledged (here an older copy of the file) is found out at start,
// once; an intact one is not.
func TestAckedMarkFindsLostEvents(t *testing.T) {
	dir := t.TempDir()
	path, mark, backup := filepath.Join(dir, "state.db"), filepath.Join(dir, "acked"), filepath.Join(dir, "backup.db")
	s := openSQLite(t, path)
	c, err := s.TrackAcked(t.Context(), mark)
	if err != nil || !c.New || c.Missing() != 0 {
		t.Fatalf("first TrackAcked: %+v, %v", c, err)
	}
	appendN(t, s, 0, 40)
	if _, err := s.w.ExecContext(t.Context(), "VACUUM INTO $1", backup); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 40, 100)
	appendN(t, s, 100, 160)
	s.Close()

	// Reopened intact: nothing missing.
	s = openSQLite(t, path)
	if c, err := s.TrackAcked(t.Context(), mark); err != nil || c.New || c.Missing() != 0 || c.Acked != 160 {
		t.Fatalf("TrackAcked of the intact store: %+v, %v", c, err)
	}
	s.Close()

	// The old copy put in its place lost 120 acknowledged events.
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, path)
	c, err = s.TrackAcked(t.Context(), mark)
	if err != nil || c.Missing() != 120 || c.Acked != 160 || c.Stored != 40 {
		t.Fatalf("TrackAcked of the old copy: %+v (missing %d), %v", c, c.Missing(), err)
	}
	// New events continue above the mark, and the loss is reported once.
	appendN(t, s, 1000, 1010)
	s.Close()
	s = openSQLite(t, path)
	defer s.Close()
	if c, err := s.TrackAcked(context.Background(), mark); err != nil || c.Missing() != 0 || c.Acked != 170 {
		t.Fatalf("TrackAcked after the loss was reported: %+v, %v", c, err)
	}
}

// TestHealthOfAnIntactStore: the probe's queries run on both backends, on a
// new store and on one with events.
func TestHealthOfAnIntactStore(t *testing.T) {
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		s, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Health(t.Context()); err != nil {
			t.Fatalf("Health of a new store: %v", err)
		}
		appendN(t, s, 0, 10)
		if err := s.Health(t.Context()); err != nil {
			t.Fatalf("Health with events: %v", err)
		}
	})
}

// TestAckedMarkOnBothBackends: the mark follows commits and finds a store
// whose event sequence went back (here set back by hand) on both backends.
func TestAckedMarkOnBothBackends(t *testing.T) {
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		mark := filepath.Join(t.TempDir(), "acked")
		s, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TrackAcked(t.Context(), mark); err != nil {
			t.Fatal(err)
		}
		appendN(t, s, 0, 30)
		if _, err := s.w.ExecContext(t.Context(), "UPDATE counters SET value = 10 WHERE name = 'event_seq'"); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, err := s.TrackAcked(t.Context(), mark)
		if err != nil || c.Missing() != 20 || c.Acked != 30 {
			t.Fatalf("TrackAcked: %+v, %v", c, err)
		}
		var seq int64
		if err := s.w.QueryRowContext(t.Context(), "SELECT value FROM counters WHERE name = 'event_seq'").Scan(&seq); err != nil || seq != 30 {
			t.Fatalf("event_seq after the loss was found: %d, %v", seq, err)
		}
	})
}
