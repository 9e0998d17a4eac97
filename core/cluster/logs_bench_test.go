package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/chtest"
	"github.com/unyo-ops/unyo/core/logstore/clickhouse"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

// BenchmarkLogsIngest measures, per log store backend, log lines written
// straight into the store and the same lines sent through the agent API
// (with the per-file position bookkeeping that makes resends harmless).
// Targets: at least 50,000 lines/s into the embedded store and 100,000
// lines/s into ClickHouse, through the agent API.
func BenchmarkLogsIngest(b *testing.B) {
	b.Run("embedded", func(b *testing.B) {
		logs, err := vlembed.Open(vlembed.Options{Path: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer logs.Close()
		logsIngest(b, logs)
	})
	b.Run("clickhouse", func(b *testing.B) {
		srv := chtest.Start(b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		logs, err := clickhouse.Open(ctx, clickhouse.Options{Addr: srv.Addr, Database: "unyo"})
		if err != nil {
			b.Fatal(err)
		}
		defer logs.Close()
		logsIngest(b, logs)
	})
}

func logsIngest(b *testing.B, logs logstore.Store) {
	now := time.Now()
	b.Run("direct", func(b *testing.B) {
		ctx := context.Background()
		var n int
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			batch := make([]logstore.Entry, benchBatch)
			for j := range batch {
				batch[j] = logstore.Entry{Time: now, Host: "web1", App: "bench", Level: "info",
					Message: fmt.Sprintf("request %d served in 12ms", i*benchBatch+j), Fields: map[string]string{"path": "/api"}}
			}
			if err := logs.Write(ctx, batch); err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
	})

	b.Run("agent-api", func(b *testing.B) {
		st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		c := startCluster(b, st, cluster.Options{Logs: logs})
		ctx := context.Background()
		if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "web1"}})); err != nil {
			b.Fatal(err)
		}
		var n int
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req := &unyov1.WriteLogsRequest{Node: "web1", Entries: make([]*unyov1.LogEntry, benchBatch)}
			for j := range req.Entries {
				k := i*benchBatch + j
				req.Entries[j] = &unyov1.LogEntry{Time: timestamppb.New(now), App: "bench", Level: "info",
					Message: fmt.Sprintf("request %d served in 12ms", k), Fields: map[string]string{"path": "/api"},
					FileId: "f1", Offset: int64(k+1) * 40, Sequence: uint64(k + 1)}
			}
			resp, err := c.Logs.WriteLogs(ctx, connect.NewRequest(req))
			if err != nil {
				b.Fatal(err)
			}
			n += int(resp.Msg.GetAccepted())
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
	})
}
