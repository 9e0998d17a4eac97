// Package sqlstore implements store.Store over database/sql, for SQLite
// (modernc.org/sqlite, the embedded default) and PostgreSQL (pgx). Both share
// one implementation; a small dialect struct holds what differs.
//
// Every protobuf message is stored whole (body) next to copies of the fields
// used for filtering and ordering. Timestamps are int64 unix nanoseconds, 0
// meaning unset. The schema is migrated when a store opens (migrations/).
//
// AppendEvents is the hot path. Concurrent calls are merged into one
// transaction (groupCommit): on SQLite, which has one writer, and on
// PostgreSQL too, where every call's transaction takes the next numbers
// from the one event_seq counter row and so waits for the previous one to
// commit anyway; merged, they share a commit and its statements (about 12%
// less CPU per event for client and server together, BenchmarkAppendEvents).
// On PostgreSQL a transaction's events are one statement over arrays.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"google.golang.org/protobuf/types/known/timestamppb"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/unyo-ops/unyo/core/store"
)

var _ store.Store = (*Store)(nil)

// dialect is what differs between the backends. SQL texts use $N
// placeholders, which both understand.
type dialect struct {
	name string
	// forUpdate locks the rows a SELECT reads until the transaction ends; on
	// SQLite the single writer connection already serializes writers.
	forUpdate string
	// nowNanos is SQL for the database's clock in unix nanoseconds, or "" to
	// pass the process's clock as a parameter.
	nowNanos string
	// migrationLock is run first in the migration transaction, so that
	// replicas starting together migrate one after the other.
	migrationLock string
	// appendEvents stores a validated batch of distinct ids, sorted by id,
	// in st's transaction, and reports which rows were new.
	appendEvents func(ctx context.Context, st *stmtCache, rows []eventRow) (inserted []bool, err error)
	// retryable reports errors after which the whole transaction may simply
	// be run again (deadlocks between concurrent writers).
	retryable func(error) bool
}

func sqliteDialect() *dialect {
	return &dialect{
		name:         "sqlite",
		appendEvents: appendEventsPrepared,
		retryable:    func(error) bool { return false },
	}
}

func postgresDialect() *dialect {
	return &dialect{
		name:      "postgres",
		forUpdate: " FOR UPDATE",
		nowNanos:  "CAST(EXTRACT(EPOCH FROM now()) * 1000000000 AS BIGINT)",
		// Transaction-scoped: released by the commit or rollback, even if
		// the process dies mid-migration (the connection closes).
		migrationLock: "SELECT pg_advisory_xact_lock(7235553718640181801)",
		appendEvents:  appendEventsUnnest,
		retryable: func(err error) bool {
			var pgErr *pgconn.PgError
			// deadlock_detected, serialization_failure
			return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
		},
	}
}

// rowContext is the context for the statements of a row-at-a-time loop
// on SQLite: without ctx's cancellation, because modernc.org/sqlite starts
// a goroutine per statement to watch a cancellable context, which cost
// more than the microseconds an in-process row takes. The transaction is
// still bound to ctx: database/sql rolls it back when ctx ends.
func rowContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// Store is a store.Store on a SQL database. It is safe for concurrent use.
type Store struct {
	d *dialect
	// w runs every write. On SQLite it has a single connection, so writers
	// queue in Go instead of failing with SQLITE_BUSY; on PostgreSQL w and r
	// are the same pool.
	w *sql.DB
	// r runs reads that need no transaction; on SQLite a pool of read-only
	// connections that WAL lets run beside the writer.
	r *sql.DB

	// group merges concurrent AppendEvents calls into one transaction; nil
	// runs each call in its own.
	group *groupCommit[[]eventRow, int]
	// allocs merges concurrent address allocations into one transaction.
	allocs *groupCommit[allocCall, allocResult]
	// prepared are statements the hot transactions run (stmtCache),
	// read-only once the store is open.
	prepared map[string]*sql.Stmt
	// mark records acknowledged events outside the database (TrackAcked).
	mark atomic.Pointer[ackMark]
	// recent holds the events committed last for NextEvents.
	recent recentEvents

	// clock stamps the times the store itself decides (a reservation's
	// start when the caller gave none, the end of a released one's ledger
	// row); time.Now unless SetClock set the server's.
	clock func() time.Time

	closeOnce sync.Once
	closeErr  error
}

// SetClock makes the store stamp the times it decides itself with now (the
// cluster's clock, a test's fake one), so that a reservation's billing
// starts and ends on one clock. Call it before the store is used.
func (s *Store) SetClock(now func() time.Time) { s.clock = now }

// clockNow is the store's clock.
func (s *Store) clockNow() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock()
}

// groupMaxRows bounds how many other callers' events a group commit adds to
// the leader's: enough to merge the usual handful of concurrent batches.
const groupMaxRows = 5000

// newEventGroup merges concurrent AppendEvents calls.
func (s *Store) newEventGroup() *groupCommit[[]eventRow, int] {
	return newGroupCommit(groupMaxRows, func(rows []eventRow) int { return len(rows) }, s.appendTx)
}

// sqliteReaders is the size of SQLite's read pool: enough for a few API
// requests at a time, each a short query.
const sqliteReaders = 4

// OpenSQLite opens (creating if needed) the SQLite database at path and
// brings its schema up to date.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open SQLite store: no database path")
	}
	// SQLite would create the file 0644 (less the umask), and its -wal and
	// -shm files take the database's mode: create it 0600 so that all of
	// them are private. An empty file is an empty database.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create SQLite database %s: %w", path, err)
	}
	// WAL lets readers run beside the writer; synchronous=NORMAL is durable
	// against process crashes and, in WAL mode, keeps the database
	// consistent after a power loss (only the last commits may be lost).
	base := "file:" + escapeURIPath(path) +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	w, err := sql.Open("sqlite", base+
		// IMMEDIATE: a writer takes the write lock at BEGIN, so the busy
		// timeout covers it if another process holds the database.
		"&_txlock=immediate"+
		// 64 MiB of page cache keeps the event indexes, which every insert
		// touches at random places, in memory.
		"&_pragma=cache_size(-65536)"+
		// Checkpoint every ~40 MiB of WAL instead of 4: pages written again
		// and again (indexes, latest state) are copied back once, and the
		// checkpoint's fsyncs are paid ten times less often.
		"&_pragma=wal_autocheckpoint(10000)")
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)&_pragma=cache_size(-16384)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	r.SetMaxOpenConns(sqliteReaders)
	r.SetMaxIdleConns(sqliteReaders)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	s := &Store{d: sqliteDialect(), w: w, r: r}
	s.group = s.newEventGroup()
	s.allocs = s.newAllocGroup()
	// Check the file before migrations write to it: a damaged store must
	// not serve (reads fail while /healthz and writes look fine).
	err = s.w.PingContext(ctx)
	if err == nil {
		err = s.quickCheck(ctx)
	}
	if err == nil {
		err = s.init(ctx)
	}
	if err != nil {
		s.Close()
		if errors.Is(err, ErrCorrupt) || isCorrupt(err) {
			return nil, fmt.Errorf("open SQLite database %s: %w (%w); %s", path, ErrCorrupt, err, corruptHelp(path))
		}
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	return s, nil
}

// postgresConns bounds the connections one store opens to PostgreSQL. Writes
// are short transactions, so a few connections carry many callers; more
// mostly add lock contention and server memory.
const postgresConns = 16

// OpenPostgres connects to the PostgreSQL database at dsn (a URL or
// key=value string, as libpq takes) and brings its schema up to date.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		// The DSN may carry a password: don't repeat it.
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	db.SetMaxOpenConns(postgresConns)
	db.SetMaxIdleConns(postgresConns)
	// Recycle connections now and then so a failover or a DNS change is
	// picked up and server-side memory does not grow forever.
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{d: postgresDialect(), w: db, r: db}
	s.group = s.newEventGroup()
	s.allocs = s.newAllocGroup()
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := migrate(ctx, s.w, s.d); err != nil {
		return err
	}
	return s.prepareHot(ctx)
}

// Close closes the database connections. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		err := s.w.Close()
		if m := s.mark.Load(); m != nil {
			err = errors.Join(err, m.close())
		}
		if s.r != s.w {
			err = errors.Join(err, s.r.Close())
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close %s store: %w", s.d.name, err)
		}
	})
	return s.closeErr
}

// Dialect names the backend: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// inTx runs fn in a write transaction, committing if it returns nil. On
// PostgreSQL a deadlock with another writer rolls the transaction back; fn is
// then run again, a few times, since it must start from scratch anyway.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	const attempts = 3
	var err error
	for i := range attempts {
		err = s.tryTx(ctx, fn)
		if err == nil || !s.d.retryable(err) || ctx.Err() != nil {
			return err
		}
		// Back off a little so the other side can finish.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 5 * time.Millisecond):
		}
	}
	return err
}

// writeWait bounds how long a write waits for the write lock that
// another process holds on the same SQLite file.
const writeWait = 30 * time.Second

func (s *Store) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := begin(ctx, s.w, writeWait)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// now returns the current time in unix nanoseconds, for timestamps the store
// fills in itself.
func now() int64 { return time.Now().UnixNano() }

func toNanos(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

func fromNanos(n int64) *timestamppb.Timestamp {
	if n == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, n))
}

// escapeURIPath makes a file path safe inside a SQLite "file:" URI, where
// '?' starts the query and '#' a fragment.
func escapeURIPath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// placeholders returns "$from, $from+1, ..." for n parameters.
func placeholders(b *strings.Builder, from, n int) {
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "$%d", from+i)
	}
}

func notFound(kind, name string) error {
	return fmt.Errorf("%s %q: %w", kind, name, store.ErrNotFound)
}
