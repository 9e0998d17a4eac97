package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// CreateToken stores a new token under the digest of its secret.
func (s *Store) CreateToken(ctx context.Context, t *unyov1.Token, digest string) error {
	if t.GetId() == "" || t.GetName() == "" || digest == "" {
		return errors.New("create token: the token needs an id, a name and a digest")
	}
	body, err := proto.Marshal(t)
	if err != nil {
		return fmt.Errorf("create token %q: encode: %w", t.GetName(), err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM tokens WHERE name = $1 AND revoked_at = 0", t.GetName()).Scan(&n); err != nil {
			return fmt.Errorf("create token %q: %w", t.GetName(), err)
		}
		if n > 0 {
			return fmt.Errorf("token %q: %w (revoke it first, or choose another name)", t.GetName(), store.ErrExists)
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO tokens (id, name, digest, created_at, expires_at, revoked_at, last_used_at, body)
			VALUES ($1, $2, $3, $4, $5, 0, 0, $6)`,
			t.GetId(), t.GetName(), digest, toNanos(t.GetCreatedAt()), toNanos(t.GetExpiresAt()), body)
		if err != nil && isUniqueViolation(err) {
			return fmt.Errorf("token %q: %w (a token with the same name or secret is live)", t.GetName(), store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("create token %q: %w", t.GetName(), err)
		}
		return nil
	})
}

// isUniqueViolation recognises a unique constraint failure of either backend.
func isUniqueViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}

const tokenColumns = "revoked_at, last_used_at, body"

func scanToken(row scanner) (*unyov1.Token, error) {
	var (
		revoked, used int64
		body          []byte
	)
	if err := row.Scan(&revoked, &used, &body); err != nil {
		return nil, err
	}
	t := &unyov1.Token{}
	if err := proto.Unmarshal(body, t); err != nil {
		return nil, fmt.Errorf("decode token: %w", err)
	}
	t.RevokedAt, t.LastUsedAt = fromNanos(revoked), fromNanos(used)
	return t, nil
}

func (s *Store) TokenByDigest(ctx context.Context, digest string) (*unyov1.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, "SELECT "+tokenColumns+" FROM tokens WHERE digest = $1", digest))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token with this secret: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	return t, nil
}

func (s *Store) ListTokens(ctx context.Context) ([]*unyov1.Token, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+tokenColumns+" FROM tokens ORDER BY name, created_at")
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	ts, err := scanAll(rows, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return ts, nil
}

func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) (*unyov1.Token, error) {
	var t *unyov1.Token
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, "SELECT "+tokenColumns+" FROM tokens WHERE name = $1 AND revoked_at = 0"+s.d.forUpdate, name))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("live token", name)
		}
		if err != nil {
			return fmt.Errorf("revoke token %q: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE tokens SET revoked_at = $1 WHERE id = $2", at.UnixNano(), t.GetId()); err != nil {
			return fmt.Errorf("revoke token %q: %w", name, err)
		}
		t.RevokedAt = timestamppb.New(at)
		return nil
	})
	return t, err
}

func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	if _, err := s.w.ExecContext(ctx, "UPDATE tokens SET last_used_at = $1 WHERE id = $2 AND last_used_at < $1", at.UnixNano(), id); err != nil {
		return fmt.Errorf("record use of token %s: %w", id, err)
	}
	return nil
}

// auditChunk bounds the rows of one INSERT (5 parameters each).
const auditChunk = 200

// AppendAudit stores audit records in one transaction, many rows per
// statement, so that a large apply's records cost a few round trips.
func (s *Store) AppendAudit(ctx context.Context, recs ...*unyov1.AuditRecord) error {
	if len(recs) == 0 {
		return nil
	}
	args := make([]any, 0, 5*len(recs))
	for _, r := range recs {
		if r.GetId() == "" || r.GetAt() == nil {
			return errors.New("append audit record: it needs an id and a time")
		}
		body, err := proto.Marshal(r)
		if err != nil {
			return fmt.Errorf("append audit record: encode: %w", err)
		}
		args = append(args, r.GetId(), toNanos(r.GetAt()), r.GetWho(), r.GetKind(), body)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for from := 0; from < len(recs); from += auditChunk {
			n := min(auditChunk, len(recs)-from)
			var b strings.Builder
			b.WriteString("INSERT INTO audit_log (id, at, who, kind, body) VALUES ")
			for i := range n {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(")
				placeholders(&b, 5*i+1, 5)
				b.WriteString(")")
			}
			if _, err := tx.ExecContext(ctx, b.String(), args[5*from:5*(from+n)]...); err != nil {
				return fmt.Errorf("append %d audit records: %w", len(recs), err)
			}
		}
		return nil
	})
}

func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*unyov1.AuditRecord, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if !f.Since.IsZero() {
		add("at >= $%d", f.Since.UnixNano())
	}
	if f.Who != "" {
		add("who = $%d", f.Who)
	}
	if f.Kind != "" {
		add("LOWER(kind) = LOWER($%d)", f.Kind)
	}
	q := "SELECT body FROM audit_log"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY at DESC, id DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit records: %w", err)
	}
	recs, err := scanAll(rows, func(row scanner) (*unyov1.AuditRecord, error) {
		var body []byte
		if err := row.Scan(&body); err != nil {
			return nil, err
		}
		r := &unyov1.AuditRecord{}
		if err := proto.Unmarshal(body, r); err != nil {
			return nil, fmt.Errorf("decode audit record: %w", err)
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list audit records: %w", err)
	}
	return recs, nil
}

func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, "DELETE FROM audit_log WHERE at < $1", before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("prune audit records: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
