package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
)

// What a cluster's watchers judge it by (inter-cluster monitoring): reads
// of what the store keeps anyway, and one counter, so that every replica of
// a cluster answers the same.

// LeaseHolder returns who holds the named lease and until when; "" when
// nobody does or the lease expired (by the clock TryAcquireLease uses).
func (s *Store) LeaseHolder(ctx context.Context, name string) (string, time.Time, error) {
	args := []any{name}
	nowSQL := s.d.nowNanos
	if nowSQL == "" {
		nowSQL = "$2"
		args = append(args, now())
	}
	var holder string
	var expires int64
	err := s.r.QueryRowContext(ctx, "SELECT holder, expires_at FROM leases WHERE name = $1 AND expires_at > "+nowSQL, args...).Scan(&holder, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read lease %q: %w", name, err)
	}
	return holder, time.Unix(0, expires), nil
}

// PipelineLag returns how many stored events the pipeline has not processed
// yet and when the oldest of them was received.
func (s *Store) PipelineLag(ctx context.Context) (store.PipelineLag, error) {
	var lag store.PipelineLag
	var cursor int64
	err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT value FROM counters WHERE name = 'pipeline_cursor'),
		(SELECT value FROM counters WHERE name = 'event_seq')`).Scan(&cursor, &lag.Behind)
	if err != nil {
		return lag, fmt.Errorf("read the pipeline cursor: %w", err)
	}
	lag.Behind -= cursor
	if lag.Behind <= 0 {
		lag.Behind = 0
		return lag, nil
	}
	var body []byte
	err = s.r.QueryRowContext(ctx, "SELECT body FROM events WHERE seq > $1 ORDER BY seq LIMIT 1", cursor).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return lag, nil // processed meanwhile
	}
	if err != nil {
		return lag, fmt.Errorf("read the oldest unprocessed event: %w", err)
	}
	e := &unyov1.Event{}
	if err := proto.Unmarshal(body, e); err != nil {
		return lag, fmt.Errorf("decode the oldest unprocessed event: %w", err)
	}
	if e.GetReceivedAt() != nil {
		lag.OldestReceived = e.GetReceivedAt().AsTime()
	}
	return lag, nil
}

// NoteResultsAccepted records that agents' results were accepted at at,
// unless a later time is recorded already (replicas note in any order).
func (s *Store) NoteResultsAccepted(ctx context.Context, at time.Time) error {
	_, err := s.w.ExecContext(ctx, `
		INSERT INTO counters (name, value) VALUES ('results_accepted_at', $1)
		ON CONFLICT (name) DO UPDATE SET value = CASE WHEN excluded.value > counters.value THEN excluded.value ELSE counters.value END`,
		at.UnixNano())
	if err != nil {
		return fmt.Errorf("note when results were accepted: %w", err)
	}
	return nil
}

// ResultsAcceptedAt returns the latest time NoteResultsAccepted recorded;
// zero if none.
func (s *Store) ResultsAcceptedAt(ctx context.Context) (time.Time, error) {
	var v int64
	err := s.r.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'results_accepted_at'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read when results were last accepted: %w", err)
	}
	return time.Unix(0, v), nil
}

// ListCredentials returns every credential of kind, sorted by name.
func (s *Store) ListCredentials(ctx context.Context, kind string) ([]store.Credential, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+credentialColumns+" FROM credentials WHERE kind = $1 ORDER BY name", kind)
	if err != nil {
		return nil, fmt.Errorf("list the %s credentials: %w", kind, err)
	}
	creds, err := scanAll(rows, scanCredential)
	if err != nil {
		return nil, fmt.Errorf("list the %s credentials: %w", kind, err)
	}
	return creds, nil
}
