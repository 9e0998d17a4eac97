package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// UpsertCluster registers a cluster or updates it. registered_at is kept from
// the first registration; registered_at and last_seen default to now when
// unset.
func (s *Store) UpsertCluster(ctx context.Context, c *unyov1.ClusterInfo) error {
	if c == nil || c.GetName() == "" {
		return errors.New("upsert cluster: the cluster has no name")
	}
	t := now()
	registered := toNanos(c.GetRegisteredAt())
	if registered == 0 {
		registered = t
	}
	seen := toNanos(c.GetLastSeen())
	if seen == 0 {
		seen = t
	}
	body, err := proto.Marshal(c)
	if err != nil {
		return fmt.Errorf("upsert cluster %q: encode: %w", c.GetName(), err)
	}
	_, err = s.w.ExecContext(ctx, `
		INSERT INTO clusters (name, registered_at, last_seen, body)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET
			last_seen = excluded.last_seen,
			body = excluded.body`,
		c.GetName(), registered, seen, body)
	if err != nil {
		return fmt.Errorf("upsert cluster %q: %w", c.GetName(), err)
	}
	return nil
}

const clusterColumns = "name, registered_at, last_seen, body"

// ListClusters returns every cluster, sorted by name.
func (s *Store) ListClusters(ctx context.Context) ([]*unyov1.ClusterInfo, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+clusterColumns+" FROM clusters ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	clusters, err := scanAll(rows, scanCluster)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	return clusters, nil
}

func (s *Store) GetCluster(ctx context.Context, name string) (*unyov1.ClusterInfo, error) {
	c, err := scanCluster(s.r.QueryRowContext(ctx, "SELECT "+clusterColumns+" FROM clusters WHERE name = $1", name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("cluster", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get cluster %q: %w", name, err)
	}
	return c, nil
}

func scanCluster(row scanner) (*unyov1.ClusterInfo, error) {
	var (
		name             string
		registered, seen int64
		body             []byte
	)
	if err := row.Scan(&name, &registered, &seen, &body); err != nil {
		return nil, err
	}
	c := &unyov1.ClusterInfo{}
	if err := proto.Unmarshal(body, c); err != nil {
		return nil, fmt.Errorf("decode cluster %q: %w", name, err)
	}
	c.Name = name
	c.RegisteredAt = fromNanos(registered)
	c.LastSeen = fromNanos(seen)
	return c, nil
}
