package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/testutil"
	"github.com/unyo-ops/unyo/integration/testpg"
)

// pipelineBench sends results through the agent API at a given rate (0: as
// fast as possible) and reports processed results/s and the latency from
// receipt to the alerts and explanation being committed.
// It also reports CPU milliseconds per 1,000 results: of this process (the
// cluster and the senders), and of the database server (pg, if not nil) and
// both together, which, unlike results/s, a loaded machine does not skew.
func pipelineBench(b *testing.B, st store.Store, pg *testpg.Server, rate int) {
	c := startCluster(b, st)
	ctx := context.Background()
	objs, err := manifest.Decode(strings.NewReader(testutil.HundredRules()), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: objs})); err != nil {
		b.Fatal(err)
	}
	const nodes, batch = 8, 250
	for i := range nodes {
		if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: fmt.Sprintf("node-%d", i)}})); err != nil {
			b.Fatal(err)
		}
	}
	levels := []unyov1.Level{ok, ok, ok, ok, ok, ok, ok, warn, warn, crit}
	b.ResetTimer()
	start, cpu0, pgCPU0 := time.Now(), cpuTime(b), serverCPU(b, pg)
	var wg sync.WaitGroup
	per := b.N/nodes + 1
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("node-%d", n)
			for sent := 0; sent < per; sent += batch {
				if rate > 0 { // pace: this node's share of the rate
					due := start.Add(time.Duration(float64(sent) / float64(rate/nodes) * float64(time.Second)))
					time.Sleep(time.Until(due))
				}
				req := &unyov1.ReportResultsRequest{Node: node}
				for j := range batch {
					k := sent + j
					req.Results = append(req.Results, &unyov1.Event{Id: uuid.Must(uuid.NewV7()).String(), Node: node,
						Check: fmt.Sprintf("check-%d", k%40), Level: levels[k%len(levels)], Output: "result", StartedAt: timestamppb.Now()})
				}
				if _, err := c.Agent.ReportResults(ctx, connect.NewRequest(req)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	last := waitProcessed(b, st)
	elapsed, cpu, pgCPU := time.Since(start), cpuTime(b)-cpu0, serverCPU(b, pg)-pgCPU0
	b.StopTimer()
	lat := latencies(b, c)
	b.ReportMetric(float64(last)/elapsed.Seconds(), "results/s")
	perK := func(d time.Duration) float64 { return float64(d.Milliseconds()) / (float64(last) / 1000) }
	b.ReportMetric(perK(cpu), "cpu-ms/1k")
	if pg != nil {
		b.ReportMetric(perK(pgCPU), "pg-cpu-ms/1k")
		b.ReportMetric(perK(cpu+pgCPU), "total-cpu-ms/1k")
	}
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
}

// waitProcessed waits until the pipeline cursor reaches the last event.
func waitProcessed(b *testing.B, st store.Store) int {
	ctx := context.Background()
	for {
		ps, err := st.LoadPipeline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rest, err := st.NextEvents(ctx, ps.Cursor, 1)
		if err != nil {
			b.Fatal(err)
		}
		if len(rest) == 0 {
			return int(ps.Cursor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencies are received→processed times of the newest 10,000 events.
func latencies(b *testing.B, c *client.Clients) []time.Duration {
	resp, err := c.Events.ListEvents(context.Background(), connect.NewRequest(&unyov1.ListEventsRequest{History: true, Limit: 10000}))
	if err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	for _, e := range resp.Msg.GetEvents() {
		if p := e.GetExplanation().GetProcessedAt(); p != nil {
			out = append(out, p.AsTime().Sub(e.GetReceivedAt().AsTime()))
		}
	}
	if len(out) == 0 {
		b.Fatal("no processed events")
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func openSQLite(b *testing.B) store.Store {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func openPostgresDurable(b *testing.B) (store.Store, *testpg.Server) {
	pg := testpg.New(b, testpg.WithDurable())
	st, err := sqlstore.OpenPostgres(context.Background(), pg.DSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, pg
}

// serverCPU is the CPU time of the database server pg (0 if nil).
func serverCPU(tb testing.TB, pg *testpg.Server) time.Duration {
	if pg == nil {
		return 0
	}
	d, err := pg.CPUTime()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Throughput: as fast as the cluster takes results.
func BenchmarkPipelineSQLite(b *testing.B) { pipelineBench(b, openSQLite(b), nil, 0) }
func BenchmarkPipelinePostgresDurable(b *testing.B) {
	st, pg := openPostgresDurable(b)
	pipelineBench(b, st, pg, 0)
}

// Latency at half the target rate (10,000/s embedded, 5,000/s PostgreSQL).
func BenchmarkPipelineLatencySQLite5k(b *testing.B) { pipelineBench(b, openSQLite(b), nil, 5000) }
func BenchmarkPipelineLatencyPostgres2500(b *testing.B) {
	st, pg := openPostgresDurable(b)
	pipelineBench(b, st, pg, 2500)
}
