package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// TestUpgradeKeepsObjects builds a database as unyo left it at migration
// 0007 (checks in their own table, counts in objects.matched), opens it
// with this unyo, and reads every object, count and revision back.
func TestUpgradeKeepsObjects(t *testing.T) {
	t.Parallel()
	created := timestamppb.New(timestamppb.Now().AsTime().Truncate(1e3))
	check := &unyov1.Check{Name: "disk", Cluster: "dc1", Source: "central", Revision: 4,
		Spec: &unyov1.CheckSpec{Command: []string{"check_disk"}, Interval: "1m"}}
	upgradeFrom(t, 7, func(t *testing.T, db *sql.DB) {
		ctx := t.Context()
		rule := &unyov1.EventRule{Name: "page", Spec: &unyov1.EventRuleSpec{Type: "action"}}
		maint := &unyov1.Maintenance{Name: "patch", Spec: &unyov1.MaintenanceSpec{Reason: "kernel"}}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"INSERT INTO checks (name, revision, created_at, updated_at, body) VALUES ($1, $2, $3, $3, $4)", []any{"disk", 4, toNanos(created), mustMarshal(t, check)}},
			{"INSERT INTO objects (kind, name, created_at, updated_at, matched, body) VALUES ($1, $2, $3, $3, $4, $5)", []any{"EventRule", "page", toNanos(created), 5, mustMarshal(t, rule)}},
			{"INSERT INTO objects (kind, name, created_at, updated_at, matched, body) VALUES ($1, $2, $3, $3, $4, $5)", []any{"Maintenance", "patch", toNanos(created), 2, mustMarshal(t, maint)}},
			{"UPDATE counters SET value = 4 WHERE name = 'checks_revision'", nil},
			{"UPDATE counters SET value = 9 WHERE name = 'rules_revision'", nil},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
	}, func(t *testing.T, s *Store) {
		ctx := t.Context()
		c, err := s.GetCheck(ctx, "disk")
		if err != nil {
			t.Fatal(err)
		}
		if c.GetRevision() != 4 || !c.GetCreatedAt().AsTime().Equal(created.AsTime()) || !proto.Equal(c.GetSpec(), check.GetSpec()) || c.GetCluster() != "dc1" {
			t.Errorf("check after the upgrade: %v", c)
		}
		rules, err := s.ListEventRules(ctx)
		if err != nil || len(rules) != 1 || rules[0].GetMatched() != 5 || rules[0].GetSpec().GetType() != "action" {
			t.Errorf("event rules after the upgrade: %v, %v", rules, err)
		}
		ms, err := s.ListMaintenance(ctx)
		if err != nil || len(ms) != 1 || ms[0].GetSilenced() != 2 || ms[0].GetSpec().GetReason() != "kernel" {
			t.Errorf("maintenance after the upgrade: %v, %v", ms, err)
		}
		if rev, err := s.ChecksRevision(ctx); err != nil || rev != 4 {
			t.Errorf("checks revision after the upgrade = %d, %v; want 4 as before", rev, err)
		}
		if rev, err := s.RulesRevision(ctx); err != nil || rev != 9 {
			t.Errorf("rules revision after the upgrade = %d, %v; want 9 as before", rev, err)
		}
		// Revisions move on from where they were, never back.
		changed := proto.Clone(check).(*unyov1.Check) // the backends run in parallel
		changed.Spec.Interval = "2m"
		if _, err := s.PutCheck(ctx, changed); err != nil {
			t.Fatal(err)
		}
		if rev, err := s.ChecksRevision(ctx); err != nil || rev <= 9 {
			t.Errorf("checks revision after a change = %d, %v; want past every old revision", rev, err)
		}
		if err := s.CountMatches(ctx, map[string]int64{"page": 1, "gone": 3}, nil); err != nil {
			t.Fatal(err)
		}
		if r, err := s.GetEventRule(ctx, "page"); err != nil || r.GetMatched() != 6 {
			t.Errorf("matched after counting one more = %v, %v; want 6", r.GetMatched(), err)
		}
		if counts, err := s.ObjectCounts(ctx, "EventRule"); err != nil || len(counts) != 1 {
			t.Errorf("counts of event rules = %v, %v; a deleted rule gets no count", counts, err)
		}
	})
}

// upgradeFrom builds, on each backend, a database migrated to version and
// filled by fill as unyo left it then, and hands check a store opened on
// it by this unyo.
func upgradeFrom(t *testing.T, version int64, fill func(t *testing.T, db *sql.DB), check func(t *testing.T, s *Store)) {
	type old struct {
		driver, dsn string
		d           *dialect
		open        func(ctx context.Context) (*Store, error)
	}
	for name, mk := range map[string]func(t *testing.T) old{
		"sqlite": func(t *testing.T) old {
			path := filepath.Join(t.TempDir(), "old.db")
			return old{"sqlite", "file:" + escapeURIPath(path), sqliteDialect(), func(ctx context.Context) (*Store, error) { return OpenSQLite(ctx, path) }}
		},
		"postgres": func(t *testing.T) old {
			dsn := testpg.New(t).CreateDatabase(t)
			return old{"pgx", dsn, postgresDialect(), func(ctx context.Context) (*Store, error) { return OpenPostgres(ctx, dsn) }}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := mk(t)
			db, err := sql.Open(o.driver, o.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if err := migrateTo(t.Context(), db, o.d, version); err != nil {
				t.Fatal(err)
			}
			fill(t, db)
			db.Close()
			s, err := o.open(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check(t, s)
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
