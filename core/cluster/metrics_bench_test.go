package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
)

const (
	benchSeries = 1000
	benchBatch  = 10000
)

// BenchmarkMetricsIngest measures, side by side in one run, samples written
// straight into the embedded VictoriaMetrics and the same samples sent
// through the agent API (protobuf over HTTP, validated, labelled with their
// node, then written). The target: the API path at no less than half the
// direct rate, and at least 200,000 samples/s.
func BenchmarkMetricsIngest(b *testing.B) {
	db, err := vmembed.Open(vmembed.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now().Add(-time.Hour)

	b.Run("direct", func(b *testing.B) {
		ctx := context.Background()
		var n int
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			batch := make([]tsdb.Sample, benchBatch)
			for j := range batch {
				k := i*benchBatch + j
				batch[j] = tsdb.Sample{Name: "bench_direct", Labels: map[string]string{"node": "web1", "series": fmt.Sprint(k % benchSeries)},
					Timestamp: start.Add(time.Duration(k/benchSeries) * time.Millisecond), Value: float64(k)}
			}
			if err := db.Write(ctx, batch); err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
	})

	b.Run("agent-api", func(b *testing.B) {
		st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		c := startCluster(b, st, cluster.Options{Metrics: db})
		ctx := context.Background()
		if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}})); err != nil {
			b.Fatal(err)
		}
		var n int
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req := &unyov1.WriteMetricsRequest{Node: "web1", Samples: make([]*unyov1.Sample, benchBatch)}
			for j := range req.Samples {
				k := i*benchBatch + j
				req.Samples[j] = &unyov1.Sample{Name: "bench_api", Labels: map[string]string{"series": fmt.Sprint(k % benchSeries)},
					TimeMs: start.Add(time.Duration(k/benchSeries) * time.Millisecond).UnixMilli(), Value: float64(k)}
			}
			if _, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(req)); err != nil {
				b.Fatal(err)
			}
			n += len(req.Samples)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
	})
}
