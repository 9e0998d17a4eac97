package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// ForgetEvents resolves the active alerts a deleted node or check opened and
// removes its latest events and pipeline state, in one transaction (see
// store.Events). The alerts go through alerts.Apply like every other
// transition.
func (s *Store) ForgetEvents(ctx context.Context, f store.ForgetFilter, by, reason string, at time.Time) ([]*unyov1.Alert, error) {
	if f.Node == "" && f.Check == "" {
		return nil, errors.New("forget events: name a node or a check")
	}
	what := forgetWhat(f)
	where, args := whereNodeCheck(f.Node, f.Check)
	cond := strings.Join(where, " AND ")
	var resolved []*unyov1.Alert
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		resolved = nil
		// Open or acknowledged: a resolved alert stays as it is.
		q := fmt.Sprintf("SELECT DISTINCT key FROM alerts WHERE %s AND state IN ($%d, $%d) ORDER BY key", cond, len(args)+1, len(args)+2)
		rows, err := tx.QueryContext(ctx, q, append(args, int32(unyov1.AlertState_ALERT_STATE_OPEN), int32(unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED))...)
		if err != nil {
			return fmt.Errorf("read the alerts of %s: %w", what, err)
		}
		var ops []pipeline.AlertOp
		for rows.Next() {
			var key string
			if err := rows.Scan(&key); err != nil {
				rows.Close()
				return fmt.Errorf("read the alerts of %s: %w", what, err)
			}
			ops = append(ops, pipeline.AlertOp{Op: alerts.Op{Kind: alerts.OpResolve, Key: key, By: by, Reason: reason, At: at}})
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read the alerts of %s: %w", what, err)
		}
		applied, err := s.applyAlertOps(ctx, s.stmts(tx), ops, make([]bool, len(ops)))
		if err != nil {
			return fmt.Errorf("resolve the alerts of %s: %w", what, err)
		}
		for _, a := range applied {
			if a != nil {
				resolved = append(resolved, a)
			}
		}
		for _, table := range []string{"latest_events", "pipeline_checks", "pipeline_notified"} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE "+cond, args...); err != nil {
				return fmt.Errorf("remove the latest events of %s: %w", what, err)
			}
		}
		_, err = bump(ctx, tx, forgetRevision, 1)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forget %s: %w", what, err)
	}
	return resolved, nil
}

// forgetRevision is the counter ForgetRevision reads.
const forgetRevision = "forget_revision"

// ForgetRevision moves with every ForgetEvents.
func (s *Store) ForgetRevision(ctx context.Context) (int64, error) {
	var v int64
	if err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = $1", forgetRevision).Scan(&v); err != nil {
		return 0, fmt.Errorf("read counter %s: %w", forgetRevision, err)
	}
	return v, nil
}

func forgetWhat(f store.ForgetFilter) string {
	switch {
	case f.Node == "":
		return fmt.Sprintf("check %q", f.Check)
	case f.Check == "":
		return fmt.Sprintf("node %q", f.Node)
	}
	return fmt.Sprintf("check %q of node %q", f.Check, f.Node)
}
