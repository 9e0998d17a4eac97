package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// PutRollups upserts rollups in one transaction.
func (s *Store) PutRollups(ctx context.Context, rollups []store.Rollup) error {
	if len(rollups) == 0 {
		return nil
	}
	for _, r := range rollups {
		if err := checkRollup(r); err != nil {
			return fmt.Errorf("store rollups: %w", err)
		}
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `
			INSERT INTO stat_rollups (resolution, series, bucket_start, name, labels, val_min, val_max, val_sum, val_count, val_last)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (resolution, series, bucket_start) DO UPDATE SET
				name = excluded.name, labels = excluded.labels,
				val_min = excluded.val_min, val_max = excluded.val_max, val_sum = excluded.val_sum,
				val_count = excluded.val_count, val_last = excluded.val_last`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range rollups {
			labels, err := json.Marshal(r.Labels)
			if err != nil {
				return fmt.Errorf("encode labels of %s: %w", r.Series, err)
			}
			if _, err := stmt.ExecContext(ctx, string(r.Resolution), r.Series, r.Start.UnixNano(), r.Labels["__name__"], string(labels),
				r.Min, r.Max, r.Sum, r.Count, r.Last); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store %d rollups: %w", len(rollups), err)
	}
	return nil
}

// checkRollup refuses rows the databases cannot hold alike: SQLite turns a
// NaN into NULL, so a NaN would fail there and pass on PostgreSQL.
func checkRollup(r store.Rollup) error {
	if r.Resolution != store.Hourly && r.Resolution != store.Daily {
		return fmt.Errorf("series %s: resolution %q is not 1h or 1d", r.Series, r.Resolution)
	}
	if r.Series == "" {
		return errors.New("a rollup has no series key")
	}
	for _, v := range []float64{r.Min, r.Max, r.Sum, r.Last} {
		if math.IsNaN(v) {
			return fmt.Errorf("series %s at %s: NaN cannot be stored", r.Series, r.Start.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// ListRollups returns rollups ordered by series, then start.
func (s *Store) ListRollups(ctx context.Context, f store.RollupFilter) ([]store.Rollup, error) {
	var b strings.Builder
	args := []any{string(f.Resolution)}
	b.WriteString(`SELECT series, bucket_start, labels, val_min, val_max, val_sum, val_count, val_last
		FROM stat_rollups WHERE resolution = $1`)
	if f.Name != "" {
		args = append(args, f.Name)
		fmt.Fprintf(&b, " AND name = $%d", len(args))
	}
	args = timeRange(&b, args, "bucket_start", f.Since, f.Until)
	b.WriteString(" ORDER BY series, bucket_start")
	if f.Limit > 0 {
		args = append(args, f.Limit)
		fmt.Fprintf(&b, " LIMIT $%d", len(args))
	}
	rows, err := s.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("read %s rollups: %w", f.Resolution, err)
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		r := store.Rollup{Resolution: f.Resolution}
		var start int64
		var labels string
		if err := rows.Scan(&r.Series, &start, &labels, &r.Min, &r.Max, &r.Sum, &r.Count, &r.Last); err != nil {
			return nil, fmt.Errorf("read %s rollups: %w", f.Resolution, err)
		}
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return nil, fmt.Errorf("read %s rollups: labels of %s: %w", f.Resolution, r.Series, err)
		}
		r.Start = time.Unix(0, start).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s rollups: %w", f.Resolution, err)
	}
	return out, nil
}

// timeRange adds "AND col >= since AND col < until" to a query for the
// bounds that are set, and returns args with their values.
func timeRange(b *strings.Builder, args []any, col string, since, until time.Time) []any {
	if !since.IsZero() {
		args = append(args, since.UnixNano())
		fmt.Fprintf(b, " AND %s >= $%d", col, len(args))
	}
	if !until.IsZero() {
		args = append(args, until.UnixNano())
		fmt.Fprintf(b, " AND %s < $%d", col, len(args))
	}
	return args
}

// DeleteRollupsBefore removes the rollups of resolution r starting before t.
func (s *Store) DeleteRollupsBefore(ctx context.Context, r store.Resolution, t time.Time) (int, error) {
	n, err := s.deleteWhere(ctx, "DELETE FROM stat_rollups WHERE resolution = $1 AND bucket_start < $2", string(r), t.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("expire %s rollups before %s: %w", r, t.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// PutCounts upserts daily counts in one transaction.
func (s *Store) PutCounts(ctx context.Context, counts []store.DailyCount) error {
	if len(counts) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `
			INSERT INTO stat_counts (kind, by_key, day, key, total, errors, warnings)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (kind, by_key, day, key) DO UPDATE SET
				total = excluded.total, errors = excluded.errors, warnings = excluded.warnings`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range counts {
			if _, err := stmt.ExecContext(ctx, c.Kind, c.By, c.Day.UnixNano(), c.Key, c.Count, c.Errors, c.Warnings); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store %d daily counts: %w", len(counts), err)
	}
	return nil
}

// ListCounts returns daily counts ordered by day, then key.
func (s *Store) ListCounts(ctx context.Context, f store.CountFilter) ([]store.DailyCount, error) {
	var b strings.Builder
	args := []any{f.Kind, f.By}
	b.WriteString("SELECT day, key, total, errors, warnings FROM stat_counts WHERE kind = $1 AND by_key = $2")
	args = timeRange(&b, args, "day", f.Since, f.Until)
	b.WriteString(" ORDER BY day, key")
	rows, err := s.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("read daily %s counts by %s: %w", f.Kind, f.By, err)
	}
	defer rows.Close()
	var out []store.DailyCount
	for rows.Next() {
		c := store.DailyCount{Kind: f.Kind, By: f.By}
		var day int64
		if err := rows.Scan(&day, &c.Key, &c.Count, &c.Errors, &c.Warnings); err != nil {
			return nil, fmt.Errorf("read daily %s counts by %s: %w", f.Kind, f.By, err)
		}
		c.Day = time.Unix(0, day).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read daily %s counts by %s: %w", f.Kind, f.By, err)
	}
	return out, nil
}

// DeleteCountsBefore removes the counts of days starting before t.
func (s *Store) DeleteCountsBefore(ctx context.Context, t time.Time) (int, error) {
	n, err := s.deleteWhere(ctx, "DELETE FROM stat_counts WHERE day < $1", t.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("expire daily counts before %s: %w", t.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

func (s *Store) deleteWhere(ctx context.Context, query string, args ...any) (int, error) {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// StatsCursor returns the named progress mark, or the zero time.
func (s *Store) StatsCursor(ctx context.Context, name string) (time.Time, error) {
	var at int64
	err := s.r.QueryRowContext(ctx, "SELECT at FROM stat_cursors WHERE name = $1", name).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read statistics cursor %q: %w", name, err)
	}
	return time.Unix(0, at).UTC(), nil
}

// SetStatsCursor moves the named progress mark.
func (s *Store) SetStatsCursor(ctx context.Context, name string, at time.Time) error {
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO stat_cursors (name, at) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET at = excluded.at`, name, at.UnixNano()); err != nil {
		return fmt.Errorf("record statistics cursor %q: %w", name, err)
	}
	return nil
}
