package store

import (
	"context"
	"time"
)

// Resolution is the length of a statistics bucket.
type Resolution string

const (
	Hourly Resolution = "1h"
	Daily  Resolution = "1d"
)

// Duration is the length of one bucket of r.
func (r Resolution) Duration() time.Duration {
	if r == Daily {
		return 24 * time.Hour
	}
	return time.Hour
}

// Rollup summarizes one series over one bucket [Start, Start+Resolution).
// The average is Sum/Count; keeping both (rather than the average) lets
// hourly rollups be combined into exact daily ones.
type Rollup struct {
	Resolution Resolution
	Start      time.Time
	// Series is the canonical key of the label set (see stats.SeriesKey);
	// with Resolution and Start it identifies the row.
	Series string
	// Labels include __name__.
	Labels map[string]string
	Min    float64
	Max    float64
	Sum    float64
	Count  int64
	Last   float64
}

// Count kinds and groupings of daily counts.
const (
	CountLogs   = "logs"
	CountEvents = "events"
)

// DailyCount is how many log lines or events one key (a level, app or host)
// had on one UTC day, and how many of them were errors and warnings.
type DailyCount struct {
	Kind     string // CountLogs or CountEvents
	By       string // level, app or host
	Day      time.Time
	Key      string
	Count    int64
	Errors   int64
	Warnings int64
}

// RollupFilter selects rollups; Resolution is required, zero times are
// unbounded (Since inclusive, Until exclusive).
type RollupFilter struct {
	Resolution   Resolution
	Name         string // __name__; "" for every metric
	Since, Until time.Time
	Limit        int // 0: no limit
}

// CountFilter selects daily counts; Kind and By are required.
type CountFilter struct {
	Kind, By     string
	Since, Until time.Time
}

// Stats is the statistics tier: downsampled metrics and daily counts, kept
// far longer than the raw data they summarize.
type Stats interface {
	// PutRollups inserts rollups, replacing any with the same resolution,
	// series and start: recomputing a bucket never counts it twice.
	PutRollups(ctx context.Context, rollups []Rollup) error
	// ListRollups returns rollups ordered by series, then start.
	ListRollups(ctx context.Context, f RollupFilter) ([]Rollup, error)
	// DeleteRollupsBefore removes the rollups of resolution r that start
	// before t, and returns how many it removed.
	DeleteRollupsBefore(ctx context.Context, r Resolution, t time.Time) (int, error)
	// PutCounts inserts daily counts, replacing any with the same kind, by,
	// day and key.
	PutCounts(ctx context.Context, counts []DailyCount) error
	// ListCounts returns daily counts ordered by day, then key.
	ListCounts(ctx context.Context, f CountFilter) ([]DailyCount, error)
	// DeleteCountsBefore removes daily counts of days starting before t.
	DeleteCountsBefore(ctx context.Context, t time.Time) (int, error)
	// StatsCursor returns the named progress mark of the statistics
	// controller (the zero time if it was never set).
	StatsCursor(ctx context.Context, name string) (time.Time, error)
	// SetStatsCursor moves the named progress mark.
	SetStatsCursor(ctx context.Context, name string, at time.Time) error
}
