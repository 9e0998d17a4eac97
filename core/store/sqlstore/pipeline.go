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

// eventHotQueries are the statements the event path runs in every
// transaction of ingest and the pipeline (see stmtCache); on PostgreSQL
// most of them are single statements over arrays instead.
func eventHotQueries(d *dialect) []string {
	both := []string{bumpQuery, moveCursorQuery}
	if d.name == "postgres" {
		return both
	}
	return append(both, insertEventQuery, upsertLatestQuery, pipelineChecksInsert, explanationInsert,
		alertUpsert, activeAlertsQuery, countMatchQuery)
}

// NextEvents returns stored events with a sequence above after, oldest
// first: from the events this store committed last when it holds them all
// (see recentEvents), or else from the database.
func (s *Store) NextEvents(ctx context.Context, after int64, limit int) ([]store.SeqEvent, error) {
	if recent, ok := s.recent.next(after, limit); ok {
		out := make([]store.SeqEvent, len(recent))
		for i, r := range recent {
			e := new(unyov1.Event)
			if err := proto.Unmarshal(r.body, e); err != nil {
				return nil, fmt.Errorf("decode event at %d: %w", r.seq, err)
			}
			out[i] = store.SeqEvent{Seq: r.seq, Event: e}
		}
		return out, nil
	}
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
		st := s.stmts(tx)
		if err := moveCursor(ctx, st, c.ExpectCursor, c.Cursor); err != nil {
			return err
		}
		if err := s.writePipelineChecks(ctx, st, c); err != nil {
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
		applied, err := s.applyAlertOps(ctx, st, c.Alerts, keep)
		if err != nil {
			return err
		}
		for _, j := range c.Actions {
			if err := insertAction(ctx, tx, j, applied); err != nil {
				return err
			}
		}
		if err := s.writeExplanations(ctx, st, c.Explained); err != nil {
			return err
		}
		return s.countMatchesTx(ctx, st, c.RuleMatches, c.MaintenanceSilenced)
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return fmt.Errorf("commit pipeline step to %d: %w", c.Cursor, err)
	}
	return nil
}

// moveCursorQuery moves the pipeline's cursor if it is still where the
// commit expects it; on PostgreSQL the update locks the row, and a replica
// that moved it meanwhile leaves nothing to update.
const moveCursorQuery = "UPDATE counters SET value = $1 WHERE name = 'pipeline_cursor' AND value = $2"

// moveCursor moves the pipeline's cursor from expect to to, or fails with
// store.ErrConflict when another replica moved it.
func moveCursor(ctx context.Context, st *stmtCache, expect, to int64) error {
	q, err := st.get(ctx, moveCursorQuery)
	if err != nil {
		return fmt.Errorf("move cursor: %w", err)
	}
	res, err := q.ExecContext(ctx, to, expect)
	if err != nil {
		return fmt.Errorf("move cursor: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("move cursor: %w", err)
	} else if n == 1 {
		return nil
	}
	var found int64
	if err := st.tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'pipeline_cursor'").Scan(&found); err != nil {
		return fmt.Errorf("read pipeline cursor: %w", err)
	}
	return fmt.Errorf("%w (expected %d, found %d)", store.ErrConflict, expect, found)
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

// pipelineChecksInsert writes one node/check's row (SQLite; a hot query).
const pipelineChecksInsert = `INSERT INTO pipeline_checks (node, check_name, occ_level, occ_count, issue_level, issued_at)
			VALUES ($1, $2, $3, $4, $5, $6)` + pipelineChecksUpsert

func (s *Store) writePipelineChecks(ctx context.Context, st *stmtCache, c *store.PipelineCommit) error {
	tx := st.tx
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
		ins, err := st.get(ctx, pipelineChecksInsert)
		if err != nil {
			return fmt.Errorf("store occurrences: %w", err)
		}
		rctx := rowContext(ctx)
		for i := range nodes {
			if _, err := ins.ExecContext(rctx, nodes[i], checks[i], levels[i], counts[i], issLevels[i], issAt[i]); err != nil {
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

// writeExplanations stores the pipeline's explanations in their own
// table, keyed by the event's seq: an event's explanation is one insert at
// the end of that table, and its history and latest rows are never
// rewritten. Steps reported later (Append: a group's flush, an action's
// delivery) are merged into the stored row one event at a time; they are
// few.
func (s *Store) writeExplanations(ctx context.Context, st *stmtCache, ex []store.Explained) error {
	tx := st.tx
	var rows []explanationRow
	for _, e := range ex {
		seq := e.Seq
		if seq == 0 {
			var found bool
			var err error
			if seq, found, err = eventSeq(ctx, tx, e.ID); err != nil {
				return err
			} else if !found {
				continue // forgotten and pruned: nothing to explain
			}
		}
		if !e.Append {
			b, err := proto.Marshal(e.Explanation)
			if err != nil {
				return fmt.Errorf("encode the explanation of %s: %w", e.ID, err)
			}
			rows = append(rows, explanationRow{seq: seq, silencedBy: e.SilencedBy, body: b})
			continue
		}
		// Earlier rows of this commit first: the merge reads them.
		if err := s.insertExplanations(ctx, st, rows); err != nil {
			return err
		}
		rows = rows[:0]
		if err := appendExplanation(ctx, tx, seq, e); err != nil {
			return err
		}
	}
	return s.insertExplanations(ctx, st, rows)
}

type explanationRow struct {
	seq        int64
	silencedBy string
	body       []byte
}

// explanationUpsert replaces an explanation stored for the same event
// (only a commit applied twice by hand would have one).
const explanationUpsert = `
	ON CONFLICT (seq) DO UPDATE SET silenced_by = excluded.silenced_by, explanation = excluded.explanation`

// explanationsUnnest inserts the explanations passed as three arrays
// (PostgreSQL), rows named r.
const explanationsUnnest = `INSERT INTO explanations (seq, silenced_by, explanation)
	SELECT * FROM unnest($1::int8[], $2::text[], $3::bytea[]) AS r(seq, silenced_by, explanation)`

// explanationInsert writes one explanation (SQLite; a hot query).
const explanationInsert = `INSERT INTO explanations (seq, silenced_by, explanation) VALUES ($1, $2, $3)` + explanationUpsert

func (s *Store) insertExplanations(ctx context.Context, st *stmtCache, rows []explanationRow) error {
	if len(rows) == 0 {
		return nil
	}
	if s.d.name == "postgres" {
		// One statement over arrays: a round trip per event would bound
		// the pipeline by the network. A seq twice would fail the upsert:
		// the later explanation wins.
		seqs, silenced, bodies := make([]int64, 0, len(rows)), make([]string, 0, len(rows)), make([][]byte, 0, len(rows))
		at := make(map[int64]int, len(rows))
		for _, r := range rows {
			if i, ok := at[r.seq]; ok {
				silenced[i], bodies[i] = r.silencedBy, r.body
				continue
			}
			at[r.seq] = len(seqs)
			seqs, silenced, bodies = append(seqs, r.seq), append(silenced, r.silencedBy), append(bodies, r.body)
		}
		// Rows are inserted where none has their seq, not with ON CONFLICT,
		// which makes every insertion speculative (a second pass over the
		// key and an extra WAL record per row) for a conflict that only a
		// commit applied twice has; then the upsert runs over them all.
		// Commits run one at a time behind the pipeline cursor, so no other
		// transaction inserts these seqs meanwhile.
		res, err := st.tx.ExecContext(ctx, explanationsUnnest+`
			WHERE NOT EXISTS (SELECT 1 FROM explanations x WHERE x.seq = r.seq)`, seqs, silenced, bodies)
		if err != nil {
			return fmt.Errorf("store explanations: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == int64(len(seqs)) {
			return nil
		}
		if _, err := st.tx.ExecContext(ctx, explanationsUnnest+explanationUpsert, seqs, silenced, bodies); err != nil {
			return fmt.Errorf("store explanations: %w", err)
		}
		return nil
	}
	// SQLite: prepared, a row at a time (see appendEventsPrepared).
	ins, err := st.get(ctx, explanationInsert)
	if err != nil {
		return fmt.Errorf("store explanations: %w", err)
	}
	rctx := rowContext(ctx)
	for _, r := range rows {
		if _, err := ins.ExecContext(rctx, r.seq, r.silencedBy, r.body); err != nil {
			return fmt.Errorf("store the explanation of event %d: %w", r.seq, err)
		}
	}
	return nil
}

// appendExplanation adds e's steps to the stored explanation of event seq
// and, unless e.KeepOutcome, replaces its outcome.
func appendExplanation(ctx context.Context, tx *sql.Tx, seq int64, e store.Explained) error {
	var old []byte
	err := tx.QueryRowContext(ctx, "SELECT explanation FROM explanations WHERE seq = $1", seq).Scan(&old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read explanation of %s: %w", e.ID, err)
	}
	merged := new(unyov1.Explanation)
	if err := proto.Unmarshal(old, merged); err != nil {
		return fmt.Errorf("decode explanation of %s: %w", e.ID, err)
	}
	merged.Steps = append(merged.Steps, e.Explanation.GetSteps()...)
	if !e.KeepOutcome {
		merged.Outcome, merged.ProcessedAt = e.Explanation.GetOutcome(), e.Explanation.GetProcessedAt()
	}
	b, err := proto.Marshal(merged)
	if err != nil {
		return fmt.Errorf("encode the explanation of %s: %w", e.ID, err)
	}
	// Appended steps come after silencing would have applied.
	if _, err := tx.ExecContext(ctx, `INSERT INTO explanations (seq, silenced_by, explanation) VALUES ($1, '', $2)`+explanationUpsert, seq, b); err != nil {
		return fmt.Errorf("store the explanation of %s: %w", e.ID, err)
	}
	return nil
}

// eventSeq finds an event's seq by id: in the history, or else in the
// latest state, whose entries outlive pruned history.
func eventSeq(ctx context.Context, tx *sql.Tx, id string) (seq int64, found bool, err error) {
	for _, table := range []string{"events", "latest_events"} {
		err := tx.QueryRowContext(ctx, "SELECT seq FROM "+table+" WHERE id = $1 LIMIT 1", id).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("find event %s: %w", id, err)
		}
		return seq, true, nil
	}
	return 0, false, nil
}
