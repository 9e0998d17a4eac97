package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TryAcquireLease takes the lease if it is free, expired or already
// holder's, and then holds it for ttl from now. On PostgreSQL "now" is the
// database's clock, which all replicas share; on SQLite, which only one
// process uses, it is the process's clock.
func (s *Store) TryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if name == "" || holder == "" {
		return false, fmt.Errorf("acquire lease %q for %q: lease and holder must be named", name, holder)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("acquire lease %q for %q: ttl %v is not positive", name, holder, ttl)
	}
	args := []any{name, holder, ttl.Nanoseconds()}
	nowSQL := s.d.nowNanos
	if nowSQL == "" {
		nowSQL = "$4"
		args = append(args, now())
	}
	// One statement, so that taking the lease is atomic: the update only
	// happens (and a row only comes back) if the lease is ours or expired.
	var got string
	err := s.w.QueryRowContext(ctx, `
		INSERT INTO leases (name, holder, expires_at)
		VALUES ($1, $2, `+nowSQL+` + $3)
		ON CONFLICT (name) DO UPDATE SET
			holder = excluded.holder,
			expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= `+nowSQL+`
		RETURNING holder`, args...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("acquire lease %q for %q: %w", name, holder, err)
	}
	return got == holder, nil
}

// ReleaseLease gives the lease up if holder has it; otherwise it does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM leases WHERE name = $1 AND holder = $2", name, holder); err != nil {
		return fmt.Errorf("release lease %q held by %q: %w", name, holder, err)
	}
	return nil
}
