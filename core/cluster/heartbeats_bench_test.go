package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// BenchmarkHeartbeat: heartbeats of 10,000 registered nodes through the
// API (client and server in this process) on SQLite, batched to the store
// as the cluster does; ns/op is client and server together.
func BenchmarkHeartbeat(b *testing.B) {
	ctx := context.Background()
	c := startCluster(b, openSQLite(b))
	const nodes = 10000
	name := func(i int) string { return fmt.Sprintf("sim-%05d", i) }
	for i := range nodes {
		n := &unyov1.Node{Name: name(i), Capacity: &unyov1.Capacity{Cpus: 8, MemoryBytes: 32 << 30}}
		if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: n})); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % nodes
			if _, err := c.Agent.Heartbeat(ctx, connect.NewRequest(&unyov1.HeartbeatRequest{Node: name(i), PluginsUnchanged: true})); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
