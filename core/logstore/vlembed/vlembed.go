// Package vlembed is the default log store backend: VictoriaLogs' storage
// engine (lib/logstorage) embedded in the unyo process, one directory on disk.
//
// Layout: one log stream per (host, app); every entry carries the fields
// level, trace_id, cluster and _msg, and each Entry.Fields key k is stored as
// field "f.k", so user fields can never collide with ours or with VictoriaLogs'
// own underscore fields. Queries are LogsQL built from logstore.Query with
// every user value quoted by strconv.Quote, which is exactly what the LogsQL
// lexer unquotes.
//
// Retention: the storage drops whole days older than Options.Retention by
// itself (checked about hourly), and DropBefore drops days on demand by
// detaching and deleting their per-day partitions.
package vlembed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaLogs/lib/logstorage"

	"github.com/unyo-ops/unyo/core/internal/vmflags"
	"github.com/unyo-ops/unyo/core/logstore"
)

// fieldPrefix marks user fields (Entry.Fields) among the stored fields.
const fieldPrefix = "f."

// markerField marks the lines RevealStreams writes; every query excludes
// them. It has no fieldPrefix, so no user field can be named so.
const markerField = "unyo.marker"

// partitionsDir is the directory lib/logstorage keeps its per-day partitions
// in (YYYYMMDD subdirectories); it is not exported by the library.
const partitionsDir = "partitions"

// Options configure an embedded store.
type Options struct {
	// Path is the data directory; it is created if missing. Only one process
	// may open it at a time.
	Path string
	// Retention is how long entries are kept; 0 means logstore.DefaultRetention.
	Retention time.Duration
}

// Store is the embedded backend. It is safe for concurrent use.
type Store struct {
	path      string
	retention time.Duration
	s         *logstorage.Storage
	tenant    []logstorage.TenantID

	// dropMu keeps writes out while DropBefore detaches partitions: a write to
	// a detached-but-not-yet-deleted day would otherwise be dropped silently.
	dropMu sync.RWMutex

	// Rows become searchable once the storage flushes its buffers (about every
	// second). To give read-your-writes without flushing on every write, a
	// write marks the store dirty and the next read flushes once.
	flushMu sync.Mutex
	dirty   atomic.Bool

	closeOnce sync.Once
	closed    atomic.Bool
	now       func() time.Time
}

var (
	_ logstore.Store          = (*Store)(nil)
	_ logstore.StreamRevealer = (*Store)(nil)
)

// Open opens or creates the store at opts.Path.
func Open(opts Options) (st *Store, err error) {
	if opts.Path == "" {
		return nil, errors.New("embedded log store: no data directory configured")
	}
	if opts.Retention <= 0 {
		opts.Retention = logstore.DefaultRetention
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(opts.Path)), 0o755); err != nil {
		return nil, fmt.Errorf("embedded log store: creating the parent of %s: %w", opts.Path, err)
	}
	// VictoriaLogs sizes its caches with lib/memory, which panics later
	// (in the first query) unless the process's flags were parsed.
	if err := vmflags.Prepare(); err != nil {
		return nil, fmt.Errorf("embedded log store: %w", err)
	}
	// lib/logstorage reports failures to open (for example the directory being
	// locked by another unyo process) by panicking; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("embedded log store: cannot open %s (is another unyo process using it?): %v", opts.Path, r)
		}
	}()
	s := logstorage.MustOpenStorage(opts.Path, &logstorage.StorageConfig{
		// An hour of slack over our own retention check so an entry Prepare
		// accepted at the boundary is not dropped by the storage a moment later.
		Retention:       opts.Retention + time.Hour,
		FutureRetention: logstore.MaxFuture,
		FlushInterval:   time.Second,
	})
	return &Store{
		path:      opts.Path,
		retention: opts.Retention,
		s:         s,
		tenant:    []logstorage.TenantID{{}},
		now:       time.Now,
	}, nil
}

func (st *Store) checkOpen() error {
	if st.closed.Load() {
		return errors.New("embedded log store is closed")
	}
	return nil
}

// Write stores entries; see logstore.Prepare for the normalization.
func (st *Store) Write(ctx context.Context, entries []logstore.Entry) error {
	return st.write(ctx, entries, func(k string) string { return fieldPrefix + k })
}

// write stores entries with their fields named by column.
func (st *Store) write(ctx context.Context, entries []logstore.Entry, column func(field string) string) error {
	if err := st.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("embedded log store: write: %w", err)
	}
	prepared, rejected := logstore.Prepare(entries, st.now(), st.retention)
	if len(prepared) > 0 {
		st.dropMu.RLock()
		defer st.dropMu.RUnlock()
		if err := st.checkOpen(); err != nil {
			return err
		}
		lr := logstorage.GetLogRows([]string{"host", "app"}, nil, nil, nil, "")
		fields := make([]logstorage.Field, 0, 16)
		for i := range prepared {
			e := &prepared[i]
			fields = append(fields[:0],
				logstorage.Field{Name: "host", Value: e.Host},
				logstorage.Field{Name: "app", Value: e.App},
				logstorage.Field{Name: "level", Value: e.Level},
				logstorage.Field{Name: "trace_id", Value: e.TraceID},
				logstorage.Field{Name: "cluster", Value: e.Cluster},
				logstorage.Field{Name: "_msg", Value: e.Message},
			)
			for k, v := range e.Fields {
				fields = append(fields, logstorage.Field{Name: column(k), Value: v})
			}
			lr.MustAdd(st.tenant[0], e.Time.UnixNano(), fields, -1)
			if lr.NeedFlush() {
				st.s.MustAddRows(lr)
				lr.ResetKeepSettings()
			}
		}
		st.s.MustAddRows(lr)
		logstorage.PutLogRows(lr)
		st.dirty.Store(true)
	}
	return logstore.RejectedError(rejected, st.retention)
}

// RevealStreams writes one marker line, which no query returns, to each
// stream: after an unclean shutdown, lines whose stream registration had
// not reached the disk while the lines had stay hidden until the stream is
// written to again, and writing re-registers it.
func (st *Store) RevealStreams(ctx context.Context, streams []logstore.Stream) error {
	if len(streams) == 0 {
		return nil
	}
	entries := make([]logstore.Entry, 0, len(streams))
	for _, s := range streams {
		entries = append(entries, logstore.Entry{Time: s.Time, Host: s.Host, App: s.App, Message: "stream revealed",
			Fields: map[string]string{markerField: "reveal"}})
	}
	return st.write(ctx, entries, func(k string) string {
		if k == markerField {
			return k
		}
		return fieldPrefix + k
	})
}

// flushIfDirty makes earlier writes searchable.
func (st *Store) flushIfDirty() {
	st.flushMu.Lock()
	defer st.flushMu.Unlock()
	if st.dirty.Swap(false) {
		st.s.DebugFlush()
	}
}

// filterExpr builds the LogsQL filter for q (without the time range, which
// is added to the parsed query as numbers).
func filterExpr(q logstore.Query) string {
	var parts []string
	if q.Host != "" {
		parts = append(parts, "host:="+strconv.Quote(q.Host))
	}
	if q.App != "" {
		parts = append(parts, "app:="+strconv.Quote(q.App))
	}
	if q.ExceptApp != "" {
		parts = append(parts, "-app:="+strconv.Quote(q.ExceptApp))
	}
	if q.TraceID != "" {
		parts = append(parts, "trace_id:="+strconv.Quote(q.TraceID))
	}
	if len(q.Levels) > 0 {
		parts = append(parts, "level:"+inList(q.Levels))
	}
	if q.Grep != "" {
		// A regexp of the quoted literal: a case-sensitive substring match.
		parts = append(parts, "_msg:~"+strconv.Quote(regexp.QuoteMeta(q.Grep)))
	}
	// Sorted, so that one query always reads the same.
	for _, k := range slices.Sorted(maps.Keys(q.Fields)) {
		// An exact match; :="" matches entries without the field, as the
		// contract says.
		parts = append(parts, strconv.Quote(fieldPrefix+k)+":="+strconv.Quote(q.Fields[k]))
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, " AND ")
}

func inList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return "in(" + strings.Join(quoted, ",") + ")"
}

// parse parses a LogsQL query and applies the [since, until) range.
func parse(qs string, since, until time.Time) (*logstorage.Query, error) {
	q, err := logstorage.ParseQuery(qs)
	if err != nil {
		// Every user value is quoted, so this is a bug in the query builder.
		return nil, fmt.Errorf("embedded log store: internal error building LogsQL %q: %w", qs, err)
	}
	if !since.IsZero() || !until.IsZero() {
		start, end := int64(math.MinInt64), int64(math.MaxInt64)
		if !since.IsZero() {
			start = since.UnixNano()
		}
		if !until.IsZero() {
			end = until.UnixNano() - 1 // AddTimeFilter is inclusive; Until is exclusive
		}
		q.AddTimeFilter(start, end)
	}
	return q, nil
}

func (st *Store) run(ctx context.Context, q *logstorage.Query, fn func(db *logstorage.DataBlock)) error {
	// The read lock also keeps Close from closing the storage under a query.
	st.dropMu.RLock()
	defer st.dropMu.RUnlock()
	if err := st.checkOpen(); err != nil {
		return err
	}
	st.flushIfDirty()
	var mu sync.Mutex
	qctx := logstorage.NewQueryContext(ctx, &logstorage.QueryStats{}, st.tenant, q, false, nil)
	err := st.s.RunQuery(qctx, func(_ uint, db *logstorage.DataBlock) {
		// RunQuery calls this from several workers at once.
		mu.Lock()
		defer mu.Unlock()
		fn(db)
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("embedded log store: query cancelled: %w", ctxErr)
		}
		return fmt.Errorf("embedded log store: query failed: %w", err)
	}
	return ctx.Err()
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
	// RevealStreams' markers are dropped from the answer (a filter on them
	// in the query would stop a stream field alone from being looked up in
	// the stream index); while they took places within the limit, ask for
	// that many more.
	var out []logstore.Entry
	for limit := q.Limit; ; {
		lq, err := parse(fmt.Sprintf("%s | sort by (_time desc) limit %d", filterExpr(q), limit), q.Since, q.Until)
		if err != nil {
			return nil, err
		}
		var markers int
		out, markers, err = st.collect(ctx, lq)
		if err != nil {
			return nil, err
		}
		if markers == 0 || len(out)+markers < limit {
			break
		}
		limit += markers
	}
	// The sort pipe already orders; sorting again costs little and does not
	// depend on how the library hands blocks to the callback.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
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
	lq, err := parse(fmt.Sprintf("%s | sort by (_time) limit %d", filterExpr(q), logstore.MaxLimit+1), q.Since, q.Until)
	if err != nil {
		return nil, err
	}
	// Markers hold no trace ID: none is among the lines.
	out, _, err := st.collect(ctx, lq)
	if err != nil {
		return nil, err
	}
	if len(out) > logstore.MaxLimit {
		return nil, fmt.Errorf("embedded log store: trace %q: %w: more than %d lines; narrow the time range", traceID, logstore.ErrTooLarge, logstore.MaxLimit)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// collect returns the lines lq selects, without RevealStreams' markers,
// and how many markers it dropped.
func (st *Store) collect(ctx context.Context, lq *logstorage.Query) ([]logstore.Entry, int, error) {
	var out []logstore.Entry
	markers := 0
	var marked []bool
	var ts []int64
	err := st.run(ctx, lq, func(db *logstorage.DataBlock) {
		var ok bool
		ts, ok = db.GetTimestamps(ts[:0])
		if !ok {
			return
		}
		base := len(out)
		for i := range ts {
			out = append(out, logstore.Entry{Time: time.Unix(0, ts[i]).UTC()})
		}
		marked = marked[:0]
		for _, c := range db.GetColumns(false) {
			if c.Name == markerField {
				marked = make([]bool, len(ts))
				for i, v := range c.Values {
					marked[i] = v != ""
				}
				continue
			}
			for i, v := range c.Values {
				if v == "" {
					continue
				}
				e := &out[base+i]
				// Values point into the library's buffers: copy what we keep.
				switch c.Name {
				case "host":
					e.Host = strings.Clone(v)
				case "app":
					e.App = strings.Clone(v)
				case "level":
					e.Level = strings.Clone(v)
				case "trace_id":
					e.TraceID = strings.Clone(v)
				case "cluster":
					e.Cluster = strings.Clone(v)
				case "_msg":
					e.Message = strings.Clone(v)
				default:
					if k, ok := strings.CutPrefix(c.Name, fieldPrefix); ok {
						if e.Fields == nil {
							e.Fields = map[string]string{}
						}
						e.Fields[strings.Clone(k)] = strings.Clone(v)
					}
				}
			}
		}
		if len(marked) > 0 {
			kept := out[:base]
			for i, m := range marked {
				if m {
					markers++
				} else {
					kept = append(kept, out[base+i])
				}
			}
			out = kept
		}
	})
	return out, markers, err
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
	// The grouping column: a stored field name, quoted for LogsQL.
	col := by
	if name, ok := logstore.GroupField(by); ok {
		col = fieldPrefix + name
	}
	// Markers (RevealStreams) have no level, so only hits must skip them.
	qs := fmt.Sprintf("%s | stats by (_time:%ds, %s) count() if (%s:=\"\") hits, count() if (level:%s) errs, count() if (level:%s) warns | limit %d",
		filterExpr(q), int64(interval/time.Second), strconv.Quote(col), strconv.Quote(markerField),
		inList(logstore.ErrorLevels()), inList(logstore.WarningLevels()), logstore.MaxLimit+1)
	lq, err := parse(qs, q.Since, q.Until)
	if err != nil {
		return nil, err
	}
	var out []logstore.Bucket
	var parseErr error
	err = st.run(ctx, lq, func(db *logstorage.DataBlock) {
		tc, kc := db.GetColumnByName("_time"), db.GetColumnByName(col)
		hc, ec, wc := db.GetColumnByName("hits"), db.GetColumnByName("errs"), db.GetColumnByName("warns")
		if tc == nil || hc == nil || ec == nil || wc == nil {
			parseErr = errors.New("stats result lacks expected columns")
			return
		}
		for i := range tc.Values {
			start, err := time.Parse(time.RFC3339Nano, tc.Values[i])
			if err != nil {
				parseErr = fmt.Errorf("bucket time %q: %w", tc.Values[i], err)
				return
			}
			b := logstore.Bucket{Start: start.UTC()}
			if kc != nil {
				b.Key = strings.Clone(kc.Values[i])
			}
			b.Count, _ = strconv.ParseInt(hc.Values[i], 10, 64)
			b.Errors, _ = strconv.ParseInt(ec.Values[i], 10, 64)
			b.Warnings, _ = strconv.ParseInt(wc.Values[i], 10, 64)
			if b.Count > 0 { // a bucket of markers only
				out = append(out, b)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if parseErr != nil {
		return nil, fmt.Errorf("embedded log store: reading stats: %w", parseErr)
	}
	if len(out) > logstore.MaxLimit {
		return nil, fmt.Errorf("embedded log store: stats: %w: more than %d buckets; use a longer interval or a shorter range", logstore.ErrTooLarge, logstore.MaxLimit)
	}
	logstore.SortBuckets(out)
	return out, nil
}

// DropBefore removes the whole UTC days ending at or before t by detaching
// their partitions and deleting the directories. Later writes for such a day
// (within the retention) start a fresh partition.
func (st *Store) DropBefore(ctx context.Context, t time.Time) error {
	if err := st.checkOpen(); err != nil {
		return err
	}
	st.dropMu.Lock()
	defer st.dropMu.Unlock()
	if err := st.checkOpen(); err != nil {
		return err
	}
	// Rows still buffered for an old day must reach their partition before it
	// is detached, or they would be written after the deletion.
	st.flushIfDirty()
	var errs []error
	for _, name := range st.s.PartitionList() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("embedded log store: dropping old days: %w", err)
		}
		day, err := time.Parse("20060102", name)
		if err != nil || !logstore.DropDay(day, t) {
			continue
		}
		// Detach waits for running queries on the partition to finish.
		if err := st.s.PartitionDetach(name); err != nil {
			errs = append(errs, fmt.Errorf("detaching day %s: %w", name, err))
			continue
		}
		if err := os.RemoveAll(filepath.Join(st.path, partitionsDir, name)); err != nil {
			errs = append(errs, fmt.Errorf("deleting day %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("embedded log store: dropping days before %s: %w", t.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// Close flushes and closes the storage. Calls after the first are no-ops.
func (st *Store) Close() error {
	st.closeOnce.Do(func() {
		st.closed.Store(true)
		st.dropMu.Lock()
		defer st.dropMu.Unlock()
		st.s.MustClose()
	})
	return nil
}
