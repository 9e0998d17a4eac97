package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrCorrupt is returned (wrapped) by OpenSQLite for a damaged database file,
// and by Health once reads find damage.
var ErrCorrupt = errors.New("the database file is damaged")

// SQLite's primary result codes for a damaged file.
const (
	sqliteCorrupt = 11 // SQLITE_CORRUPT
	sqliteNotADB  = 26 // SQLITE_NOTADB
)

// isCorrupt reports whether err is SQLite saying the file is damaged.
func isCorrupt(err error) bool {
	var e interface{ Code() int }
	if errors.As(err, &e) {
		c := e.Code() & 0xff
		return c == sqliteCorrupt || c == sqliteNotADB
	}
	return false
}

// corruptHelp tells the operator what to do with a damaged SQLite file.
func corruptHelp(path string) string {
	return fmt.Sprintf("the cluster does not serve from a damaged store. Stop it, keep a copy of %[1]s (and %[1]s-wal, %[1]s-shm), "+
		"then restore the last backup, or salvage what is readable with `sqlite3 %[1]s .recover | sqlite3 new.db` and put new.db in its place; "+
		"to start empty instead, move the three files away (agents resend only what their spools still hold)", path)
}

// quickCheck runs PRAGMA quick_check, which reads every page of the file
// and checks its structure (not index contents, which integrity_check would
// also compare, several times slower).
func (s *Store) quickCheck(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, "PRAGMA quick_check(10)")
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return err
		}
		if msg != "ok" {
			problems = append(problems, msg)
		}
	}
	err = rows.Err()
	if err != nil && !isCorrupt(err) {
		return err
	}
	if err != nil {
		// The check can stop at damage it cannot step over, after the
		// problems it found so far: those say where.
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: PRAGMA quick_check found: %s", ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// healthTimeout bounds one Health probe.
const healthTimeout = 2 * time.Second

// Health probes the store cheaply: it reads the event counter, the newest
// event and a page of latest states through the read path, as API reads
// do. It fails when the store cannot be read (or, see TrackAcked, when the
// record of acknowledged events cannot be written), so that /healthz
// stops saying ok while every read fails.
func (s *Store) Health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	var n int64
	for _, q := range []string{
		"SELECT value FROM counters WHERE name = 'event_seq'",
		"SELECT COALESCE(MAX(seq), 0) FROM events",
		"SELECT COUNT(*) FROM (SELECT body FROM " + latestRows + " LIMIT 100) AS page",
	} {
		if err := s.r.QueryRowContext(ctx, q).Scan(&n); err != nil {
			if isCorrupt(err) {
				err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			return fmt.Errorf("%s store cannot be read: %w", s.d.name, err)
		}
	}
	if m := s.mark.Load(); m != nil {
		if err := m.failure(); err != nil {
			return err
		}
	}
	return nil
}
