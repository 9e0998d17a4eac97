package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

const (
	// defaultEventLimit and maxEventLimit bound what one ListEvents returns.
	defaultEventLimit = 1000
	maxEventLimit     = 10000
	// appendChunk bounds the events one statement carries, keeping
	// statements (and the server's memory for them) moderate for very large
	// calls; typical calls fit in one.
	appendChunk = 1000
)

// eventRow is one event ready for the database.
type eventRow struct {
	id, node, check string
	level           int32
	startedAt       int64
	body            []byte
	// ord is the event's position in its transaction, to break ties in
	// started_at: the later event wins, as it would in separate calls.
	ord int32
	// req is the index of the AppendEvents call the event came with, when
	// the group committer merges calls.
	req int
	// seq is the event's place in the event pipeline's order.
	seq int64
}

type nodeCheck struct{ node, check string }

// AppendEvents stores the events whose ids are new, in one transaction, and
// returns how many that was. The latest state of a node/check takes the
// newest new event unless the stored one started later: a replayed or
// delayed old result never hides a newer one.
//
// Concurrent calls may share one transaction (see groupCommit); each still
// either commits whole or fails. A call whose context ends mid-flight
// returns the context's error, but its events may have been stored: the
// caller retries and ids make that safe.
func (s *Store) AppendEvents(ctx context.Context, events []*unyov1.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	// Encode before the transaction, so that the database (on SQLite, its
	// single writer) is held only for the database work.
	rows := make([]eventRow, 0, len(events))
	for i, e := range events {
		if err := validateEvent(e); err != nil {
			return 0, fmt.Errorf("append %d events: event %d: %w", len(events), i, err)
		}
		body, err := proto.Marshal(e)
		if err != nil {
			return 0, fmt.Errorf("append %d events: encode event %q: %w", len(events), e.GetId(), err)
		}
		rows = append(rows, eventRow{
			id:        e.GetId(),
			node:      e.GetNode(),
			check:     e.GetCheck(),
			level:     int32(e.GetLevel()),
			startedAt: toNanos(e.GetStartedAt()),
			body:      body,
		})
	}
	var (
		n   int
		err error
	)
	if s.group != nil {
		n, err = s.group.do(ctx, rows)
	} else {
		var counts []int
		counts, err = s.appendTx(ctx, [][]eventRow{rows})
		if err == nil {
			n = counts[0]
		}
	}
	if err != nil {
		return 0, fmt.Errorf("append %d events: %w", len(events), err)
	}
	return n, nil
}

// appendTx stores the events of one or more calls in one transaction and
// returns how many new events each call had. An id repeated within or across
// calls counts for its first occurrence only.
func (s *Store) appendTx(ctx context.Context, calls [][]eventRow) ([]int, error) {
	total := 0
	for _, c := range calls {
		total += len(c)
	}
	rows := make([]eventRow, 0, total)
	seen := make(map[string]struct{}, total)
	for req, c := range calls {
		for _, r := range c {
			if _, dup := seen[r.id]; dup {
				continue
			}
			seen[r.id] = struct{}{}
			r.ord, r.req = int32(len(rows)), req
			rows = append(rows, r)
		}
	}
	// Id order: PostgreSQL writers then lock history rows in one global
	// order, which keeps deadlocks between them rare (inTx retries the
	// rest); SQLite walks its id index in order instead of at random.
	slices.SortFunc(rows, func(a, b eventRow) int { return strings.Compare(a.id, b.id) })
	counts := make([]int, len(calls))
	var (
		seqEnd   int64
		inserted []bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st := s.stmts(tx)
		// Numbers for the pipeline, in arrival order. Taking them from a
		// counter row locks it until commit, so transactions commit in
		// sequence order and the pipeline never passes an event that a
		// slower transaction commits later. Duplicates leave gaps.
		last, err := bumpWith(ctx, st, "event_seq", int64(len(rows)))
		if err != nil {
			return err
		}
		seqEnd = last
		for i := range rows {
			rows[i].seq = last - int64(len(rows)) + int64(rows[i].ord) + 1
		}
		if inserted, err = s.d.appendEvents(ctx, st, rows); err != nil {
			return err
		}
		clear(counts)
		for i, ok := range inserted {
			if ok {
				counts[rows[i].req]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Committed: record it before the callers acknowledge it to agents,
	// and hand the events to the pipeline, which reads them next.
	s.markAcked(seqEnd)
	recent := make([]recentEvent, 0, len(rows))
	for i, r := range rows {
		if inserted[i] {
			recent = append(recent, recentEvent{seq: r.seq, body: r.body})
		}
	}
	s.recent.add(seqEnd-int64(len(rows)), seqEnd, recent)
	return counts, nil
}

func validateEvent(e *unyov1.Event) error {
	switch {
	case e == nil:
		return errors.New("nil event")
	case e.GetId() == "":
		return errors.New("the event has no id")
	case e.GetNode() == "":
		return fmt.Errorf("event %q names no node", e.GetId())
	case e.GetCheck() == "":
		return fmt.Errorf("event %q names no check", e.GetId())
	}
	return nil
}

// insertEventQuery and upsertLatestQuery store one event (SQLite); they are
// hot queries (see stmtCache), prepared once per store.
const (
	insertEventQuery = `INSERT INTO events (id, node, check_name, level, started_at, body, seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`
	// The latest row refers to its event's history row for the body (see
	// latestRows); body is set only when that history row is pruned.
	upsertLatestQuery = `INSERT INTO latest_events (node, check_name, id, level, started_at, seq)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (node, check_name) DO UPDATE SET
			id = excluded.id, level = excluded.level,
			started_at = excluded.started_at, seq = excluded.seq, body = NULL
		WHERE excluded.started_at >= latest_events.started_at`
)

// appendEventsPrepared stores events one row at a time through prepared
// statements (SQLite) and reports which were new. In-process SQLite has no
// round trips to save, and modernc.org/sqlite binds parameters in time
// quadratic in their number, so multi-row statements are slower here.
func appendEventsPrepared(ctx context.Context, st *stmtCache, rows []eventRow) ([]bool, error) {
	ins, err := st.get(ctx, insertEventQuery)
	if err != nil {
		return nil, fmt.Errorf("insert history: %w", err)
	}
	rctx := rowContext(ctx)
	inserted := make([]bool, len(rows))
	// The newest new event per node/check.
	newest := make(map[nodeCheck]int, len(rows))
	for i, r := range rows {
		res, err := ins.ExecContext(rctx, r.id, r.node, r.check, r.level, r.startedAt, r.body, r.seq)
		if err != nil {
			return nil, fmt.Errorf("insert history: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("insert history: %w", err)
		} else if n == 0 {
			continue // seen before
		}
		inserted[i] = true
		k := nodeCheck{r.node, r.check}
		if j, ok := newest[k]; !ok || r.startedAt > rows[j].startedAt ||
			(r.startedAt == rows[j].startedAt && r.ord > rows[j].ord) {
			newest[k] = i
		}
	}
	if len(newest) == 0 {
		return inserted, nil
	}
	up, err := st.get(ctx, upsertLatestQuery)
	if err != nil {
		return nil, fmt.Errorf("update latest state: %w", err)
	}
	for _, i := range newest {
		r := rows[i]
		if _, err := up.ExecContext(rctx, r.node, r.check, r.id, r.level, r.startedAt, r.seq); err != nil {
			return nil, fmt.Errorf("update latest state: %w", err)
		}
	}
	return inserted, nil
}

// appendEventsUnnestSQL stores a batch passed as arrays in one statement
// (PostgreSQL) and returns the new ids: one round trip and one plan whatever
// the batch size. History
// rows are inserted in id order and latest rows in node/check order, so
// concurrent batches lock rows in the same order.
//
// A history row is inserted when no row has its id, not with ON CONFLICT:
// that makes every insertion speculative (an extra WAL record and a second
// pass over the unique index per event), and a duplicate cannot be
// inserted meanwhile, since appendTx holds the event_seq counter row,
// taken first, until commit: ingest transactions run one at a time.
const appendEventsUnnestSQL = `
WITH batch AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::int8[], $6::bytea[], $7::int4[], $8::int8[])
		AS b(id, node, check_name, level, started_at, body, ord, seq)
), ins AS (
	INSERT INTO events (id, node, check_name, level, started_at, body, seq)
	SELECT id, node, check_name, level, started_at, body, seq FROM batch b
	WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = b.id)
	ORDER BY id
	RETURNING id
), newest AS (
	SELECT DISTINCT ON (b.node, b.check_name) b.node, b.check_name, b.id, b.level, b.started_at, b.seq
	FROM batch b JOIN ins ON ins.id = b.id
	ORDER BY b.node, b.check_name, b.started_at DESC, b.ord DESC
), up AS (
	INSERT INTO latest_events (node, check_name, id, level, started_at, seq)
	SELECT node, check_name, id, level, started_at, seq FROM newest ORDER BY node, check_name
	ON CONFLICT (node, check_name) DO UPDATE SET
		id = excluded.id, level = excluded.level,
		started_at = excluded.started_at, seq = excluded.seq, body = NULL
	WHERE excluded.started_at >= latest_events.started_at
)
SELECT id FROM ins`

func appendEventsUnnest(ctx context.Context, st *stmtCache, rows []eventRow) ([]bool, error) {
	inserted := make([]bool, len(rows))
	for off := 0; off < len(rows); off += appendChunk {
		c := rows[off:min(off+appendChunk, len(rows))]
		var (
			ids, nodes, checks = make([]string, len(c)), make([]string, len(c)), make([]string, len(c))
			levels, ords       = make([]int32, len(c)), make([]int32, len(c))
			started, seqs      = make([]int64, len(c)), make([]int64, len(c))
			bodies             = make([][]byte, len(c))
			index              = make(map[string]int, len(c))
		)
		for i, r := range c {
			ids[i], nodes[i], checks[i] = r.id, r.node, r.check
			levels[i], ords[i], started[i], bodies[i], seqs[i] = r.level, r.ord, r.startedAt, r.body, r.seq
			index[r.id] = off + i
		}
		res, err := st.tx.QueryContext(ctx, appendEventsUnnestSQL,
			ids, nodes, checks, levels, started, bodies, ords, seqs)
		if err != nil {
			return nil, err
		}
		for res.Next() {
			var id string
			if err := res.Scan(&id); err != nil {
				res.Close()
				return nil, err
			}
			inserted[index[id]] = true
		}
		if err := res.Close(); err != nil {
			return nil, err
		}
		if err := res.Err(); err != nil {
			return nil, err
		}
	}
	return inserted, nil
}

// whereNodeCheck is the conditions on node and check_name that select the
// given ones (none for an empty name), with their arguments.
func whereNodeCheck(node, check string) (where []string, args []any) {
	if node != "" {
		args = append(args, node)
		where = append(where, fmt.Sprintf("node = $%d", len(args)))
	}
	if check != "" {
		args = append(args, check)
		where = append(where, fmt.Sprintf("check_name = $%d", len(args)))
	}
	return where, args
}

// GetEvent finds an event by id in the history, or else in the latest state
// (whose entries outlive pruned history).
func (s *Store) GetEvent(ctx context.Context, id string) (*unyov1.Event, error) {
	for _, table := range []string{"events", latestRows} {
		e, err := scanEvent(s.r.QueryRowContext(ctx, "SELECT "+eventColumns+" FROM "+withExplanations(table)+" WHERE id = $1 LIMIT 1", id))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get event %q: %w", id, err)
		}
		return e, nil
	}
	return nil, notFound("event", id)
}

// ListEvents returns the latest event per node/check, sorted by node and
// check, or with f.History every stored event, newest first. Limit defaults
// to 1000 and is capped at 10000.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]*unyov1.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultEventLimit
	}
	limit = min(limit, maxEventLimit)
	table, order := latestRows, "node, check_name"
	if f.History {
		table, order = "events", "started_at DESC, id DESC"
	}
	var q strings.Builder
	where, args := whereNodeCheck(f.Node, f.Check)
	if len(f.Levels) > 0 {
		var in strings.Builder
		placeholders(&in, len(args)+1, len(f.Levels))
		for _, l := range f.Levels {
			args = append(args, int32(l))
		}
		where = append(where, "level IN ("+in.String()+")")
	}
	q.WriteString("SELECT " + eventColumns + " FROM " + withExplanations(table))
	if len(where) > 0 {
		q.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	args = append(args, limit)
	fmt.Fprintf(&q, " ORDER BY %s LIMIT $%d", order, len(args))

	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	events, err := scanAll(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return events, nil
}

// eventColumns are what scanEvent reads from withExplanations: the stored
// event and what the event pipeline added to it.
const eventColumns = "body, explanation, COALESCE(silenced_by, '')"

// latestRows is the latest state with each row's body, from the history
// row it refers to or, once that was pruned, its own (migration 0022): an
// event's body is written once.
const latestRows = "latest_event_rows"

// withExplanations joins an event table (events or latestRows) with the
// explanations the pipeline wrote, which it keeps in a table of their own
// so that an event row is written once (see writeExplanations).
func withExplanations(table string) string {
	return table + " LEFT JOIN explanations USING (seq)"
}

func scanEvent(row scanner) (*unyov1.Event, error) {
	var body, explanation []byte
	var silencedBy string
	if err := row.Scan(&body, &explanation, &silencedBy); err != nil {
		return nil, err
	}
	e := &unyov1.Event{}
	if err := proto.Unmarshal(body, e); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if len(explanation) > 0 {
		e.Explanation = new(unyov1.Explanation)
		if err := proto.Unmarshal(explanation, e.Explanation); err != nil {
			return nil, fmt.Errorf("decode the explanation of event %q: %w", e.GetId(), err)
		}
	}
	e.SilencedBy = silencedBy
	return e, nil
}

// pruneRanked is the history beyond the newest $1 events of each node and
// check, among events the pipeline has processed ($2 is its cursor): every
// pair's (pruneAll) or only the pairs that got events after $3.
const (
	pruneRanked = `
	SELECT seq FROM (
		SELECT e.seq, ROW_NUMBER() OVER (
			PARTITION BY e.node, e.check_name ORDER BY e.started_at DESC, e.id DESC) AS rn
		FROM events e %s
	) AS ranked
	WHERE rn > $1 AND seq <= $2`
	pruneAll = "WHERE $3 >= 0"
	// The pairs first, then each one's events through the (node,
	// check_name, started_at) index.
	pruneTouched = "JOIN (SELECT DISTINCT node, check_name FROM events WHERE seq > $3) AS t ON e.node = t.node AND e.check_name = t.check_name"
)

// PruneEvents deletes history beyond the newest keep events per node/check
// and returns how many it deleted. The latest state is left alone.
func (s *Store) PruneEvents(ctx context.Context, keep int, after int64) (removed int, through int64, err error) {
	if keep < 0 {
		return 0, after, fmt.Errorf("prune events: keep %d is negative", keep)
	}
	var n int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		// Events the pipeline has not processed yet stay, however many; the
		// pairs they belong to are pruned once a later pass finds them
		// after this pass's cursor.
		if err := tx.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'pipeline_cursor'").Scan(&through); err != nil {
			return err
		}
		which := pruneTouched
		if after <= 0 {
			which = pruneAll
		}
		rows, err := tx.QueryContext(ctx, "DELETE FROM events WHERE seq IN ("+fmt.Sprintf(pruneRanked, which)+") RETURNING seq", keep, through, after)
		if err != nil {
			return err
		}
		seqs, err := scanAll(rows, func(row scanner) (seq int64, err error) { return seq, row.Scan(&seq) })
		if err != nil {
			return err
		}
		if n = int64(len(seqs)); n == 0 {
			return nil
		}
		if after > 0 {
			// Explanations go with their events, except the latest state's.
			for chunk := range slices.Chunk(seqs, 500) {
				args := make([]any, len(chunk))
				marks := make([]string, len(chunk))
				for i, seq := range chunk {
					args[i], marks[i] = seq, "$"+strconv.Itoa(i+1)
				}
				in := strings.Join(marks, ", ")
				if _, err := tx.ExecContext(ctx, "DELETE FROM explanations WHERE seq IN ("+in+
					") AND seq NOT IN (SELECT seq FROM latest_events WHERE seq IN ("+in+"))", args...); err != nil {
					return err
				}
			}
			return nil
		}
		// A full pass also collects the explanations of latest entries
		// replaced or forgotten since their history went.
		_, err = tx.ExecContext(ctx, `
		DELETE FROM explanations
		WHERE NOT EXISTS (SELECT 1 FROM events WHERE events.seq = explanations.seq)
			AND seq NOT IN (SELECT seq FROM latest_events)`)
		return err
	})
	if err != nil {
		return 0, after, fmt.Errorf("prune events to the newest %d per node/check: %w", keep, err)
	}
	return int(n), through, nil
}
