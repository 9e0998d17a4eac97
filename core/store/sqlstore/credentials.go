package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/unyo-ops/unyo/core/store"
)

// PutCredential binds a hash to a kind and name, replacing the one before.
func (s *Store) PutCredential(ctx context.Context, c store.Credential) error {
	if err := validCredential(c); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO credentials (kind, name, hash, secret, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (kind, name) DO UPDATE SET
				hash = excluded.hash, secret = excluded.secret, created_at = excluded.created_at`,
			c.Kind, c.Name, c.Hash, c.Secret, credCreated(c)); err != nil {
			return err
		}
		return bumpCounter(ctx, tx, credentialsGeneration)
	})
	if err != nil {
		return fmt.Errorf("store the %s credential of %q: %w", c.Kind, c.Name, err)
	}
	return nil
}

// AddCredential binds a hash to a kind and name that have none yet.
func (s *Store) AddCredential(ctx context.Context, c store.Credential) error {
	if err := validCredential(c); err != nil {
		return err
	}
	added := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO credentials (kind, name, hash, secret, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (kind, name) DO NOTHING`,
			c.Kind, c.Name, c.Hash, c.Secret, credCreated(c))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		added = true
		return bumpCounter(ctx, tx, credentialsGeneration)
	})
	if err != nil {
		return fmt.Errorf("store the %s credential of %q: %w", c.Kind, c.Name, err)
	}
	if !added {
		return fmt.Errorf("the %s %q has a credential: %w", c.Kind, c.Name, store.ErrExists)
	}
	return nil
}

// credentialsGeneration is the counter that moves with every change to
// the credentials table, in the change's transaction
// (CredentialsGeneration).
const credentialsGeneration = "credentials_generation"

// CredentialsGeneration returns a number that moves with every change to
// the credentials: two equal reads mean none was stored or revoked in
// between. The counter's row is written in each change's transaction, so
// on PostgreSQL too the changes take numbers in the order they commit.
func (s *Store) CredentialsGeneration(ctx context.Context) (int64, error) {
	v, err := s.readCounter(ctx, credentialsGeneration)
	if err != nil {
		return 0, fmt.Errorf("read the credentials' generation: %w", err)
	}
	return v, nil
}

// bumpCounter adds one to a named counter in tx, creating it at 1.
func bumpCounter(ctx context.Context, tx *sql.Tx, name string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO counters (name, value) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET value = counters.value + 1`, name)
	return err
}

// readCounter reads a named counter outside a transaction; one never
// bumped (bumpCounter) reads 0.
func (s *Store) readCounter(ctx context.Context, name string) (int64, error) {
	var v int64
	err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = $1", name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func validCredential(c store.Credential) error {
	if c.Kind == "" || c.Name == "" || c.Hash == "" {
		return fmt.Errorf("store a credential: kind %q, name %q and hash must all be set", c.Kind, c.Name)
	}
	return nil
}

func credCreated(c store.Credential) int64 {
	if c.CreatedAt.IsZero() {
		return now()
	}
	return c.CreatedAt.UnixNano()
}

const credentialColumns = "kind, name, hash, secret, created_at"

// LookupCredential returns the credentials with this hash.
func (s *Store) LookupCredential(ctx context.Context, hash string) ([]store.Credential, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+credentialColumns+" FROM credentials WHERE hash = $1 ORDER BY kind", hash)
	if err != nil {
		return nil, fmt.Errorf("look up a credential: %w", err)
	}
	creds, err := scanAll(rows, scanCredential)
	if err != nil {
		return nil, fmt.Errorf("look up a credential: %w", err)
	}
	return creds, nil
}

// GetCredential returns the credential of kind and name.
func (s *Store) GetCredential(ctx context.Context, kind, name string) (store.Credential, error) {
	c, err := scanCredential(s.r.QueryRowContext(ctx, "SELECT "+credentialColumns+" FROM credentials WHERE kind = $1 AND name = $2", kind, name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Credential{}, notFound(kind+" credential", name)
	}
	if err != nil {
		return store.Credential{}, fmt.Errorf("get the %s credential of %q: %w", kind, name, err)
	}
	return c, nil
}

// DeleteCredential revokes the credential of kind and name.
func (s *Store) DeleteCredential(ctx context.Context, kind, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM credentials WHERE kind = $1 AND name = $2", kind, name)
		if err != nil {
			return err
		}
		return bumpIfChanged(ctx, tx, res, credentialsGeneration)
	})
	if err != nil {
		return fmt.Errorf("revoke the %s credential of %q: %w", kind, name, err)
	}
	return nil
}

func scanCredential(row scanner) (store.Credential, error) {
	var (
		c       store.Credential
		created int64
	)
	if err := row.Scan(&c.Kind, &c.Name, &c.Hash, &c.Secret, &created); err != nil {
		return store.Credential{}, err
	}
	c.CreatedAt = time.Unix(0, created)
	return c, nil
}

// bumpIfChanged bumps a counter in tx when the statement that gave res
// changed rows.
func bumpIfChanged(ctx context.Context, tx *sql.Tx, res sql.Result, counter string) error {
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return err
	}
	return bumpCounter(ctx, tx, counter)
}

// DeleteNode removes a node with its credential and log positions. A
// credential left without its node (an enrolment whose registration failed)
// is revoked too.
func (s *Store) DeleteNode(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM nodes WHERE name = $1", name)
		if err != nil {
			return fmt.Errorf("delete node %q: %w", name, err)
		}
		gone, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete node %q: %w", name, err)
		}
		res, err = tx.ExecContext(ctx, "DELETE FROM credentials WHERE kind IN ($1, $2) AND name = $3", store.CredNode, store.CredNodeCert, name)
		if err != nil {
			return fmt.Errorf("revoke the credential of node %q: %w", name, err)
		}
		creds, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("revoke the credential of node %q: %w", name, err)
		}
		if gone+creds == 0 {
			return notFound("node", name)
		}
		if creds > 0 {
			if err := bumpCounter(ctx, tx, credentialsGeneration); err != nil {
				return fmt.Errorf("revoke the credential of node %q: %w", name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM log_positions WHERE node = $1", name); err != nil {
			return fmt.Errorf("delete the log positions of node %q: %w", name, err)
		}
		return nil
	})
}

// DeleteCluster forgets a cluster and root's credentials for it.
func (s *Store) DeleteCluster(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM clusters WHERE name = $1", name)
		if err != nil {
			return fmt.Errorf("delete cluster %q: %w", name, err)
		}
		gone, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete cluster %q: %w", name, err)
		}
		res, err = tx.ExecContext(ctx, "DELETE FROM credentials WHERE kind IN ($1, $2, $3) AND name = $4", store.CredCluster, store.CredRootToCluster, store.CredPeerToken, name)
		if err != nil {
			return fmt.Errorf("revoke the credentials of cluster %q: %w", name, err)
		}
		creds, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("revoke the credentials of cluster %q: %w", name, err)
		}
		if gone+creds == 0 {
			return notFound("cluster", name)
		}
		if creds > 0 {
			if err := bumpCounter(ctx, tx, credentialsGeneration); err != nil {
				return fmt.Errorf("revoke the credentials of cluster %q: %w", name, err)
			}
		}
		return nil
	})
}
