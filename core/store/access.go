package store

import (
	"context"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Tokens are the API tokens a server issued. Only the SHA-256 digest of a
// token's secret is stored, never the secret.
type Tokens interface {
	// CreateToken stores t (its id, name and created_at set) under the hex
	// SHA-256 digest of its secret; ErrExists if a live token has its name.
	CreateToken(ctx context.Context, t *unyov1.Token, digest string) error
	// TokenByDigest returns the token whose secret has digest, revoked or
	// expired ones included (the caller decides); ErrNotFound if none.
	TokenByDigest(ctx context.Context, digest string) (*unyov1.Token, error)
	// ListTokens returns every token, revoked ones included, by name.
	ListTokens(ctx context.Context) ([]*unyov1.Token, error)
	// RevokeToken revokes the live token called name at at; ErrNotFound if
	// there is none.
	RevokeToken(ctx context.Context, name string, at time.Time) (*unyov1.Token, error)
	// TouchToken records that the token with id was used at at.
	TouchToken(ctx context.Context, id string, at time.Time) error
}

// AuditFilter selects audit records; zero fields select everything.
type AuditFilter struct {
	Since time.Time
	Who   string
	Kind  string
	// Limit bounds the answer, newest first; 0 means no bound.
	Limit int
}

// Audit is the log of every write to a server.
type Audit interface {
	// AppendAudit stores records in one transaction; their ids must be new.
	AppendAudit(ctx context.Context, recs ...*unyov1.AuditRecord) error
	// ListAudit returns matching records, newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]*unyov1.AuditRecord, error)
	// PruneAudit removes records older than before and returns how many.
	PruneAudit(ctx context.Context, before time.Time) (int, error)
}
