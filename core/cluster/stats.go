package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/stats"
)

// StatsOptions configure the statistics controller (see package stats).
type StatsOptions struct {
	HourlyRetention, DailyRetention time.Duration
	// Lateness is how long after its end a bucket is recomputed.
	Lateness time.Duration
	// Metrics are the series selectors rolled up.
	Metrics []string
	// MetricsBackfill and LogsBackfill are how far back the first run
	// starts: what the TSDB and the log store still hold (their retention).
	MetricsBackfill, LogsBackfill time.Duration
	// Interval is how often the controller runs; default 1m.
	Interval time.Duration
}

// Cursor names in the state store.
const (
	cursorHourly = "metrics-hourly"
	cursorCounts = "counts-daily"
)

// statsRunner computes the statistics tier on the lease holder.
type statsRunner struct {
	o       StatsOptions
	sels    []*stats.Selector
	store   store.Store
	metrics tsdb.Store     // nil: no metric rollups
	logs    logstore.Store // nil: no log and event counts
	now     func() time.Time
	log     *slog.Logger
}

func newStatsRunner(o StatsOptions, st store.Store, metrics tsdb.Store, logs logstore.Store, now func() time.Time, log *slog.Logger) (*statsRunner, error) {
	r := &statsRunner{o: o, store: st, metrics: metrics, logs: logs, now: now, log: log}
	for _, m := range o.Metrics {
		sel, err := stats.ParseSelector(m)
		if err != nil {
			return nil, fmt.Errorf("stats.metrics: %w", err)
		}
		r.sels = append(r.sels, sel)
	}
	if r.o.Interval <= 0 {
		r.o.Interval = time.Minute
	}
	return r, nil
}

// Run computes what is due every interval.
func (r *statsRunner) Run(ctx context.Context) {
	every(ctx, r.o.Interval, func(ctx context.Context) {
		if err := r.run(ctx, r.now()); err != nil && ctx.Err() == nil {
			r.log.Warn("computing statistics failed; the next run resumes where this one stopped", "err", err)
		}
	})
}

// run does everything due at now: hourly and daily rollups, daily counts,
// expiry. A failed part does not keep the others from running.
func (r *statsRunner) run(ctx context.Context, now time.Time) error {
	var errs []error
	if r.metrics != nil && len(r.sels) > 0 {
		errs = append(errs, r.rollups(ctx, now))
	}
	if r.logs != nil {
		errs = append(errs, r.counts(ctx, now))
	}
	errs = append(errs, r.expire(ctx, now))
	return errors.Join(errs...)
}

// rollups computes the hourly rollups of the due hours and, once a day's
// hours are done, that day's daily rollups from them.
func (r *statsRunner) rollups(ctx context.Context, now time.Time) error {
	cursor, err := r.store.StatsCursor(ctx, cursorHourly)
	if err != nil {
		return err
	}
	w := stats.Due(cursor, now, r.o.Lateness, min(r.o.MetricsBackfill, r.o.HourlyRetention), store.Hourly, false)
	hours := w.Buckets(store.Hourly)
	if len(hours) == 0 {
		return nil
	}
	// One metric name at a time bounds memory by the largest metric, not
	// by the fleet.
	batches := map[string][]*stats.Selector{} // name -> selectors naming it
	for _, sel := range r.sels {
		names, err := r.metrics.LabelValues(ctx, "__name__", sel.String(), w.From, w.Until)
		if err != nil {
			return fmt.Errorf("statistics: metric names of %s: %w", sel, err)
		}
		for _, n := range names {
			batches[n] = append(batches[n], sel)
		}
	}
	names := slices.Sorted(maps.Keys(batches))
	for i, hour := range hours {
		for _, name := range names {
			for _, sel := range batches[name] {
				if err := r.hour(ctx, hour, sel.WithName(name), true); err != nil {
					return err
				}
			}
		}
		if hour.Add(time.Hour).Compare(w.Final) <= 0 {
			if err := r.store.SetStatsCursor(ctx, cursorHourly, hour.Add(time.Hour)); err != nil {
				return err
			}
		}
		last := i == len(hours)-1
		if day := stats.Align(hour, store.Daily); last || !stats.Align(hours[i+1], store.Daily).Equal(day) {
			if err := r.daily(ctx, day, names); err != nil {
				return err
			}
		}
	}
	r.log.Debug("statistics: hourly rollups computed", "from", w.From, "until", w.Until, "final_before", w.Final, "metrics", len(names))
	return nil
}

// hour stores the hourly rollups of the series sel selects. When they are
// too many for one query and split allows, it splits them by node.
func (r *statsRunner) hour(ctx context.Context, hour time.Time, sel string, split bool) error {
	values := map[string]*stats.Values{}
	for i, q := range stats.HourQueries(sel) {
		res, err := r.metrics.Query(ctx, q, stats.QueryTime(hour))
		if errors.Is(err, tsdb.ErrTooLarge) && i == 0 && split {
			return r.hourByNode(ctx, hour, sel)
		}
		if err != nil {
			return fmt.Errorf("statistics: hour %s: %w", hour.Format(time.RFC3339), err)
		}
		for _, s := range res {
			key := stats.SeriesKey(s.Labels)
			v := values[key]
			if v == nil {
				v = &stats.Values{Labels: s.Labels}
				values[key] = v
			}
			v.V[i], v.Has[i] = s.Points[len(s.Points)-1].V, true
		}
	}
	return r.store.PutRollups(ctx, stats.Assemble(hour, values))
}

func (r *statsRunner) hourByNode(ctx context.Context, hour time.Time, sel string) error {
	nodes, err := r.metrics.LabelValues(ctx, "node", sel, hour, hour.Add(time.Hour))
	if err != nil {
		return fmt.Errorf("statistics: hour %s: nodes of %s: %w", hour.Format(time.RFC3339), sel, err)
	}
	r.log.Debug("statistics: splitting a metric by node", "selector", sel, "nodes", len(nodes))
	narrowed, err := stats.ParseSelector(sel)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		// One node's series of one metric that are still too many cannot
		// be split further here: the error names the TSDB's limit.
		if err := r.hour(ctx, hour, narrowed.WithLabel("node", n), false); err != nil {
			return err
		}
	}
	return nil
}

// daily derives the daily rollups of day from its hourly rollups.
func (r *statsRunner) daily(ctx context.Context, day time.Time, names []string) error {
	for _, name := range names {
		hourly, err := r.store.ListRollups(ctx, store.RollupFilter{Resolution: store.Hourly, Name: name, Since: day, Until: day.Add(24 * time.Hour)})
		if err != nil {
			return err
		}
		if err := r.store.PutRollups(ctx, stats.Daily(hourly)); err != nil {
			return err
		}
	}
	return nil
}

// counts stores the daily counts of log lines and of events (from the event
// history in the log store) of the due days, today so far included.
func (r *statsRunner) counts(ctx context.Context, now time.Time) error {
	cursor, err := r.store.StatsCursor(ctx, cursorCounts)
	if err != nil {
		return err
	}
	w := stats.Due(cursor, now, r.o.Lateness, min(r.o.LogsBackfill, r.o.DailyRetention), store.Daily, true)
	for _, day := range w.Buckets(store.Daily) {
		var counts []store.DailyCount
		for _, by := range []string{logstore.ByLevel, logstore.ByApp, logstore.ByHost} {
			dayQuery := logstore.Query{Since: day, Until: day.Add(24 * time.Hour)}
			// Log lines, without the event history written among them.
			lines := dayQuery
			lines.ExceptApp = logstore.EventsApp
			b, err := r.logs.Stats(ctx, lines, by, 24*time.Hour)
			if err != nil {
				return fmt.Errorf("statistics: log counts of %s by %s: %w", day.Format(time.DateOnly), by, err)
			}
			counts = append(counts, dailyCounts(store.CountLogs, by, day, b)...)
			events := dayQuery
			events.App = logstore.EventsApp
			b, err = r.logs.Stats(ctx, events, eventGrouping(by), 24*time.Hour)
			if err != nil {
				return fmt.Errorf("statistics: event counts of %s by %s: %w", day.Format(time.DateOnly), by, err)
			}
			counts = append(counts, dailyCounts(store.CountEvents, by, day, b)...)
		}
		if err := r.store.PutCounts(ctx, counts); err != nil {
			return err
		}
		if end := day.Add(24 * time.Hour); end.Compare(w.Final) <= 0 {
			if err := r.store.SetStatsCursor(ctx, cursorCounts, end); err != nil {
				return err
			}
		}
	}
	return nil
}

// eventGrouping says where the event history keeps what events are counted
// by: the node is the entry's host, the check (counted as "app") a field.
func eventGrouping(by string) string {
	if by == logstore.ByApp {
		return logstore.ByField(logstore.FieldCheck)
	}
	return by
}

func dailyCounts(kind, by string, day time.Time, buckets []logstore.Bucket) []store.DailyCount {
	out := make([]store.DailyCount, 0, len(buckets))
	for _, b := range buckets {
		key := b.Key
		if kind == store.CountEvents && by == logstore.ByLevel {
			key = eventLevelName(key)
		}
		out = append(out, store.DailyCount{Kind: kind, By: by, Day: day, Key: key, Count: b.Count, Errors: b.Errors, Warnings: b.Warnings})
	}
	return out
}

// expire removes rollups and counts past their retention.
func (r *statsRunner) expire(ctx context.Context, now time.Time) error {
	hourly := stats.Align(now.Add(-r.o.HourlyRetention), store.Hourly)
	daily := stats.Align(now.Add(-r.o.DailyRetention), store.Daily)
	nh, err := r.store.DeleteRollupsBefore(ctx, store.Hourly, hourly)
	if err != nil {
		return err
	}
	nd, err := r.store.DeleteRollupsBefore(ctx, store.Daily, daily)
	if err != nil {
		return err
	}
	nc, err := r.store.DeleteCountsBefore(ctx, daily)
	if err != nil {
		return err
	}
	if nh+nd+nc > 0 {
		r.log.Info("statistics: expired", "hourly_rollups", nh, "daily_rollups", nd, "daily_counts", nc,
			"hourly_before", hourly, "daily_before", daily)
	}
	return nil
}
