package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// Event rules and maintenance records share the objects table: a kind, a
// name, the message, and a matched count the pipeline adds to.
const (
	kindRule        = "EventRule"
	kindMaintenance = "Maintenance"
)

// counter reads a named counter, locking it for the transaction on PostgreSQL.
func (s *Store) counter(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = $1"+s.d.forUpdate, name).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read counter %s: %w", name, err)
	}
	return v, nil
}

func bump(ctx context.Context, tx *sql.Tx, name string, by int64) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, "UPDATE counters SET value = value + $1 WHERE name = $2 RETURNING value", by, name).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("advance counter %s: %w", name, err)
	}
	return v, nil
}

func (s *Store) deleteObject(ctx context.Context, kind, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM objects WHERE kind = $1 AND name = $2", kind, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound(kind, name)
		}
		_, err = bump(ctx, tx, "rules_revision", 1)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("delete %s %q: %w", kind, name, err)
	}
	return err
}

// objectRows reads objects of a kind (one by name, or all sorted by name).
func (s *Store) objectRows(ctx context.Context, kind, name string, decode func(body []byte, created, updated, matched int64) error) error {
	q := "SELECT body, created_at, updated_at, matched FROM objects WHERE kind = $1"
	args := []any{kind}
	if name != "" {
		q += " AND name = $2"
		args = append(args, name)
	}
	rows, err := s.r.QueryContext(ctx, q+" ORDER BY name", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var body []byte
		var created, updated, matched int64
		if err := rows.Scan(&body, &created, &updated, &matched); err != nil {
			return err
		}
		if err := decode(body, created, updated, matched); err != nil {
			return err
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if name != "" && !found {
		return notFound(kind, name)
	}
	return nil
}

func ruleUserPart(m proto.Message) proto.Message {
	r := proto.Clone(m).(*unyov1.EventRule)
	r.Revision, r.CreatedAt, r.UpdatedAt, r.Matched = 0, nil, nil, 0
	return r
}

// PutEventRule creates or replaces an event rule.
func (s *Store) PutEventRule(ctx context.Context, r *unyov1.EventRule) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: r}})
}

func stampRule(m proto.Message, created, updated int64) {
	r := m.(*unyov1.EventRule)
	r.CreatedAt, r.UpdatedAt, r.Matched = fromNanos(created), fromNanos(updated), 0
}

// DeleteEventRule removes an event rule.
func (s *Store) DeleteEventRule(ctx context.Context, name string) error {
	return s.deleteObject(ctx, kindRule, name)
}

func (s *Store) rules(ctx context.Context, name string) ([]*unyov1.EventRule, error) {
	var out []*unyov1.EventRule
	err := s.objectRows(ctx, kindRule, name, func(body []byte, created, updated, matched int64) error {
		r := new(unyov1.EventRule)
		if err := proto.Unmarshal(body, r); err != nil {
			return fmt.Errorf("decode event rule: %w", err)
		}
		r.CreatedAt, r.UpdatedAt, r.Matched = fromNanos(created), fromNanos(updated), matched
		out = append(out, r)
		return nil
	})
	return out, err
}

// GetEventRule returns one event rule.
func (s *Store) GetEventRule(ctx context.Context, name string) (*unyov1.EventRule, error) {
	rs, err := s.rules(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get event rule %q: %w", name, err)
	}
	return rs[0], nil
}

// ListEventRules returns every event rule sorted by name.
func (s *Store) ListEventRules(ctx context.Context) ([]*unyov1.EventRule, error) {
	rs, err := s.rules(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list event rules: %w", err)
	}
	return rs, nil
}

func maintenanceUserPart(m proto.Message) proto.Message {
	r := proto.Clone(m).(*unyov1.Maintenance)
	r.CreatedAt, r.Silenced = nil, 0
	return r
}

// PutMaintenance creates or replaces a maintenance record. ended_at and
// ended_by stay as stored unless the new record sets them.
func (s *Store) PutMaintenance(ctx context.Context, m *unyov1.Maintenance) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: m}})
}

func stampMaintenance(msg proto.Message, created, _ int64) {
	r := msg.(*unyov1.Maintenance)
	r.CreatedAt, r.Silenced = fromNanos(created), 0
}

// DeleteMaintenance removes a maintenance record.
func (s *Store) DeleteMaintenance(ctx context.Context, name string) error {
	return s.deleteObject(ctx, kindMaintenance, name)
}

func (s *Store) maintenances(ctx context.Context, name string) ([]*unyov1.Maintenance, error) {
	var out []*unyov1.Maintenance
	err := s.objectRows(ctx, kindMaintenance, name, func(body []byte, created, _, matched int64) error {
		m := new(unyov1.Maintenance)
		if err := proto.Unmarshal(body, m); err != nil {
			return fmt.Errorf("decode maintenance: %w", err)
		}
		m.CreatedAt, m.Silenced = fromNanos(created), matched
		out = append(out, m)
		return nil
	})
	return out, err
}

// GetMaintenance returns one maintenance record.
func (s *Store) GetMaintenance(ctx context.Context, name string) (*unyov1.Maintenance, error) {
	ms, err := s.maintenances(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get maintenance %q: %w", name, err)
	}
	return ms[0], nil
}

// ListMaintenance returns every maintenance record sorted by name.
func (s *Store) ListMaintenance(ctx context.Context) ([]*unyov1.Maintenance, error) {
	ms, err := s.maintenances(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list maintenance: %w", err)
	}
	return ms, nil
}

// EndMaintenance ends an open maintenance record at at.
func (s *Store) EndMaintenance(ctx context.Context, name, by string, at time.Time) (*unyov1.Maintenance, error) {
	var out *unyov1.Maintenance
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.counter(ctx, tx, "rules_revision"); err != nil {
			return err
		}
		var body []byte
		var created, matched int64
		err := tx.QueryRowContext(ctx, "SELECT body, created_at, matched FROM objects WHERE kind = $1 AND name = $2", kindMaintenance, name).Scan(&body, &created, &matched)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("maintenance", name)
		}
		if err != nil {
			return err
		}
		m := new(unyov1.Maintenance)
		if err := proto.Unmarshal(body, m); err != nil {
			return fmt.Errorf("decode maintenance: %w", err)
		}
		if m.GetEndedAt() != nil {
			return fmt.Errorf("it already ended at %s (by %s)", m.GetEndedAt().AsTime().UTC().Format(time.RFC3339), m.GetEndedBy())
		}
		m.EndedAt, m.EndedBy = timestamppb.New(at), by
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE objects SET body = $1, updated_at = $2 WHERE kind = $3 AND name = $4", b, now(), kindMaintenance, name); err != nil {
			return err
		}
		m.CreatedAt, m.Silenced = fromNanos(created), matched
		out = m
		_, err = bump(ctx, tx, "rules_revision", 1)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("end maintenance %q: %w", name, err)
	}
	return out, nil
}

// RulesRevision moves whenever a rule or maintenance record changes.
func (s *Store) RulesRevision(ctx context.Context) (int64, error) {
	var v int64
	if err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'rules_revision'").Scan(&v); err != nil {
		return 0, fmt.Errorf("read rules revision: %w", err)
	}
	return v, nil
}

// CountMatches adds to rules' and maintenances' matched counts.
func (s *Store) CountMatches(ctx context.Context, rules, maintenances map[string]int64) error {
	if len(rules)+len(maintenances) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return countMatchesTx(ctx, tx, rules, maintenances) })
}

func countMatchesTx(ctx context.Context, tx *sql.Tx, rules, maintenances map[string]int64) error {
	for kind, counts := range map[string]map[string]int64{kindRule: rules, kindMaintenance: maintenances} {
		for name, n := range counts {
			if _, err := tx.ExecContext(ctx, "UPDATE objects SET matched = matched + $1 WHERE kind = $2 AND name = $3", n, kind, name); err != nil {
				return fmt.Errorf("count matches of %s %q: %w", kind, name, err)
			}
		}
	}
	return nil
}
