// Package vmembed is the default tsdb.Store: VictoriaMetrics v1.150.0 running
// in-process. Writes go straight into VictoriaMetrics' storage as raw metric
// rows and queries run through its MetricsQL engine, so nothing is formatted
// as text, sent over HTTP or parsed from JSON on the hot paths.
//
// VictoriaMetrics keeps its storage, caches and configuration in package-level
// state and reads its settings from the process-wide flag.CommandLine. This is
// therefore the only package in unyo that touches those flags, and at most one
// Store may be open per process at a time (Open returns ErrAlreadyOpen
// otherwise). A Store may be closed and another opened afterwards, also on the
// same directory.
package vmembed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/netstorage"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/promql"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/searchutil"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmstorage"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/fs"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"

	"github.com/unyo-ops/unyo/core/internal/vmflags"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/internal/vmerr"
)

// Options configures the embedded database.
type Options struct {
	// DataDir holds the data; it is created if missing. Required.
	DataDir string
	// Retention is how long samples are kept; at least 24h (a
	// VictoriaMetrics minimum). Default 30 days.
	Retention time.Duration
	// MaxSeries is the most series one query may select; larger queries
	// fail with tsdb.ErrTooLarge. Default 100,000.
	MaxSeries int
	// MaxPointsPerSeries is the most points a range query may return per
	// series. Default 30,000 (VictoriaMetrics' default).
	MaxPointsPerSeries int
	// QueryTimeout bounds queries whose context has no earlier deadline.
	// Default 30s.
	QueryTimeout time.Duration
	// MaxConcurrentQueries bounds concurrent searches. Default 2*GOMAXPROCS.
	MaxConcurrentQueries int
	// LogLevel is VictoriaMetrics' own log level (INFO, WARN, ERROR, FATAL,
	// PANIC); it logs to stderr. Default ERROR, since INFO logs every
	// open/close and merge.
	LogLevel string
}

func (o *Options) setDefaults() error {
	if o.DataDir == "" {
		return errors.New("vmembed: Options.DataDir is required")
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("vmembed: data directory %q: %w", o.DataDir, err)
	}
	o.DataDir = abs
	if o.Retention == 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.Retention < 24*time.Hour {
		// Checked here because VictoriaMetrics exits the process on it.
		return fmt.Errorf("vmembed: Retention %s is below VictoriaMetrics' minimum of 24h", o.Retention)
	}
	if o.MaxSeries <= 0 {
		o.MaxSeries = 100_000
	}
	if o.MaxPointsPerSeries <= 0 {
		o.MaxPointsPerSeries = 30_000
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 30 * time.Second
	}
	if o.MaxConcurrentQueries <= 0 {
		o.MaxConcurrentQueries = 2 * runtime.GOMAXPROCS(0)
	}
	switch o.LogLevel {
	case "":
		o.LogLevel = "ERROR"
	case "INFO", "WARN", "ERROR", "FATAL", "PANIC":
	default:
		return fmt.Errorf("vmembed: LogLevel %q: want INFO, WARN, ERROR, FATAL or PANIC", o.LogLevel)
	}
	return nil
}

// ErrAlreadyOpen is returned by Open while another Store is open in this
// process.
var ErrAlreadyOpen = errors.New("vmembed: an embedded VictoriaMetrics is already open in this process (only one is possible; close it first)")

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("vmembed: store is closed")

// instanceMu guards instance and rollupCacheReady. This is the one piece of
// package-level state in the TSDB code, and it exists because VictoriaMetrics'
// own state is global: a second Init would silently replace the first storage
// under its users.
var (
	instanceMu       sync.Mutex
	instance         *Store
	rollupCacheReady bool // VictoriaMetrics' query cache exists (see Open)
)

// Store is an embedded VictoriaMetrics. It implements tsdb.Store.
type Store struct {
	opts Options

	// mu is read-held by every operation and write-held by Close, so Close
	// waits for in-flight work and VictoriaMetrics is never used after Stop.
	mu     sync.RWMutex
	closed bool

	written, tooOld, future atomic.Uint64
}

var _ tsdb.Store = (*Store)(nil)
var _ tsdb.StatsReporter = (*Store)(nil)

// Open starts the embedded database on opts.DataDir.
func Open(opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	instanceMu.Lock()
	defer instanceMu.Unlock()
	if instance != nil {
		return nil, ErrAlreadyOpen
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("vmembed: create data directory: %w", err)
	}
	// VictoriaMetrics exits the process when the directory is locked by
	// another process; find out first and return an error instead.
	if err := checkNotLocked(opts.DataDir); err != nil {
		return nil, err
	}
	if err := setFlags(&opts); err != nil {
		return nil, err
	}
	vmstorage.Init(opts.MaxConcurrentQueries, 10*time.Second, promql.ResetRollupResultCacheIfNeeded)
	// The same steps as app/vmselect.Init, minus its HTTP-only parts.
	tmp := filepath.Join(opts.DataDir, "tmp")
	fs.MustRemoveDirContents(tmp)
	netstorage.InitTmpBlocksDir(tmp)
	// The rollup result cache is created once per process and only reset
	// on later Opens: re-creating it races with the cache-reset goroutine
	// VictoriaMetrics starts on first write (found with -race on reopen).
	// It is kept in memory only, so it never outlives the data it caches.
	if rollupCacheReady {
		promql.ResetRollupResultCache()
	} else {
		promql.InitRollupResultCache("")
		rollupCacheReady = true
	}

	s := &Store{opts: opts}
	instance = s
	return s, nil
}

// setFlags hands the options to VictoriaMetrics, which reads them from
// flag.CommandLine (through vmflags). Every flag is set (if it differs) on
// every Open so nothing leaks from a previous instance.
func setFlags(o *Options) error {
	hours := int64(math.Ceil(o.Retention.Hours()))
	vals := [][2]string{
		{"storageDataPath", o.DataDir},
		{"retentionPeriod", strconv.FormatInt(hours, 10) + "h"},
		// Keep one sample per series and millisecond: rewriting a batch
		// (agent retries) must not double values in *_over_time().
		{"dedup.minScrapeInterval", "1ms"},
		{"search.maxUniqueTimeseries", strconv.Itoa(o.MaxSeries)},
		{"loggerLevel", o.LogLevel},
	}
	if err := vmflags.Prepare(vals...); err != nil {
		return fmt.Errorf("vmembed: %w", err)
	}
	return nil
}

// Close flushes and stops the database. It waits for in-flight operations.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	vmstorage.Stop()
	instanceMu.Lock()
	instance = nil
	instanceMu.Unlock()
	return nil
}

// DataDir is the absolute data directory.
func (s *Store) DataDir() string { return s.opts.DataDir }

// WriteStats reports how many samples were written and dropped.
func (s *Store) WriteStats() tsdb.WriteStats {
	return tsdb.WriteStats{Written: s.written.Load(), DroppedTooOld: s.tooOld.Load(), DroppedFuture: s.future.Load()}
}

// acquire read-locks s for one operation.
func (s *Store) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// writeBuf is reused across writes: building rows is the hot path.
type writeBuf struct {
	rows   []storage.MetricRow
	names  []nameSpan // per row, where its series name lies in raw
	raw    []byte
	labels []prompb.Label

	tooOld, future uint64
}

// nameSpan locates a marshalled series name in writeBuf.raw; rows of one
// series share it.
type nameSpan struct{ start, end int }

var writeBufPool = sync.Pool{New: func() any { return new(writeBuf) }}

func (wb *writeBuf) reset() {
	wb.rows, wb.names, wb.raw = wb.rows[:0], wb.names[:0], wb.raw[:0]
	wb.tooOld, wb.future = 0, 0
}

// add appends the points of one series (labels: the name first, the rest
// sorted) that lie inside win, marshalling its name once. Sorted labels
// give one raw name per series, so VictoriaMetrics' series-ID cache hits
// instead of re-resolving the series.
func (wb *writeBuf) add(labels []prompb.Label, times []int64, values []float64, win tsdb.Window) {
	name := nameSpan{start: -1}
	for i, ts := range times {
		switch win.Classify(ts) {
		case -1:
			wb.tooOld++
			continue
		case 1:
			wb.future++
			continue
		}
		if name.start < 0 {
			name.start = len(wb.raw)
			wb.raw = storage.MarshalMetricNameRaw(wb.raw, labels)
			name.end = len(wb.raw)
		}
		wb.names = append(wb.names, name)
		wb.rows = append(wb.rows, storage.MetricRow{Timestamp: ts, Value: values[i]})
	}
}

// Write stores samples; see tsdb.Store.
func (s *Store) Write(ctx context.Context, samples []tsdb.Sample) error {
	for i := range samples {
		if err := tsdb.ValidateSample(i, &samples[i]); err != nil {
			return fmt.Errorf("vmembed: write rejected: %w", err)
		}
	}
	return s.write(ctx, func(wb *writeBuf, win tsdb.Window) {
		var ts [1]int64
		var v [1]float64
		for i := range samples {
			sm := &samples[i]
			lb := append(wb.labels[:0], prompb.Label{Name: "", Value: sm.Name})
			for k, v := range sm.Labels {
				lb = append(lb, prompb.Label{Name: k, Value: v})
			}
			sortLabels(lb[1:])
			wb.labels = lb
			ts[0], v[0] = sm.Timestamp.UnixMilli(), sm.Value
			wb.add(lb, ts[:], v[:], win)
		}
	})
}

// WriteSeries stores series with their points; see tsdb.Store.
func (s *Store) WriteSeries(ctx context.Context, series []tsdb.SeriesPoints) error {
	for i := range series {
		if err := tsdb.ValidateSeries(i, &series[i]); err != nil {
			return fmt.Errorf("vmembed: write rejected: %w", err)
		}
	}
	return s.write(ctx, func(wb *writeBuf, win tsdb.Window) {
		for i := range series {
			sr := &series[i]
			lb := append(wb.labels[:0], prompb.Label{Name: "", Value: sr.Name})
			for _, l := range sr.Labels {
				lb = append(lb, prompb.Label{Name: l.Name, Value: l.Value})
			}
			wb.labels = lb
			wb.add(lb, sr.TimesMs, sr.Values, win)
		}
	})
}

// write builds rows with fill in a pooled buffer and writes them.
func (s *Store) write(ctx context.Context, fill func(wb *writeBuf, win tsdb.Window)) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	wb := writeBufPool.Get().(*writeBuf)
	defer writeBufPool.Put(wb)
	wb.reset()
	fill(wb, tsdb.AcceptWindow(time.Now(), s.opts.Retention))
	return s.writeRows(wb)
}

// writeRows hands the rows of wb to VictoriaMetrics and counts them.
func (s *Store) writeRows(wb *writeBuf) error {
	s.tooOld.Add(wb.tooOld)
	s.future.Add(wb.future)
	if len(wb.rows) == 0 {
		return nil
	}
	// Slice names only now: raw may have moved while growing.
	for i := range wb.rows {
		wb.rows[i].MetricNameRaw = wb.raw[wb.names[i].start:wb.names[i].end]
	}
	if err := vmstorage.VMInsertAPI.WriteRows(wb.rows); err != nil {
		return fmt.Errorf("vmembed: write %d samples to %s: %w", len(wb.rows), s.opts.DataDir, err)
	}
	s.written.Add(uint64(len(wb.rows)))
	clear(wb.rows) // drop references into raw before pooling
	return nil
}

// sortLabels is an insertion sort: label sets are small and this avoids
// sort.Slice's allocation per sample.
func sortLabels(l []prompb.Label) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].Name < l[j-1].Name; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

// Flush makes all written samples searchable now.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	vmstorage.DebugFlush()
	return nil
}

// deadline converts ctx into VictoriaMetrics' deadline. VictoriaMetrics
// cannot be cancelled mid-query, only stopped at a deadline, so a cancelled
// context is checked before starting and its deadline is passed down.
func (s *Store) deadline(ctx context.Context) searchutil.Deadline {
	now := time.Now()
	timeout := s.opts.QueryTimeout
	hint := "vmembed Options.QueryTimeout"
	if d, ok := ctx.Deadline(); ok && d.Sub(now) < timeout {
		timeout = max(d.Sub(now), time.Millisecond)
		hint = "the caller's context deadline"
	}
	return searchutil.NewDeadline(now, timeout, hint)
}

func (s *Store) exec(ctx context.Context, expr string, start, end, step int64, instant bool) ([]tsdb.Series, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	ec := &promql.EvalConfig{
		Start:              start,
		End:                end,
		Step:               step,
		MaxSeries:          s.opts.MaxSeries,
		MaxPointsPerSeries: s.opts.MaxPointsPerSeries,
		Deadline:           s.deadline(ctx),
		MayCache:           true,
		RoundDigits:        100, // no rounding, as the HTTP API's default
	}
	res, err := promql.Exec(nil, ec, expr, instant)
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmembed: query %q: %w", expr, err))
	}
	if len(res) > s.opts.MaxSeries {
		return nil, tsdb.TooLarge("metrics.max_series",
			fmt.Errorf("query %q returned %d series, more than %d", expr, len(res), s.opts.MaxSeries))
	}
	return convert(res), nil
}

// QueryRange evaluates q.Expr at each step; see tsdb.Store.
func (s *Store) QueryRange(ctx context.Context, q tsdb.QueryRange) ([]tsdb.Series, error) {
	if q.Step <= 0 {
		return nil, fmt.Errorf("vmembed: query %q: step must be positive, got %s", q.Expr, q.Step)
	}
	start, end, step := q.Start.UnixMilli(), q.End.UnixMilli(), q.Step.Milliseconds()
	if step == 0 {
		step = 1
	}
	if end < start {
		return nil, fmt.Errorf("vmembed: query %q: end %s is before start %s", q.Expr, q.End, q.Start)
	}
	if err := promql.ValidateMaxPointsPerSeries(start, end, step, s.opts.MaxPointsPerSeries); err != nil {
		return nil, tsdb.TooLarge("metrics.max_points_per_series", fmt.Errorf("query %q: %w", q.Expr, err))
	}
	return s.exec(ctx, q.Expr, start, end, step, false)
}

// Query evaluates expr at one instant; see tsdb.Store.
func (s *Store) Query(ctx context.Context, expr string, at time.Time) ([]tsdb.Series, error) {
	ts := at.UnixMilli()
	// Step doubles as the lookback window for instant queries; 5m is the
	// Prometheus/VictoriaMetrics default.
	return s.exec(ctx, expr, ts, ts, (5 * time.Minute).Milliseconds(), true)
}

// searchQuery parses a series selector into a search over [start, end] of
// at most maxSeries series and read-locks s: on success the caller must
// RUnlock.
func (s *Store) searchQuery(ctx context.Context, match string, start, end time.Time, maxSeries int) (*storage.SearchQuery, error) {
	tfss, err := searchutil.ParseMetricSelector(match)
	if err != nil {
		return nil, fmt.Errorf("vmembed: series selector %q: %w", match, err)
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	return storage.NewSearchQuery(start.UnixMilli(), end.UnixMilli(), tfss, maxSeries), nil
}

// SeriesMatch lists series matching a selector; see tsdb.Store.
func (s *Store) SeriesMatch(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error) {
	sq, err := s.searchQuery(ctx, match, start, end, s.opts.MaxSeries)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	names, err := netstorage.SearchMetricNames(nil, sq, s.deadline(ctx))
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmembed: list series %q: %w", match, err))
	}
	out := make([]map[string]string, 0, len(names))
	var mn storage.MetricName
	for _, n := range names {
		if err := mn.UnmarshalString(n); err != nil {
			return nil, fmt.Errorf("vmembed: list series %q: decode series name: %w", match, err)
		}
		out = append(out, labelsOf(&mn))
	}
	return out, nil
}

// maxLabelValueSeries bounds the series a LabelValues search looks through.
const maxLabelValueSeries = 10 * tsdb.MaxLabelValues

// LabelValues lists the values of label in matching series; see tsdb.Store.
func (s *Store) LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	// The series are only looked through in the index, not loaded: the
	// bound is the one on values, not MaxSeries (which LabelValues exists
	// to work below).
	sq, err := s.searchQuery(ctx, match, start, end, maxLabelValueSeries)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	// VictoriaMetrics calls the metric name "" inside its storage.
	name := label
	if name == "__name__" {
		name = ""
	}
	// One more than the limit, to tell "exactly the limit" from "too many".
	vals, err := netstorage.LabelValues(nil, name, sq, tsdb.MaxLabelValues+1, s.deadline(ctx))
	if err != nil {
		return nil, vmerr.Classify(fmt.Errorf("vmembed: values of label %s in %q: %w", label, match, err))
	}
	if len(vals) > tsdb.MaxLabelValues {
		return nil, tsdb.TooLarge("tsdb.MaxLabelValues",
			fmt.Errorf("label %s has more than %d values in %q", label, tsdb.MaxLabelValues, match))
	}
	return vals, nil
}

func labelsOf(mn *storage.MetricName) map[string]string {
	m := make(map[string]string, len(mn.Tags)+1)
	if len(mn.MetricGroup) > 0 {
		m["__name__"] = string(mn.MetricGroup)
	}
	for _, t := range mn.Tags {
		m[string(t.Key)] = string(t.Value)
	}
	return m
}

// convert drops NaN points (VictoriaMetrics' "no value") and empty series, as
// the Prometheus HTTP API does, so both backends return the same shape.
func convert(res []netstorage.Result) []tsdb.Series {
	out := make([]tsdb.Series, 0, len(res))
	for i := range res {
		r := &res[i]
		pts := make([]tsdb.Point, 0, len(r.Values))
		for j, v := range r.Values {
			if math.IsNaN(v) {
				continue
			}
			pts = append(pts, tsdb.Point{T: time.UnixMilli(r.Timestamps[j]), V: v})
		}
		if len(pts) == 0 {
			continue
		}
		out = append(out, tsdb.Series{Labels: labelsOf(&r.MetricName), Points: pts})
	}
	return out
}
