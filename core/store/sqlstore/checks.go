package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// Checks are objects of kind Check (see objects.go); these are the typed
// reads and writes the agents' configuration and the tests use.

const kindCheck = "Check"

// PutCheck creates or replaces a check (see putBatch.put).
func (s *Store) PutCheck(ctx context.Context, c *unyov1.Check) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}})
}

// DeleteCheck removes a check and advances the checks revision.
func (s *Store) DeleteCheck(ctx context.Context, name string) error {
	return s.DeleteObject(ctx, kindCheck, name)
}

func (s *Store) GetCheck(ctx context.Context, name string) (*unyov1.Check, error) {
	o, err := s.GetObject(ctx, kindCheck, name)
	return o.GetCheck(), err
}

// ListChecks returns every check, sorted by name.
func (s *Store) ListChecks(ctx context.Context) ([]*unyov1.Check, error) {
	rows, err := s.objectRows(ctx, s.r, kindCheck, "", false)
	if err != nil {
		return nil, fmt.Errorf("list checks: %w", err)
	}
	out := make([]*unyov1.Check, len(rows))
	for i, r := range rows {
		out[i] = r.o.GetCheck()
	}
	return out, nil
}

// ChecksRevision changes with every change to checks; 0 before the first.
func (s *Store) ChecksRevision(ctx context.Context) (int64, error) {
	return s.ObjectsRevision(ctx, kindCheck)
}

// checkTombstone prefixes the counters that remember a deleted check: the
// counter's value is the time of deletion in unix nanoseconds. They live in
// counters, one row per name deleted and not applied again, so that every
// replica's ingest sees them without a table of their own.
const checkTombstone = "check_deleted:"

// buryCheck records in tx that check name was deleted now.
func buryCheck(ctx context.Context, tx *sql.Tx, name string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO counters (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, checkTombstone+name, now())
	if err != nil {
		return fmt.Errorf("remember that check %q was deleted: %w", name, err)
	}
	return nil
}

// DeletedChecks returns the checks deleted and not applied again since,
// with the time of their deletion.
func (s *Store) DeletedChecks(ctx context.Context) (map[string]time.Time, error) {
	// The range keeps to the primary key's order ("C" collation in
	// PostgreSQL, binary in SQLite): ';' follows ':'.
	rows, err := s.r.QueryContext(ctx, "SELECT name, value FROM counters WHERE name >= $1 AND name < $2",
		checkTombstone, strings.TrimSuffix(checkTombstone, ":")+";")
	if err != nil {
		return nil, fmt.Errorf("read the deleted checks: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			return nil, fmt.Errorf("read the deleted checks: %w", err)
		}
		out[strings.TrimPrefix(name, checkTombstone)] = time.Unix(0, at).UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the deleted checks: %w", err)
	}
	return out, nil
}
