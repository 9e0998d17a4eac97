package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/storetest"
	"github.com/unyo-ops/unyo/integration/testpg"
)

func openSQLite(t *testing.T, path string) *Store {
	t.Helper()
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openPostgres(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "unyo.db"))
	})
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	srv := testpg.New(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openPostgres(t, srv.CreateDatabase(t))
	})
}

// Two store handles on one database allocate addresses as two root
// replicas would.
func TestReplicas(t *testing.T) {
	t.Parallel()
	both := func(t *testing.T, open func() *Store) (store.Store, store.Store) {
		a, b := open(), open()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		storetest.RunReplicas(t, func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "unyo.db")
			return both(t, func() *Store { return openSQLite(t, path) })
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		srv := testpg.New(t)
		storetest.RunReplicas(t, func(t *testing.T) (store.Store, store.Store) {
			dsn := srv.CreateDatabase(t)
			return both(t, func() *Store { return openPostgres(t, dsn) })
		})
	})
}

// backends runs fn against a fresh database location of each backend; open
// opens (or re-opens) a store there.
func backends(t *testing.T, fn func(t *testing.T, open func(ctx context.Context) (*Store, error))) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		// Characters that mean something in a SQLite URI.
		path := filepath.Join(t.TempDir(), "with space & ?odd#name%.db")
		fn(t, func(ctx context.Context) (*Store, error) { return OpenSQLite(ctx, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := testpg.New(t).CreateDatabase(t)
		fn(t, func(ctx context.Context) (*Store, error) { return OpenPostgres(ctx, dsn) })
	})
}

type appliedMigration struct {
	version   int64
	name      string
	appliedAt int64
}

func appliedMigrations(t *testing.T, s *Store) []appliedMigration {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []appliedMigration
	for rows.Next() {
		var m appliedMigration
		if err := rows.Scan(&m.version, &m.name, &m.appliedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		s, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want, err := loadMigrations(s.d.name)
		if err != nil {
			t.Fatal(err)
		}
		first := appliedMigrations(t, s)
		if len(first) != len(want) {
			t.Fatalf("fresh database: %d migrations applied, want %d", len(first), len(want))
		}
		for i, m := range first {
			if m.version != want[i].version || m.name != want[i].name || m.appliedAt == 0 {
				t.Errorf("migration %d recorded as %+v, want version %d %s", i, m, want[i].version, want[i].name)
			}
		}
		if _, err := s.PutCheck(t.Context(), &unyov1.Check{Name: "disk"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// Re-opening applies nothing again and keeps the data.
		s, err = open(t.Context())
		if err != nil {
			t.Fatalf("re-open: %v", err)
		}
		if got := appliedMigrations(t, s); fmt.Sprint(got) != fmt.Sprint(first) {
			t.Errorf("after re-open migrations are %+v, want unchanged %+v", got, first)
		}
		if _, err := s.GetCheck(t.Context(), "disk"); err != nil {
			t.Errorf("after re-open: %v", err)
		}
		if rev, err := s.ChecksRevision(t.Context()); err != nil || rev != 1 {
			t.Errorf("after re-open checks revision = %d, %v; want 1", rev, err)
		}

		// A database migrated by a newer unyo is refused.
		if _, err := s.w.ExecContext(t.Context(),
			"INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'future', 1)", len(want)+1); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err := open(t.Context()); err == nil || !strings.Contains(err.Error(), "upgrade unyo") {
			if s != nil {
				s.Close()
			}
			t.Errorf("opening a database from a newer unyo: error %v, want one asking to upgrade", err)
		}
	})
}

// Replicas starting together on a fresh database migrate it once between
// them, without errors.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		const replicas = 4
		stores := make([]*Store, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Go(func() { stores[i], errs[i] = open(t.Context()) })
		}
		wg.Wait()
		for i, s := range stores {
			if errs[i] != nil {
				t.Errorf("replica %d: %v", i, errs[i])
				continue
			}
			defer s.Close()
		}
		if t.Failed() {
			return
		}
		if got := appliedMigrations(t, stores[0]); len(got) == 0 || got[0].version != 1 {
			t.Errorf("migrations after concurrent open: %+v", got)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "no", "such", "dir", "unyo.db")); err == nil {
		t.Error("OpenSQLite in a missing directory succeeded")
	} else if !strings.Contains(err.Error(), "unyo.db") {
		t.Errorf("OpenSQLite error %q does not name the file", err)
	}
	if _, err := OpenSQLite(ctx, ""); err == nil {
		t.Error("OpenSQLite without a path succeeded")
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := OpenPostgres(short, "postgres://unyo:secret@127.0.0.1:1/unyo?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("OpenPostgres on a closed port succeeded")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("OpenPostgres error %q shows the password", err)
	}
}

// SQLite has one writer; many concurrent writers and readers must queue
// rather than fail with SQLITE_BUSY.
func TestSQLiteConcurrentReadersAndWriters(t *testing.T) {
	t.Parallel()
	s := openSQLite(t, filepath.Join(t.TempDir(), "unyo.db"))
	defer s.Close()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Go(func() {
			for i := range 30 {
				e := &unyov1.Event{Id: fmt.Sprintf("%d-%d", w, i), Node: fmt.Sprintf("n%d", w), Check: "c"}
				if _, err := s.AppendEvents(ctx, []*unyov1.Event{e}); err != nil {
					errs <- err
					return
				}
				if err := s.UpsertNode(ctx, &unyov1.Node{Name: e.Node}); err != nil {
					errs <- err
					return
				}
				if _, err := s.TryAcquireLease(ctx, "l", e.Node, time.Second); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range 30 {
				if _, err := s.ListEvents(ctx, store.EventFilter{History: true}); err != nil {
					errs <- err
					return
				}
				if _, err := s.ListNodes(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Stopping PostgreSQL fails calls with errors, and once it is back the same
// store works again without being re-opened.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	srv := testpg.New(t)
	s := openPostgres(t, srv.CreateDatabase(t))
	defer s.Close()
	ctx := t.Context()
	if err := s.UpsertNode(ctx, &unyov1.Node{Name: "web1"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.GetNode(short, "web1"); err == nil {
		t.Fatal("GetNode succeeded while PostgreSQL was down")
	} else if errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetNode while PostgreSQL was down: %v, want a connection error, not not-found", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Pooled connections died with the server; the pool replaces them.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := s.GetNode(ctx, "web1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still failing 15s after PostgreSQL came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.AppendEvents(ctx, []*unyov1.Event{{Id: "e1", Node: "web1", Check: "c"}}); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
}

// The database holds check env secrets and webhook headers: it and its
// -wal and -shm files are created 0600, whatever the umask allows.
func TestSQLiteFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A write, so that the WAL and shared-memory files exist.
	if _, err := st.AppendEvents(context.Background(), []*unyov1.Event{{Id: "e1", Node: "n1", Check: "c1"}}); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("state.db%s has mode %04o, want 0600", suffix, fi.Mode().Perm())
		}
	}
}
