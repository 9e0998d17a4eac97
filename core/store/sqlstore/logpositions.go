package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// GetLogPositions returns the positions of node's tailed files by file id.
func (s *Store) GetLogPositions(ctx context.Context, node string) (map[string]store.LogPosition, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT file_id, sequence, log_offset FROM log_positions WHERE node = $1", node)
	if err != nil {
		return nil, fmt.Errorf("read log positions of node %q: %w", node, err)
	}
	defer rows.Close()
	out := map[string]store.LogPosition{}
	for rows.Next() {
		var id string
		var seq, off int64
		if err := rows.Scan(&id, &seq, &off); err != nil {
			return nil, fmt.Errorf("read log positions of node %q: %w", node, err)
		}
		// Sequences are stored as BIGINT; agents seed them from the clock in
		// nanoseconds, far below 2^63.
		out[id] = store.LogPosition{Sequence: uint64(seq), Offset: off}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read log positions of node %q: %w", node, err)
	}
	return out, nil
}

// PutLogPositions sets the positions of some of node's files.
func (s *Store) PutLogPositions(ctx context.Context, node string, pos map[string]store.LogPosition) error {
	if len(pos) == 0 {
		return nil
	}
	t := now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, id := range slices.Sorted(maps.Keys(pos)) { // sorted: a fixed lock order
			p := pos[id]
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO log_positions (node, file_id, sequence, log_offset, updated_at)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (node, file_id) DO UPDATE SET
					sequence = excluded.sequence,
					log_offset = excluded.log_offset,
					updated_at = excluded.updated_at`,
				node, id, int64(p.Sequence), p.Offset, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record log positions of node %q: %w", node, err)
	}
	return nil
}

// PruneLogPositions forgets files not written since before.
func (s *Store) PruneLogPositions(ctx context.Context, before time.Time) (int, error) {
	n, err := s.deleteWhere(ctx, "DELETE FROM log_positions WHERE updated_at < $1", before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("prune log positions: %w", err)
	}
	return n, nil
}
