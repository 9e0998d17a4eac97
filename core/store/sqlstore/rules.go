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

// Event rules and maintenance records are objects (see objects.go) with a
// count the pipeline adds to in object_counts: the events a rule matched,
// the events a maintenance silenced.
const (
	kindRule        = "EventRule"
	kindMaintenance = "Maintenance"
)

// PutEventRule creates or replaces an event rule.
func (s *Store) PutEventRule(ctx context.Context, r *unyov1.EventRule) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_EventRule{EventRule: r}})
}

// DeleteEventRule removes an event rule.
func (s *Store) DeleteEventRule(ctx context.Context, name string) error {
	return s.DeleteObject(ctx, kindRule, name)
}

func (s *Store) rules(ctx context.Context, name string) ([]*unyov1.EventRule, error) {
	rows, err := s.objectRows(ctx, s.r, kindRule, name, true)
	out := make([]*unyov1.EventRule, len(rows))
	for i, r := range rows {
		out[i] = r.o.GetEventRule()
		out[i].Matched = r.count
	}
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

// PutMaintenance creates or replaces a maintenance record.
func (s *Store) PutMaintenance(ctx context.Context, m *unyov1.Maintenance) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: m}})
}

// DeleteMaintenance removes a maintenance record.
func (s *Store) DeleteMaintenance(ctx context.Context, name string) error {
	return s.DeleteObject(ctx, kindMaintenance, name)
}

func (s *Store) maintenances(ctx context.Context, name string) ([]*unyov1.Maintenance, error) {
	rows, err := s.objectRows(ctx, s.r, kindMaintenance, name, true)
	out := make([]*unyov1.Maintenance, len(rows))
	for i, r := range rows {
		out[i] = r.o.GetMaintenance()
		out[i].Silenced = r.count
	}
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
		b, err := s.newPutBatch(ctx, tx)
		if err != nil {
			return err
		}
		var body []byte
		var created int64
		err = tx.QueryRowContext(ctx, "SELECT body, created_at FROM objects WHERE kind = $1 AND name = $2", kindMaintenance, name).Scan(&body, &created)
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
		enc, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		rev, err := b.revision(ctx, kindMaintenance)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE objects SET body = $1, revision = $2, updated_at = $3 WHERE kind = $4 AND name = $5",
			enc, rev, now(), kindMaintenance, name); err != nil {
			return err
		}
		var silenced int64
		err = tx.QueryRowContext(ctx, "SELECT count FROM object_counts WHERE kind = $1 AND name = $2", kindMaintenance, name).Scan(&silenced)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		m.CreatedAt, m.Silenced = fromNanos(created), silenced
		out = m
		return b.finish(ctx)
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
	return s.ObjectsRevision(ctx, kindRule, kindMaintenance)
}

// CountMatches adds to rules' and maintenances' matched counts.
func (s *Store) CountMatches(ctx context.Context, rules, maintenances map[string]int64) error {
	if len(rules)+len(maintenances) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.countMatchesTx(ctx, s.stmts(tx), rules, maintenances) })
}

// countMatchQuery adds to one object's count (SQLite; a hot query), and
// countMatchesUnnest to many (PostgreSQL: one round trip per pipeline
// commit instead of one per rule that matched, in key order so that
// concurrent commits lock the rows in the same order).
const (
	countMatchQuery = `INSERT INTO object_counts (kind, name, count)
		SELECT kind, name, CAST($1 AS BIGINT) FROM objects WHERE kind = $2 AND name = $3
		ON CONFLICT (kind, name) DO UPDATE SET count = object_counts.count + excluded.count`
	countMatchesUnnest = `INSERT INTO object_counts (kind, name, count)
		SELECT o.kind, o.name, m.n FROM unnest($1::text[], $2::text[], $3::int8[]) AS m(kind, name, n)
		JOIN objects o ON o.kind = m.kind AND o.name = m.name
		ORDER BY o.kind, o.name
		ON CONFLICT (kind, name) DO UPDATE SET count = object_counts.count + excluded.count`
)

// countMatchesTx adds to the counts of rules and maintenances that still
// exist (one deleted meanwhile has nothing to count).
func (s *Store) countMatchesTx(ctx context.Context, st *stmtCache, rules, maintenances map[string]int64) error {
	if len(rules)+len(maintenances) == 0 {
		return nil
	}
	if s.d.name == "postgres" {
		var kinds, names []string
		var counts []int64
		for kind, m := range map[string]map[string]int64{kindRule: rules, kindMaintenance: maintenances} {
			for name, n := range m {
				kinds, names, counts = append(kinds, kind), append(names, name), append(counts, n)
			}
		}
		if _, err := st.tx.ExecContext(ctx, countMatchesUnnest, kinds, names, counts); err != nil {
			return fmt.Errorf("count matches of %d rules and maintenances: %w", len(names), err)
		}
		return nil
	}
	q, err := st.get(ctx, countMatchQuery)
	if err != nil {
		return fmt.Errorf("count matches: %w", err)
	}
	for kind, counts := range map[string]map[string]int64{kindRule: rules, kindMaintenance: maintenances} {
		for name, n := range counts {
			if _, err := q.ExecContext(ctx, n, kind, name); err != nil {
				return fmt.Errorf("count matches of %s %q: %w", kind, name, err)
			}
		}
	}
	return nil
}
