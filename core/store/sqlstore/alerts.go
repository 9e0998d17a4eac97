package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

const alertClosed = int32(unyov1.AlertState_ALERT_STATE_CLOSED)

func decodeAlert(body []byte) (*unyov1.Alert, error) {
	a := new(unyov1.Alert)
	if err := proto.Unmarshal(body, a); err != nil {
		return nil, fmt.Errorf("decode alert: %w", err)
	}
	return a, nil
}

func putAlertTx(ctx context.Context, tx *sql.Tx, a *unyov1.Alert) error {
	b, err := proto.Marshal(a)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO alerts (id, key, state, level, node, check_name, first_seen, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, level = excluded.level, body = excluded.body`,
		a.GetId(), a.GetKey(), int32(a.GetState()), int32(a.GetLevel()), a.GetNode(), a.GetCheck(), toNanos(a.GetFirstSeen()), b)
	if err != nil {
		return fmt.Errorf("store alert %s: %w", a.GetId(), err)
	}
	return nil
}

// applyAlertOps runs the alert operations in order. On PostgreSQL the
// active alerts of all their keys are read in one statement and written in
// one, instead of two round trips per operation.
func (s *Store) applyAlertOps(ctx context.Context, tx *sql.Tx, ops []store.AlertOp) error {
	if len(ops) == 0 {
		return nil
	}
	if s.d.name != "postgres" {
		for _, op := range ops {
			if err := s.applyAlertOp(ctx, tx, op); err != nil {
				return err
			}
		}
		return nil
	}
	keys := make([]string, 0, len(ops))
	seen := map[string]bool{}
	for _, op := range ops {
		if !seen[op.Key] {
			seen[op.Key] = true
			keys = append(keys, op.Key)
		}
	}
	active := map[string]*unyov1.Alert{}
	rows, err := tx.QueryContext(ctx, "SELECT body FROM alerts WHERE key = ANY($1::text[]) AND state != $2 ORDER BY key FOR UPDATE", keys, alertClosed)
	if err != nil {
		return fmt.Errorf("read alerts: %w", err)
	}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			rows.Close()
			return fmt.Errorf("read alerts: %w", err)
		}
		a, err := decodeAlert(body)
		if err != nil {
			rows.Close()
			return err
		}
		active[a.GetKey()] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read alerts: %w", err)
	}
	existed := map[string]bool{}
	for _, a := range active {
		existed[a.GetId()] = true
	}
	// Changed alerts by id, in the order they were first changed.
	var order []string
	changed := map[string]*unyov1.Alert{}
	for _, op := range ops {
		next, err := op.Apply(active[op.Key])
		if err != nil {
			return fmt.Errorf("alert %q: %w", op.Key, err)
		}
		if next == nil {
			continue
		}
		if _, ok := changed[next.GetId()]; !ok {
			order = append(order, next.GetId())
		}
		changed[next.GetId()] = next
		active[op.Key] = next
		if next.GetState() == unyov1.AlertState_ALERT_STATE_CLOSED {
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
		if err := putAlertsUnnest(ctx, tx, batch); err != nil {
			return err
		}
	}
	return nil
}

func putAlertsUnnest(ctx context.Context, tx *sql.Tx, as []*unyov1.Alert) error {
	if len(as) == 0 {
		return nil
	}
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

// applyAlertOp runs one alert operation on the active alert with its key,
// read and written in the pipeline's transaction.
func (s *Store) applyAlertOp(ctx context.Context, tx *sql.Tx, op store.AlertOp) error {
	var cur *unyov1.Alert
	var body []byte
	err := tx.QueryRowContext(ctx, "SELECT body FROM alerts WHERE key = $1 AND state != $2"+s.d.forUpdate, op.Key, alertClosed).Scan(&body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("read alert %q: %w", op.Key, err)
	default:
		if cur, err = decodeAlert(body); err != nil {
			return err
		}
	}
	next, err := op.Apply(cur)
	if err != nil {
		return fmt.Errorf("alert %q: %w", op.Key, err)
	}
	if next == nil {
		return nil
	}
	return putAlertTx(ctx, tx, next)
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
	defer rows.Close()
	var out []*unyov1.Alert
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("list alerts: %w", err)
		}
		a, err := decodeAlert(body)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
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

func insertHook(ctx context.Context, tx *sql.Tx, h store.HookJob) error {
	body, err := h.Body()
	if err != nil {
		return fmt.Errorf("build the body of hook %s: %w", h.Key, err)
	}
	hookMsg := h.Hook
	if hookMsg == nil {
		hookMsg = &unyov1.ApiHookAction{}
	}
	hook, err := proto.Marshal(hookMsg)
	if err != nil {
		return err
	}
	if hook == nil {
		hook = []byte{} // the column is NOT NULL
	}
	var plugin []byte // NULL for an api_hook
	if h.Plugin != nil {
		if plugin, err = proto.Marshal(h.Plugin); err != nil {
			return err
		}
		if plugin == nil {
			plugin = []byte{}
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO hooks (key, rule, event_id, created_at, hook, body, plugin) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (key) DO NOTHING`, h.Key, h.Rule, h.EventID, now(), hook, body, plugin)
	if err != nil {
		return fmt.Errorf("queue hook %s: %w", h.Key, err)
	}
	return nil
}

// DueHooks returns queued hook jobs, oldest first.
func (s *Store) DueHooks(ctx context.Context, limit int) ([]store.PendingHook, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT key, rule, event_id, hook, body, plugin FROM hooks ORDER BY created_at, key LIMIT $1", limit)
	if err != nil {
		return nil, fmt.Errorf("read hook outbox: %w", err)
	}
	defer rows.Close()
	var out []store.PendingHook
	for rows.Next() {
		var p store.PendingHook
		var hook, plugin []byte
		if err := rows.Scan(&p.Key, &p.Rule, &p.EventID, &hook, &p.Body, &plugin); err != nil {
			return nil, fmt.Errorf("read hook outbox: %w", err)
		}
		p.Hook = new(unyov1.ApiHookAction)
		if err := proto.Unmarshal(hook, p.Hook); err != nil {
			return nil, fmt.Errorf("decode hook %s: %w", p.Key, err)
		}
		if plugin != nil {
			p.Plugin = new(unyov1.PluginAction)
			if err := proto.Unmarshal(plugin, p.Plugin); err != nil {
				return nil, fmt.Errorf("decode the plugin action of hook %s: %w", p.Key, err)
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// FinishHook removes a delivered (or given up) job and records the outcome
// in its event's explanation.
func (s *Store) FinishHook(ctx context.Context, key string, step *unyov1.ExplanationStep) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var eventID string
		err := tx.QueryRowContext(ctx, "DELETE FROM hooks WHERE key = $1 RETURNING event_id", key).Scan(&eventID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // finished already (by a replica that had the lease before)
		}
		if err != nil {
			return fmt.Errorf("finish hook %s: %w", key, err)
		}
		if step == nil {
			return nil
		}
		return s.writeExplanations(ctx, tx, []store.Explained{{ID: eventID, Explanation: &unyov1.Explanation{Steps: []*unyov1.ExplanationStep{step}}, Append: true, KeepOutcome: true}})
	})
}
