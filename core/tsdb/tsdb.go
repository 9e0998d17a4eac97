// Package tsdb defines unyo's time-series storage contract: one Store
// interface with two VictoriaMetrics backends, embedded in-process
// (core/tsdb/vmembed, the default) and a remote server (core/tsdb/vmremote).
// Both are checked by the same contract suite in core/tsdb/tsdbtest.
//
// Semantics shared by every backend:
//
//   - Timestamps are stored with millisecond precision (VictoriaMetrics'
//     resolution); sub-millisecond parts are truncated.
//   - Write validates the whole batch first. A sample with an invalid name or
//     label rejects the whole batch with an *InvalidSampleError naming the
//     sample, and nothing is written: such samples are a bug at the source
//     (use ValidateSample there), and partial writes would make retries
//     ambiguous.
//   - Samples whose timestamp lies outside the accepted window (older than the
//     retention, or more than MaxFutureSkew ahead of now) are dropped and
//     counted (see WriteStats), not reported as errors: one stale sample in a
//     spooled batch must not turn the batch into a poison message that is
//     retried forever.
//   - Rewriting identical samples (same series, timestamp and value) is
//     harmless: stores deduplicate samples with the same millisecond timestamp.
//   - A query whose result would exceed a configured limit fails with an error
//     matching ErrTooLarge (errors.Is) that names the limit, instead of using
//     unbounded memory.
package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sample is one value of one series at one instant.
type Sample struct {
	// Name is the metric name (Prometheus __name__).
	Name string
	// Labels must not contain __name__; empty values mean "label absent".
	Labels    map[string]string
	Timestamp time.Time
	Value     float64
}

// Label is one label of a series.
type Label struct{ Name, Value string }

// SeriesPoints is one series and its points: the form WriteSeries takes, so
// that a caller holding samples grouped by series (the agent API) hands each
// label set over once and builds no map per sample.
type SeriesPoints struct {
	// Name is the metric name (Prometheus __name__).
	Name string
	// Labels are sorted by name, without duplicates and without __name__;
	// empty values mean "label absent".
	Labels []Label
	// TimesMs are the points' times in milliseconds since the Unix epoch;
	// Values has the same length.
	TimesMs []int64
	Values  []float64
}

// Point is one value of a Series.
type Point struct {
	T time.Time
	V float64
}

// Series is a query result: a label set (including __name__ when the
// expression keeps it) and its points in ascending time order.
type Series struct {
	Labels map[string]string
	Points []Point
}

// QueryRange is a MetricsQL range query evaluated at Start, Start+Step, ... End.
type QueryRange struct {
	Expr       string
	Start, End time.Time
	Step       time.Duration
}

// Store is a time-series database. Implementations are safe for concurrent use.
type Store interface {
	// Write stores a batch of samples. See the package comment for
	// validation, dropping and deduplication rules.
	Write(ctx context.Context, samples []Sample) error
	// WriteSeries stores series with their points, with the same
	// validation (a bad series or unsorted labels reject the whole call,
	// the *InvalidSampleError's Index being the series' position), dropping
	// and deduplication rules as Write.
	WriteSeries(ctx context.Context, series []SeriesPoints) error
	// QueryRange evaluates a MetricsQL expression over a time range.
	QueryRange(ctx context.Context, q QueryRange) ([]Series, error)
	// Query evaluates a MetricsQL expression at one instant; each returned
	// series has exactly one point.
	Query(ctx context.Context, expr string, at time.Time) ([]Series, error)
	// SeriesMatch lists the label sets (including __name__) of the series
	// matching a series selector such as `up{job=~"node.*"}` that have
	// samples between start and end.
	SeriesMatch(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error)
	// LabelValues lists, sorted, the values label (e.g. __name__) takes in
	// the series matching a series selector that have samples between start
	// and end; like SeriesMatch, backends may also name series with samples
	// only elsewhere on the same UTC days (VictoriaMetrics indexes by day).
	// Far smaller than SeriesMatch's answer, it lets callers split big
	// selections into batches (one metric name at a time).
	LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error)
	// Flush makes every completed Write visible to queries now.
	Flush(ctx context.Context) error
	// Close releases the store; it is not usable afterwards.
	Close() error
}

// MaxLabelValues bounds a LabelValues answer; larger ones fail with an error
// matching ErrTooLarge. It is separate from the series limits: listing
// values does not load series.
const MaxLabelValues = 1_000_000

// WriteStats counts what Write did with the samples it was given.
type WriteStats struct {
	Written       uint64 // handed to the database
	DroppedTooOld uint64 // older than the retention
	DroppedFuture uint64 // more than MaxFutureSkew ahead of now
}

// StatsReporter is implemented by stores that count dropped samples.
type StatsReporter interface {
	WriteStats() WriteStats
}

// ErrTooLarge matches (errors.Is) query errors caused by a result-size limit.
var ErrTooLarge = errors.New("query result too large")

// TooLarge returns an error matching ErrTooLarge that names the limit that
// was hit and carries the database's own explanation.
func TooLarge(limit string, detail error) error {
	return &TooLargeError{Limit: limit, Err: detail}
}

// TooLargeError is returned when a query exceeds a result-size limit.
type TooLargeError struct {
	Limit string // the limit's name, e.g. "MaxSeries (-search.maxUniqueTimeseries)"
	Err   error  // the database's message
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("query result too large: limit %s exceeded: %v", e.Limit, e.Err)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Unwrap returns the database's message.
func (e *TooLargeError) Unwrap() error { return e.Err }
