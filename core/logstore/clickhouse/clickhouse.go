// Package clickhouse is the ClickHouse log store backend, written for the
// oldest server we must support, Debian's ClickHouse 18.16:
//
//   - clickhouse-go/v2 over the native protocol only (its HTTP transport does
//     not work against 18.16);
//   - no DateTime64, so time is ts DateTime plus ns UInt32 for the sub-second part;
//   - no TTL, so retention is ALTER TABLE ... DROP PARTITION on day partitions;
//   - no Map, so Entry.Fields are two parallel arrays;
//   - no toStartOfInterval, so buckets are intDiv(toUInt32(ts), N) * N;
//   - no skipping indexes, so Trace scans the partitions in its time range:
//     pass since/until when known.
//
// User input is bound as '?' parameters; clickhouse-go substitutes them on
// the client side as quoted literals, escaping \, ' and NUL.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/unyo-ops/unyo/core/logstore"
)

// Options configure the ClickHouse backend.
type Options struct {
	// Addr is the native-protocol address, host:port (usually port 9000).
	Addr     string
	Database string // default "default"
	Username string // default "default"
	Password string
	// Table is the log table, created at Open if missing; default "logs".
	Table string
	// Retention is the age beyond which Write rejects entries; 0 means
	// logstore.DefaultRetention. ClickHouse 18.16 cannot expire data by
	// itself: call DropBefore periodically.
	Retention time.Duration
	// DialTimeout bounds connecting; default 5s.
	DialTimeout time.Duration
}

// Store is the ClickHouse backend. It is safe for concurrent use.
type Store struct {
	conn      driver.Conn
	table     string
	retention time.Duration
	closed    atomic.Bool
	now       func() time.Time
}

var _ logstore.Store = (*Store)(nil)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const columns = "ts, ns, host, app, level, trace_id, message, cluster, field_keys, field_values"

// Open connects, checks the server answers and creates the table if missing.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Addr == "" {
		return nil, errors.New("clickhouse log store: no address configured")
	}
	if opts.Table == "" {
		opts.Table = "logs"
	}
	if opts.Database == "" {
		opts.Database = "default"
	}
	if opts.Username == "" {
		opts.Username = "default"
	}
	// Identifiers cannot be bound as parameters, so they must be plain names.
	if !identRE.MatchString(opts.Table) || !identRE.MatchString(opts.Database) {
		return nil, fmt.Errorf("clickhouse log store: database %q and table %q must be plain identifiers ([A-Za-z_][A-Za-z0-9_]*)", opts.Database, opts.Table)
	}
	if opts.Retention <= 0 {
		opts.Retention = logstore.DefaultRetention
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	conn, err := connect(ctx, opts, opts.Database)
	var exc *ch.Exception
	if errors.As(err, &exc) && exc.Code == codeUnknownDatabase {
		// A new installation: create the database like the table below, so
		// that the first start needs no manual DDL.
		err = createDatabase(ctx, opts)
		if err == nil {
			conn, err = connect(ctx, opts, opts.Database)
		}
	}
	if err != nil {
		return nil, err
	}
	st := &Store{conn: conn, table: opts.Table, retention: opts.Retention, now: time.Now}
	// Level is a plain String: LowCardinality needs an experimental setting on
	// 18.16, and a short string compresses well anyway.
	ddl := `CREATE TABLE IF NOT EXISTS ` + st.table + ` (
		ts DateTime,
		ns UInt32,
		host String,
		app String,
		level String,
		trace_id String,
		message String,
		cluster String,
		field_keys Array(String),
		field_values Array(String)
	) ENGINE = MergeTree PARTITION BY toYYYYMMDD(ts) ORDER BY (host, app, ts)`
	if err := conn.Exec(ctx, ddl); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse log store: creating table %s.%s: %w", opts.Database, opts.Table, err)
	}
	return st, nil
}

// codeUnknownDatabase is ClickHouse's UNKNOWN_DATABASE error code.
const codeUnknownDatabase = 81

// connect opens and pings a connection using database db.
func connect(ctx context.Context, opts Options, db string) (driver.Conn, error) {
	conn, err := ch.Open(&ch.Options{
		Protocol:    ch.Native,
		Addr:        []string{opts.Addr},
		Auth:        ch.Auth{Database: db, Username: opts.Username, Password: opts.Password},
		DialTimeout: opts.DialTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse log store: configuring connection to %s: %w", opts.Addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse log store: cannot reach %s (native protocol): %w", opts.Addr, err)
	}
	return conn, nil
}

// createDatabase creates opts.Database through a connection to the user's
// default database.
func createDatabase(ctx context.Context, opts Options) error {
	conn, err := connect(ctx, opts, "")
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+opts.Database); err != nil {
		return fmt.Errorf("clickhouse log store: creating database %s on %s: %w", opts.Database, opts.Addr, err)
	}
	return nil
}

func (st *Store) checkOpen() error {
	if st.closed.Load() {
		return errors.New("clickhouse log store is closed")
	}
	return nil
}

// Write inserts entries in one batch; see logstore.Prepare for normalization.
// The server applies a batch as a whole, but an error after sending (such as
// a dropped connection) leaves it unknown whether it was stored, so a caller
// that retries may store a batch twice.
func (st *Store) Write(ctx context.Context, entries []logstore.Entry) error {
	if err := st.checkOpen(); err != nil {
		return err
	}
	prepared, rejected := logstore.Prepare(entries, st.now(), st.retention)
	if len(prepared) > 0 {
		if err := st.insert(ctx, prepared); err != nil {
			return fmt.Errorf("clickhouse log store: writing %d entries: %w", len(prepared), err)
		}
	}
	return logstore.RejectedError(rejected, st.retention)
}

func (st *Store) insert(ctx context.Context, entries []logstore.Entry) error {
	batch, err := st.conn.PrepareBatch(ctx, "INSERT INTO "+st.table+" ("+columns+")")
	if err != nil {
		return err
	}
	// Columnar appends: one Append per column instead of per row is
	// several times cheaper in the driver.
	n := len(entries)
	var (
		ts                                    = make([]time.Time, n)
		ns                                    = make([]uint32, n)
		host, app, level, trace, msg, cluster = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		keys, vals                            = make([][]string, n), make([][]string, n)
	)
	for i := range entries {
		e := &entries[i]
		ts[i] = e.Time.Truncate(time.Second)
		ns[i] = uint32(e.Time.Nanosecond())
		host[i], app[i], level[i], trace[i], msg[i], cluster[i] = e.Host, e.App, e.Level, e.TraceID, e.Message, e.Cluster
		k, v := make([]string, 0, len(e.Fields)), make([]string, 0, len(e.Fields))
		for fk, fv := range e.Fields {
			k, v = append(k, fk), append(v, fv)
		}
		keys[i], vals[i] = k, v
	}
	for i, col := range []any{ts, ns, host, app, level, trace, msg, cluster, keys, vals} {
		if err := batch.Column(i).Append(col); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return batch.Send()
}

// where builds the WHERE clause and its arguments for q.
func where(q logstore.Query) (string, []any) {
	conds := []string{"1 = 1"}
	var args []any
	// DateTime holds seconds 0..2^32-1: bounds outside that range either
	// match everything or nothing, and must not wrap around.
	const maxDateTime = 1<<32 - 1
	if s := q.Since; !s.IsZero() && s.Unix() >= 0 {
		if s.Unix() > maxDateTime {
			conds = append(conds, "0 = 1")
		} else {
			// (ts, ns) >= since, spelled out: no tuple comparison in 18.16.
			conds = append(conds, "(ts > toDateTime(?) OR (ts = toDateTime(?) AND ns >= ?))")
			args = append(args, s.Unix(), s.Unix(), uint32(s.Nanosecond()))
		}
	}
	if u := q.Until; !u.IsZero() && u.Unix() <= maxDateTime {
		if u.Unix() < 0 {
			conds = append(conds, "0 = 1")
		} else {
			conds = append(conds, "(ts < toDateTime(?) OR (ts = toDateTime(?) AND ns < ?))")
			args = append(args, u.Unix(), u.Unix(), uint32(u.Nanosecond()))
		}
	}
	if q.Host != "" {
		conds = append(conds, "host = ?")
		args = append(args, q.Host)
	}
	if q.App != "" {
		conds = append(conds, "app = ?")
		args = append(args, q.App)
	}
	if q.ExceptApp != "" {
		conds = append(conds, "app != ?")
		args = append(args, q.ExceptApp)
	}
	if q.TraceID != "" {
		conds = append(conds, "trace_id = ?")
		args = append(args, q.TraceID)
	}
	if len(q.Levels) > 0 {
		c, a := inList("level", q.Levels)
		conds = append(conds, c)
		args = append(args, a...)
	}
	if q.Grep != "" {
		// position is a case-sensitive byte substring search.
		conds = append(conds, "position(message, ?) > 0")
		args = append(args, q.Grep)
	}
	for _, k := range slices.Sorted(maps.Keys(q.Fields)) {
		// Fields are two parallel arrays (no Map in 18.16); indexOf is 0 for a
		// missing key, and element 0 is '', so "" matches a missing field.
		conds = append(conds, "field_values[indexOf(field_keys, ?)] = ?")
		args = append(args, k, q.Fields[k])
	}
	return strings.Join(conds, " AND "), args
}

func inList(col string, values []string) (string, []any) {
	ph := strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", ")
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return col + " IN (" + ph + ")", args
}

// Query returns matching entries, newest first.
func (st *Store) Query(ctx context.Context, q logstore.Query) ([]logstore.Entry, error) {
	if err := st.checkOpen(); err != nil {
		return nil, err
	}
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	w, args := where(q)
	sql := "SELECT " + columns + " FROM " + st.table + " WHERE " + w + " ORDER BY ts DESC, ns DESC LIMIT ?"
	out, err := st.selectEntries(ctx, sql, append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse log store: query: %w", err)
	}
	return out, nil
}

// Trace returns every entry with the trace ID, oldest first.
func (st *Store) Trace(ctx context.Context, traceID string, since, until time.Time) ([]logstore.Entry, error) {
	if err := st.checkOpen(); err != nil {
		return nil, err
	}
	if err := logstore.CheckTraceID(traceID); err != nil {
		return nil, err
	}
	q, err := logstore.Query{TraceID: traceID, Since: since, Until: until}.Normalize()
	if err != nil {
		return nil, err
	}
	w, args := where(q)
	sql := "SELECT " + columns + " FROM " + st.table + " WHERE " + w + " ORDER BY ts, ns LIMIT ?"
	out, err := st.selectEntries(ctx, sql, append(args, logstore.MaxLimit+1)...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse log store: trace %q: %w", traceID, err)
	}
	if len(out) > logstore.MaxLimit {
		return nil, fmt.Errorf("clickhouse log store: trace %q: %w: more than %d lines; narrow the time range", traceID, logstore.ErrTooLarge, logstore.MaxLimit)
	}
	return out, nil
}

func (st *Store) selectEntries(ctx context.Context, sql string, args ...any) ([]logstore.Entry, error) {
	rows, err := st.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []logstore.Entry
	for rows.Next() {
		var (
			e          logstore.Entry
			ts         time.Time
			ns         uint32
			keys, vals []string
		)
		if err := rows.Scan(&ts, &ns, &e.Host, &e.App, &e.Level, &e.TraceID, &e.Message, &e.Cluster, &keys, &vals); err != nil {
			return nil, err
		}
		e.Time = time.Unix(ts.Unix(), int64(ns)).UTC()
		if len(keys) > 0 && len(keys) == len(vals) {
			e.Fields = make(map[string]string, len(keys))
			for i, k := range keys {
				e.Fields[k] = vals[i]
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Stats counts matching entries per interval and per level, app or host.
func (st *Store) Stats(ctx context.Context, q logstore.Query, by string, interval time.Duration) ([]logstore.Bucket, error) {
	if err := st.checkOpen(); err != nil {
		return nil, err
	}
	if err := logstore.CheckStats(by, interval); err != nil {
		return nil, err
	}
	q.Limit = 0
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	w, args := where(q)
	errIn, errArgs := inList("level", logstore.ErrorLevels())
	warnIn, warnArgs := inList("level", logstore.WarningLevels())
	secs := int64(interval / time.Second)
	// by is one of three fixed column names (checked above), never user
	// text; a field's name is bound. A missing field is index 0, which
	// ClickHouse answers with "".
	key, keyArgs := by, []any(nil)
	if name, ok := logstore.GroupField(by); ok {
		key, keyArgs = "field_values[indexOf(field_keys, ?)]", []any{name}
	}
	sql := "SELECT intDiv(toUInt32(ts), ?) * ? AS bucket, " + key + " AS key, count() AS n, " +
		"countIf(" + errIn + ") AS errs, countIf(" + warnIn + ") AS warns FROM " + st.table +
		" WHERE " + w + " GROUP BY bucket, key ORDER BY bucket, key LIMIT ?"
	all := []any{secs, secs}
	all = append(all, keyArgs...)
	all = append(all, errArgs...)
	all = append(all, warnArgs...)
	all = append(all, args...)
	all = append(all, logstore.MaxLimit+1)
	rows, err := st.conn.Query(ctx, sql, all...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse log store: stats: %w", err)
	}
	defer rows.Close()
	var out []logstore.Bucket
	for rows.Next() {
		var (
			bucket         uint64
			key            string
			n, errs, warns uint64
		)
		if err := rows.Scan(&bucket, &key, &n, &errs, &warns); err != nil {
			return nil, fmt.Errorf("clickhouse log store: reading stats: %w", err)
		}
		out = append(out, logstore.Bucket{
			Start: time.Unix(int64(bucket), 0).UTC(), Key: key,
			Count: int64(n), Errors: int64(errs), Warnings: int64(warns),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse log store: reading stats: %w", err)
	}
	if len(out) > logstore.MaxLimit {
		return nil, fmt.Errorf("clickhouse log store: stats: %w: more than %d buckets; use a longer interval or a shorter range", logstore.ErrTooLarge, logstore.MaxLimit)
	}
	logstore.SortBuckets(out)
	return out, nil
}

// DropBefore drops the day partitions that end at or before t.
func (st *Store) DropBefore(ctx context.Context, t time.Time) error {
	if err := st.checkOpen(); err != nil {
		return err
	}
	rows, err := st.conn.Query(ctx,
		"SELECT DISTINCT partition FROM system.parts WHERE database = currentDatabase() AND table = ? AND active", st.table)
	if err != nil {
		return fmt.Errorf("clickhouse log store: listing partitions of %s: %w", st.table, err)
	}
	var days []int
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return fmt.Errorf("clickhouse log store: listing partitions of %s: %w", st.table, err)
		}
		d, err := strconv.Atoi(p)
		if err != nil {
			continue // not one of our YYYYMMDD partitions
		}
		day, err := time.Parse("20060102", p)
		if err == nil && logstore.DropDay(day, t) {
			days = append(days, d)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse log store: listing partitions of %s: %w", st.table, err)
	}
	for _, d := range days {
		// d is an integer we parsed, so formatting it into the statement is safe.
		if err := st.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %d", st.table, d)); err != nil {
			return fmt.Errorf("clickhouse log store: dropping day %d of %s: %w", d, st.table, err)
		}
	}
	return nil
}

// Close closes the connection pool. Calls after the first are no-ops.
func (st *Store) Close() error {
	if st.closed.Swap(true) {
		return nil
	}
	if err := st.conn.Close(); err != nil {
		return fmt.Errorf("clickhouse log store: closing: %w", err)
	}
	return nil
}
