package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/alerts"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

const alertClosed = int32(unyov1.AlertState_ALERT_STATE_CLOSED)

func decodeAlert(body []byte) (*unyov1.Alert, error) {
	a := new(unyov1.Alert)
	if err := proto.Unmarshal(body, a); err != nil {
		return nil, fmt.Errorf("decode alert: %w", err)
	}
	return a, nil
}

const alertUpsert = `INSERT INTO alerts (id, key, state, level, node, check_name, first_seen, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, level = excluded.level, body = excluded.body`

func putAlertTx(ctx context.Context, tx *sql.Tx, a *unyov1.Alert) error {
	b, err := proto.Marshal(a)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, alertUpsert,
		a.GetId(), a.GetKey(), int32(a.GetState()), int32(a.GetLevel()), a.GetNode(), a.GetCheck(), toNanos(a.GetFirstSeen()), b)
	if err != nil {
		return fmt.Errorf("store alert %s: %w", a.GetId(), err)
	}
	return nil
}

// applyAlertOps applies the decision's alert operations in order with
// alerts.Apply, writes each outcome into its explanation step, and returns
// the alert each operation produced (nil where none), as it was right after
// that operation. The active alerts of all keys are read in one statement
// and each changed alert is written once, instead of two statements per
// operation: alert writes were the pipeline's largest cost.
func (s *Store) applyAlertOps(ctx context.Context, st *stmtCache, ops []pipeline.AlertOp, keep []bool) ([]*unyov1.Alert, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(ops))
	seen := map[string]bool{}
	for _, op := range ops {
		if !seen[op.Key] {
			seen[op.Key] = true
			keys = append(keys, op.Key)
		}
	}
	active, err := s.activeAlerts(ctx, st, keys)
	if err != nil {
		return nil, err
	}
	existed := make(map[string]bool, len(active))
	for _, a := range active {
		existed[a.GetId()] = true
	}
	results := make([]*unyov1.Alert, len(ops))
	// Changed alerts by id, in the order they were first changed.
	var order []string
	changed := map[string]*unyov1.Alert{}
	for i, op := range ops {
		next, outcome, err := alerts.Apply(active[op.Key], op.Op)
		if err != nil {
			return nil, fmt.Errorf("alert %q: %w", op.Key, err)
		}
		if op.Step != nil {
			op.Step.Outcome = outcome
		}
		if next == nil {
			continue
		}
		results[i] = next
		if keep[i] {
			// A later operation may change next in place; the action body
			// shows the alert as this one left it.
			results[i] = proto.Clone(next).(*unyov1.Alert)
		}
		if _, ok := changed[next.GetId()]; !ok {
			order = append(order, next.GetId())
		}
		changed[next.GetId()] = next
		active[op.Key] = next
		if !alerts.Active(next) {
			delete(active, op.Key)
		}
	}
	// Existing alerts first: one closed here frees its key for a new one.
	var updates, inserts []*unyov1.Alert
	for _, id := range order {
		if existed[id] {
			updates = append(updates, changed[id])
		} else {
			inserts = append(inserts, changed[id])
		}
	}
	for _, batch := range [][]*unyov1.Alert{updates, inserts} {
		if err := s.putAlerts(ctx, st, batch); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// activeAlertsQuery reads the active alerts of the keys in a JSON array
// (SQLite; a hot query): one statement whatever the number of keys, so
// that it is prepared once instead of parsed with every IN list. Keys are
// valid UTF-8 (they are proto strings), so JSON carries them unchanged.
// The literal state lets SQLite use the partial index of active keys.
var activeAlertsQuery = fmt.Sprintf("SELECT body FROM alerts WHERE state != %d AND key IN (SELECT value FROM json_each($1))", alertClosed)

// activeAlerts reads the active alerts of keys, by key, locking them on
// PostgreSQL.
func (s *Store) activeAlerts(ctx context.Context, st *stmtCache, keys []string) (map[string]*unyov1.Alert, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if s.d.name == "postgres" {
		rows, err = st.tx.QueryContext(ctx, "SELECT body FROM alerts WHERE key = ANY($1::text[]) AND state != $2 ORDER BY key FOR UPDATE", keys, alertClosed)
	} else {
		var q *sql.Stmt
		var list []byte
		if q, err = st.get(ctx, activeAlertsQuery); err == nil {
			list, err = json.Marshal(keys)
		}
		if err == nil {
			rows, err = q.QueryContext(ctx, string(list))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read alerts: %w", err)
	}
	as, err := scanAll(rows, scanAlert)
	if err != nil {
		return nil, fmt.Errorf("read alerts: %w", err)
	}
	active := make(map[string]*unyov1.Alert, len(keys))
	for _, a := range as {
		active[a.GetKey()] = a
	}
	return active, nil
}

// scanAlert reads an alert from a row of its body.
func scanAlert(row scanner) (*unyov1.Alert, error) {
	var body []byte
	if err := row.Scan(&body); err != nil {
		return nil, err
	}
	return decodeAlert(body)
}

// putAlerts writes alerts: one statement on PostgreSQL, one prepared
// statement on SQLite.
func (s *Store) putAlerts(ctx context.Context, st *stmtCache, as []*unyov1.Alert) error {
	if len(as) == 0 {
		return nil
	}
	if s.d.name == "postgres" {
		return putAlertsUnnest(ctx, st.tx, as)
	}
	up, err := st.get(ctx, alertUpsert)
	if err != nil {
		return fmt.Errorf("store alerts: %w", err)
	}
	rctx := rowContext(ctx)
	for _, a := range as {
		b, err := proto.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := up.ExecContext(rctx, a.GetId(), a.GetKey(), int32(a.GetState()), int32(a.GetLevel()), a.GetNode(), a.GetCheck(), toNanos(a.GetFirstSeen()), b); err != nil {
			return fmt.Errorf("store alert %s: %w", a.GetId(), err)
		}
	}
	return nil
}

func putAlertsUnnest(ctx context.Context, tx *sql.Tx, as []*unyov1.Alert) error {
	var (
		ids, keys, nodes, checks []string
		states, levels           []int32
		firsts                   []int64
		bodies                   [][]byte
	)
	for _, a := range as {
		b, err := proto.Marshal(a)
		if err != nil {
			return err
		}
		ids, keys, nodes, checks = append(ids, a.GetId()), append(keys, a.GetKey()), append(nodes, a.GetNode()), append(checks, a.GetCheck())
		states, levels = append(states, int32(a.GetState())), append(levels, int32(a.GetLevel()))
		firsts, bodies = append(firsts, toNanos(a.GetFirstSeen())), append(bodies, b)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, key, state, level, node, check_name, first_seen, body)
		SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::int4[], $5::text[], $6::text[], $7::int8[], $8::bytea[])
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, level = excluded.level, body = excluded.body`,
		ids, keys, states, levels, nodes, checks, firsts, bodies)
	if err != nil {
		return fmt.Errorf("store %d alerts: %w", len(as), err)
	}
	return nil
}

// ListAlerts returns alerts matching f; without states, every alert but
// closed ones.
func (s *Store) ListAlerts(ctx context.Context, f store.AlertFilter) ([]*unyov1.Alert, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Node != "" {
		where = append(where, "node = "+arg(f.Node))
	}
	if f.Check != "" {
		where = append(where, "check_name = "+arg(f.Check))
	}
	if len(f.States) == 0 {
		where = append(where, "state != "+arg(alertClosed))
	} else {
		var in []string
		for _, st := range f.States {
			in = append(in, arg(int32(st)))
		}
		where = append(where, "state IN ("+strings.Join(in, ", ")+")")
	}
	if len(f.Levels) > 0 {
		var in []string
		for _, l := range f.Levels {
			in = append(in, arg(int32(l)))
		}
		where = append(where, "level IN ("+strings.Join(in, ", ")+")")
	}
	limit := f.Limit
	if limit <= 0 || limit > maxEventLimit {
		limit = defaultEventLimit
	}
	q := "SELECT body FROM alerts WHERE " + strings.Join(where, " AND ") + " ORDER BY level DESC, first_seen LIMIT " + arg(limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	out, err := scanAll(rows, scanAlert)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return out, nil
}

// GetAlert returns one alert by id.
func (s *Store) GetAlert(ctx context.Context, id string) (*unyov1.Alert, error) {
	var body []byte
	err := s.r.QueryRowContext(ctx, "SELECT body FROM alerts WHERE id = $1", id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("alert", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get alert %q: %w", id, err)
	}
	return decodeAlert(body)
}

// UpdateAlert changes one alert in a transaction; fn's error aborts it.
func (s *Store) UpdateAlert(ctx context.Context, id string, fn func(*unyov1.Alert) error) (*unyov1.Alert, error) {
	var out *unyov1.Alert
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var body []byte
		err := tx.QueryRowContext(ctx, "SELECT body FROM alerts WHERE id = $1"+s.d.forUpdate, id).Scan(&body)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("alert", id)
		}
		if err != nil {
			return err
		}
		a, err := decodeAlert(body)
		if err != nil {
			return err
		}
		if err := fn(a); err != nil {
			return err
		}
		out = a
		return putAlertTx(ctx, tx, a)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
