package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/ctxwait"
)

// migrations holds one directory per dialect of files NNNN_name.sql, applied
// in order. A released migration is never edited: changes go in a new file.
//
//go:embed migrations
var migrations embed.FS

type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads a dialect's migrations, checking that versions run
// 1, 2, 3... without gaps or duplicates.
func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations for %s: %w", dialect, err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name
		v, name, ok := parseMigrationName(e.Name())
		if !ok {
			return nil, fmt.Errorf("embedded migration %s/%s: name is not NNNN_name.sql", dir, e.Name())
		}
		if want := int64(len(ms) + 1); v != want {
			return nil, fmt.Errorf("embedded migration %s/%s: version %d, want %d (versions must run 1, 2, 3...)", dir, e.Name(), v, want)
		}
		b, err := fs.ReadFile(migrations, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read embedded migration %s/%s: %w", dir, e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	return ms, nil
}

// parseMigrationName splits "0001_init.sql" into 1 and "init".
func parseMigrationName(file string) (version int64, name string, ok bool) {
	base, isSQL := strings.CutSuffix(file, ".sql")
	num, name, found := strings.Cut(base, "_")
	if !isSQL || !found || len(num) != 4 || name == "" {
		return 0, "", false
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 1 {
		return 0, "", false
	}
	return v, name, true
}

// migrate applies the migrations db lacks, all in one transaction: a failed
// migration leaves the schema as it was.
func migrate(ctx context.Context, db *sql.DB, d *dialect) error {
	return migrateTo(ctx, db, d, math.MaxInt64)
}

// migrateTo is migrate stopping after version upTo, for tests that build a
// database as an older unyo left it.
func migrateTo(ctx context.Context, db *sql.DB, d *dialect, upTo int64) error {
	ms, err := loadMigrations(d.name)
	if err != nil {
		return err
	}
	tx, err := beginMigration(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate schema: begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.migrationLock); err != nil {
			return fmt.Errorf("migrate schema: take migration lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT NOT NULL PRIMARY KEY,
		name       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate schema: create schema_migrations: %w", err)
	}
	applied := map[int64]bool{}
	var newest int64
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate schema: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate schema: read schema_migrations: %w", err)
		}
		applied[v] = true
		newest = max(newest, v)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate schema: read schema_migrations: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate schema: read schema_migrations: %w", err)
	}
	// A newer unyo has migrated this database: this binary's queries may
	// not fit the schema any more, so refuse rather than corrupt data.
	if known := int64(len(ms)); newest > known {
		return fmt.Errorf("migrate schema: the database is at schema version %d but this unyo knows versions up to %d; upgrade unyo", newest, known)
	}
	for _, m := range ms {
		if applied[m.version] || m.version > upTo {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate schema: apply %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
			m.version, m.name, now()); err != nil {
			return fmt.Errorf("migrate schema: record %04d_%s: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate schema: commit: %w", err)
	}
	return nil
}

// migrationWait bounds how long a replica waits for another one that is
// migrating the same SQLite database: longer than SQLite's busy timeout,
// since a first migration on a slow disk takes longer than that.
const migrationWait = 2 * time.Minute

// beginMigration begins the migration's transaction. On SQLite the begin
// takes the write lock (BEGIN IMMEDIATE), which a replica migrating the
// same file holds for the whole migration: a busy database is waited for,
// up to migrationWait, rather than failing the start.
func beginMigration(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	tx, err := begin(ctx, db, migrationWait)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w (waiting for another replica's migration: %w)", err, ctx.Err())
	}
	return tx, err
}

// begin begins a write transaction. On SQLite, BEGIN IMMEDIATE takes the
// write lock, and another process that holds it past the busy timeout
// fails the begin with SQLITE_BUSY (SQLite's busy handler is not fair: a
// busy writer in another process can win every release). Nothing has run
// yet, so the begin is tried again until wait has passed.
func begin(ctx context.Context, db *sql.DB, wait time.Duration) (*sql.Tx, error) {
	deadline := time.Now().Add(wait)
	for {
		tx, err := db.BeginTx(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return tx, err
		}
		if !ctxwait.Sleep(ctx, 10*time.Millisecond) {
			return nil, err
		}
	}
}
