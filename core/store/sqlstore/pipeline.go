package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// NextEvents returns stored events with a sequence above after, oldest first.
func (s *Store) NextEvents(ctx context.Context, after int64, limit int) ([]store.SeqEvent, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT seq, body FROM events WHERE seq > $1 ORDER BY seq LIMIT $2", after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	defer rows.Close()
	var out []store.SeqEvent
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, fmt.Errorf("read events after %d: %w", after, err)
		}
		e := new(unyov1.Event)
		if err := proto.Unmarshal(body, e); err != nil {
			return nil, fmt.Errorf("decode event at %d: %w", seq, err)
		}
		out = append(out, store.SeqEvent{Seq: seq, Event: e})
	}
	return out, rows.Err()
}

// LoadPipeline reads the pipeline's committed state.
func (s *Store) LoadPipeline(ctx context.Context) (*store.PipelineState, error) {
	st := &store.PipelineState{Counters: map[pipeline.NodeCheck]eventrules.Counter{}, Issued: map[pipeline.NodeCheck]eventrules.Issued{}}
	if err := s.w.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'pipeline_cursor'").Scan(&st.Cursor); err != nil {
		return nil, fmt.Errorf("read pipeline cursor: %w", err)
	}
	rows, err := s.w.QueryContext(ctx, "SELECT node, check_name, occ_level, occ_count, issue_level, issued_at FROM pipeline_checks")
	if err != nil {
		return nil, fmt.Errorf("read occurrences: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var nc pipeline.NodeCheck
		var ol, oc, il int32
		var at int64
		if err := rows.Scan(&nc.Node, &nc.Check, &ol, &oc, &il, &at); err != nil {
			return nil, fmt.Errorf("read occurrences: %w", err)
		}
		st.Counters[nc] = eventrules.Counter{Level: unyov1.Level(ol), Count: int(oc)}
		if at != 0 {
			st.Issued[nc] = eventrules.Issued{Level: unyov1.Level(il), At: time.Unix(0, at)}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read occurrences: %w", err)
	}
	if st.Notified, err = s.loadNotified(ctx); err != nil {
		return nil, err
	}
	grows, err := s.w.QueryContext(ctx, "SELECT body FROM aggregate_groups ORDER BY rule, key")
	if err != nil {
		return nil, fmt.Errorf("read aggregate groups: %w", err)
	}
	defer grows.Close()
	for grows.Next() {
		var body []byte
		if err := grows.Scan(&body); err != nil {
			return nil, fmt.Errorf("read aggregate groups: %w", err)
		}
		g := new(unyov1.AggregateGroup)
		if err := proto.Unmarshal(body, g); err != nil {
			return nil, fmt.Errorf("decode aggregate group: %w", err)
		}
		st.Groups = append(st.Groups, g)
	}
	return st, grows.Err()
}

// CommitPipeline writes one pipeline step in one transaction: cursor (checked
// against ExpectCursor), state, alert operations, action jobs (whose bodies
// are built from the alerts the operations produced), explanations and
// match counts.
func (s *Store) CommitPipeline(ctx context.Context, c *store.PipelineCommit) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := s.counter(ctx, tx, "pipeline_cursor")
		if err != nil {
			return err
		}
		if cur != c.ExpectCursor {
			return fmt.Errorf("%w (expected %d, found %d)", store.ErrConflict, c.ExpectCursor, cur)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE counters SET value = $1 WHERE name = 'pipeline_cursor'", c.Cursor); err != nil {
			return fmt.Errorf("move cursor: %w", err)
		}
		if err := s.writePipelineChecks(ctx, tx, c); err != nil {
			return err
		}
		if err := writeNotified(ctx, tx, c.Notified); err != nil {
			return err
		}
		for _, g := range c.PutGroups {
			b, err := proto.Marshal(g)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO aggregate_groups (rule, key, body) VALUES ($1, $2, $3)
				ON CONFLICT (rule, key) DO UPDATE SET body = excluded.body`, g.GetRule(), g.GetKey(), b); err != nil {
				return fmt.Errorf("store aggregate group: %w", err)
			}
		}
		for _, g := range c.DeleteGroups {
			if _, err := tx.ExecContext(ctx, "DELETE FROM aggregate_groups WHERE rule = $1 AND key = $2", g.GetRule(), g.GetKey()); err != nil {
				return fmt.Errorf("remove aggregate group: %w", err)
			}
		}
		// Only the alerts an action's body carries are kept as they were.
		keep := make([]bool, len(c.Alerts))
		for _, j := range c.Actions {
			for _, i := range j.AlertOps {
				if i >= 0 && i < len(keep) {
					keep[i] = true
				}
			}
		}
		applied, err := s.applyAlertOps(ctx, tx, c.Alerts, keep)
		if err != nil {
			return err
		}
		for _, j := range c.Actions {
			if err := insertAction(ctx, tx, j, applied); err != nil {
				return err
			}
		}
		if err := s.writeExplanations(ctx, tx, c.Explained); err != nil {
			return err
		}
		return countMatchesTx(ctx, tx, c.RuleMatches, c.MaintenanceSilenced)
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return fmt.Errorf("commit pipeline step to %d: %w", c.Cursor, err)
	}
	return nil
}

func (s *Store) loadNotified(ctx context.Context) (map[pipeline.NodeCheck]map[pipeline.HookID]pipeline.Notified, error) {
	out := map[pipeline.NodeCheck]map[pipeline.HookID]pipeline.Notified{}
	rows, err := s.w.QueryContext(ctx, "SELECT rule, action, node, check_name, level, since, sent_at FROM pipeline_notified")
	if err != nil {
		return nil, fmt.Errorf("read notification records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h pipeline.HookID
		var nc pipeline.NodeCheck
		var level int32
		var since, sent int64
		if err := rows.Scan(&h.Rule, &h.Action, &nc.Node, &nc.Check, &level, &since, &sent); err != nil {
			return nil, fmt.Errorf("read notification records: %w", err)
		}
		if out[nc] == nil {
			out[nc] = map[pipeline.HookID]pipeline.Notified{}
		}
		out[nc][h] = pipeline.Notified{Level: unyov1.Level(level), Since: time.Unix(0, since), SentAt: time.Unix(0, sent)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read notification records: %w", err)
	}
	return out, nil
}

// writeNotified writes notification records; a nil record is removed.
// There are few: one per notifying action and firing node/check, changed
// only when a notification is sent.
func writeNotified(ctx context.Context, tx *sql.Tx, recs map[pipeline.NodeCheck]map[pipeline.HookID]*pipeline.Notified) error {
	for nc, hooks := range recs {
		for h, n := range hooks {
			var err error
			if n == nil {
				_, err = tx.ExecContext(ctx, "DELETE FROM pipeline_notified WHERE node = $1 AND check_name = $2 AND rule = $3 AND action = $4",
					nc.Node, nc.Check, h.Rule, h.Action)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO pipeline_notified (rule, action, node, check_name, level, since, sent_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
					ON CONFLICT (node, check_name, rule, action) DO UPDATE SET level = excluded.level, since = excluded.since, sent_at = excluded.sent_at`,
					h.Rule, h.Action, nc.Node, nc.Check, int32(n.Level), n.Since.UnixNano(), n.SentAt.UnixNano())
			}
			if err != nil {
				return fmt.Errorf("store the notification record of rule %s for %s/%s: %w", h.Rule, nc.Node, nc.Check, err)
			}
		}
	}
	return nil
}

// pipelineChecksUpsert writes occurrences and, where issued_at is not 0,
// the reissue window of a node/check.
const pipelineChecksUpsert = `
		ON CONFLICT (node, check_name) DO UPDATE SET occ_level = excluded.occ_level, occ_count = excluded.occ_count,
			issue_level = CASE WHEN excluded.issued_at = 0 THEN pipeline_checks.issue_level ELSE excluded.issue_level END,
			issued_at = CASE WHEN excluded.issued_at = 0 THEN pipeline_checks.issued_at ELSE excluded.issued_at END`

func (s *Store) writePipelineChecks(ctx context.Context, tx *sql.Tx, c *store.PipelineCommit) error {
	if len(c.Counters)+len(c.Issued) == 0 {
		return nil
	}
	var (
		nodes, checks             []string
		levels, counts, issLevels []int32
		issAt                     []int64
	)
	for nc, cnt := range c.Counters {
		var il int32
		var at int64
		if is, ok := c.Issued[nc]; ok {
			il, at = int32(is.Level), is.At.UnixNano()
		}
		nodes, checks = append(nodes, nc.Node), append(checks, nc.Check)
		levels, counts, issLevels, issAt = append(levels, int32(cnt.Level)), append(counts, int32(cnt.Count)), append(issLevels, il), append(issAt, at)
	}
	if s.d.name == "postgres" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO pipeline_checks (node, check_name, occ_level, occ_count, issue_level, issued_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::int4[], $5::int4[], $6::int8[])`+pipelineChecksUpsert,
			nodes, checks, levels, counts, issLevels, issAt); err != nil {
			return fmt.Errorf("store occurrences: %w", err)
		}
	} else {
		st, err := tx.PrepareContext(ctx, `INSERT INTO pipeline_checks (node, check_name, occ_level, occ_count, issue_level, issued_at)
			VALUES ($1, $2, $3, $4, $5, $6)`+pipelineChecksUpsert)
		if err != nil {
			return fmt.Errorf("store occurrences: %w", err)
		}
		defer st.Close()
		for i := range nodes {
			if _, err := st.ExecContext(ctx, nodes[i], checks[i], levels[i], counts[i], issLevels[i], issAt[i]); err != nil {
				return fmt.Errorf("store occurrences of %s/%s: %w", nodes[i], checks[i], err)
			}
		}
	}
	for nc, is := range c.Issued {
		if _, ok := c.Counters[nc]; ok {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pipeline_checks SET issue_level = $1, issued_at = $2 WHERE node = $3 AND check_name = $4`,
			int32(is.Level), is.At.UnixNano(), nc.Node, nc.Check); err != nil {
			return fmt.Errorf("store reissue window of %s/%s: %w", nc.Node, nc.Check, err)
		}
	}
	return nil
}

func (s *Store) writeExplanations(ctx context.Context, tx *sql.Tx, ex []store.Explained) error {
	if len(ex) == 0 {
		return nil
	}
	ids, bodies, silenced := make([]string, 0, len(ex)), make([][]byte, 0, len(ex)), make([]string, 0, len(ex))
	for _, e := range ex {
		x := e.Explanation
		if e.Append {
			var old []byte
			err := tx.QueryRowContext(ctx, "SELECT explanation FROM events WHERE id = $1", e.ID).Scan(&old)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read explanation of %s: %w", e.ID, err)
			}
			merged := new(unyov1.Explanation)
			if len(old) > 0 {
				if err := proto.Unmarshal(old, merged); err != nil {
					return fmt.Errorf("decode explanation of %s: %w", e.ID, err)
				}
			}
			merged.Steps = append(merged.Steps, x.GetSteps()...)
			if !e.KeepOutcome {
				merged.Outcome, merged.ProcessedAt = x.GetOutcome(), x.GetProcessedAt()
			}
			x = merged
		}
		b, err := proto.Marshal(x)
		if err != nil {
			return err
		}
		by := e.SilencedBy
		if e.Append {
			by = "" // appended steps come after silencing would have applied
		}
		ids, bodies, silenced = append(ids, e.ID), append(bodies, b), append(silenced, by)
	}
	if s.d.name == "postgres" {
		// One statement per table: a round trip per event would bound the
		// pipeline by the network, not the database.
		for _, table := range []string{"events", "latest_events"} {
			if _, err := tx.ExecContext(ctx, `UPDATE `+table+` AS t SET explanation = v.x, silenced_by = v.s
				FROM unnest($1::text[], $2::bytea[], $3::text[]) AS v(id, x, s) WHERE t.id = v.id`, ids, bodies, silenced); err != nil {
				return fmt.Errorf("store explanations: %w", err)
			}
		}
		return nil
	}
	for _, table := range []string{"events", "latest_events"} {
		st, err := tx.PrepareContext(ctx, "UPDATE "+table+" SET explanation = $1, silenced_by = $2 WHERE id = $3")
		if err != nil {
			return fmt.Errorf("store explanations: %w", err)
		}
		for i := range ids {
			if _, err := st.ExecContext(ctx, bodies[i], silenced[i], ids[i]); err != nil {
				st.Close()
				return fmt.Errorf("store explanation of %s: %w", ids[i], err)
			}
		}
		st.Close()
	}
	return nil
}
