package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// PutCheck creates or replaces a check (see putBatch.putCheck).
func (s *Store) PutCheck(ctx context.Context, c *unyov1.Check) (store.PutResult, error) {
	return s.putOne(ctx, &unyov1.Object{Kind: &unyov1.Object_Check{Check: c}})
}

// userPart strips what the store maintains, leaving what the user wrote.
func userPart(c *unyov1.Check) *unyov1.Check {
	c = proto.Clone(c).(*unyov1.Check)
	c.Revision = 0
	c.CreatedAt = nil
	c.UpdatedAt = nil
	return c
}

// DeleteCheck removes a check and advances the checks revision.
func (s *Store) DeleteCheck(ctx context.Context, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.counter(ctx, tx, "checks_revision"); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM checks WHERE name = $1", name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		_, err = bump(ctx, tx, "checks_revision", 1)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete check %q: %w", name, err)
	}
	return nil
}

const checkColumns = "name, revision, created_at, updated_at, body"

func (s *Store) GetCheck(ctx context.Context, name string) (*unyov1.Check, error) {
	c, err := scanCheck(s.r.QueryRowContext(ctx, "SELECT "+checkColumns+" FROM checks WHERE name = $1", name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("check", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get check %q: %w", name, err)
	}
	return c, nil
}

// ListChecks returns every check, sorted by name.
func (s *Store) ListChecks(ctx context.Context) ([]*unyov1.Check, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+checkColumns+" FROM checks ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list checks: %w", err)
	}
	checks, err := scanAll(rows, scanCheck)
	if err != nil {
		return nil, fmt.Errorf("list checks: %w", err)
	}
	return checks, nil
}

// ChecksRevision is the counter every change to checks advances; 0 before the
// first one.
func (s *Store) ChecksRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'checks_revision'").Scan(&rev)
	if err != nil {
		return 0, fmt.Errorf("read checks revision: %w", err)
	}
	return rev, nil
}

// scanCheck decodes a check; the columns the store maintains win over the
// copies in the body.
func scanCheck(row scanner) (*unyov1.Check, error) {
	var (
		name                      string
		revision, created, update int64
		body                      []byte
	)
	if err := row.Scan(&name, &revision, &created, &update, &body); err != nil {
		return nil, err
	}
	c := &unyov1.Check{}
	if err := proto.Unmarshal(body, c); err != nil {
		return nil, fmt.Errorf("decode check %q: %w", name, err)
	}
	c.Name = name
	c.Revision = revision
	c.CreatedAt = fromNanos(created)
	c.UpdatedAt = fromNanos(update)
	return c, nil
}
