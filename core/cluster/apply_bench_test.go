package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// applyObjects returns n checks named prefix-0.., each one generation of a
// definition: applying another generation changes every check.
func applyObjects(prefix string, n, generation int) []*unyov1.Object {
	objs := make([]*unyov1.Object, n)
	for i := range objs {
		objs[i] = &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{
			Name:   fmt.Sprintf("%s-%d", prefix, i),
			Labels: map[string]string{"team": "ops"},
			Spec: &unyov1.CheckSpec{
				Command:      []string{"check_disk", "-w", fmt.Sprintf("%d%%", 10+generation%50), "-c", "5%"},
				Interval:     "30s",
				NodeSelector: map[string]string{"role": "web"},
			},
		}}}
	}
	return objs
}

// benchApply measures objects stored per second by `unyo apply` through the
// cluster's API, in applies of 1,000 new checks.
func benchApply(b *testing.B, st store.Store) {
	c := startCluster(b, st)
	ctx := context.Background()
	const batch = 1000
	stored := 0
	b.ResetTimer()
	start := time.Now()
	for i := 0; stored < b.N; i++ {
		req := &unyov1.ApplyRequest{Objects: applyObjects(fmt.Sprintf("b%d", i), batch, 0)}
		if _, err := c.Objects.Apply(ctx, connect.NewRequest(req)); err != nil {
			b.Fatal(err)
		}
		stored += batch
	}
	b.ReportMetric(float64(stored)/time.Since(start).Seconds(), "objects/s")
}

func BenchmarkApplySQLite(b *testing.B) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchApply(b, st)
}

// The PostgreSQL server keeps fsync on: commits are durable.
func BenchmarkApplyPostgresDurable(b *testing.B) {
	srv := testpg.New(b, testpg.WithDurable())
	st, err := sqlstore.OpenPostgres(context.Background(), srv.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchApply(b, st)
}
