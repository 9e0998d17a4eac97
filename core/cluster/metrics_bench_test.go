package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/sysmetrics"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
	"github.com/unyo-ops/unyo/core/wal"
)

// benchBatch is the number of samples per write on both sides (and of log
// lines in BenchmarkLogsIngest).
const benchBatch = 10000

// ingestShape cuts benchBatch samples into collections: what an agent
// gathers at one instant (one value per series) and spools as one record.
type ingestShape struct {
	name        string
	series      int // per collection
	collections int // per write; series*collections = benchBatch
}

var ingestShapes = []ingestShape{
	// What an agent sends every interval: one collection, every series has
	// one point in the request.
	{"1pt-per-series", benchBatch, 1},
	// An agent sending a backlog after an outage: ten collections of the
	// same 1,000 series, so every series has ten points in the request.
	{"10pts-per-series", benchBatch / 10, 10},
}

// BenchmarkMetricsIngest measures, side by side in one run, the same samples
// written straight into the embedded VictoriaMetrics (tsdb.Store.Write of
// ready-made samples) and sent through the agent API: from the agent's
// in-memory collections (sysmetrics.Sample) through the agent's encoding
// (one metric batch per collection, spooled as a record and read back, disk
// aside), protobuf over HTTP, the cluster's checks and node label, into the
// same store; and the same through a cluster with its telemetry WAL (the
// samples fsync'd before the ack, as `unyo server` runs). Every iteration
// does all three, each first in turn, each timed on its own, so that load
// from elsewhere on the machine and the store's background merges weigh on
// all alike. The targets: the API path at no less than half the direct rate
// (api/direct >= 50%, api-wal/direct too), at least 200,000 samples/s, and
// the WAL costing at most 25% of the API's rate (wal-cost <= 25%).
func BenchmarkMetricsIngest(b *testing.B) {
	db, err := vmembed.Open(vmembed.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c := startTelemetryCluster(b, cluster.Options{Metrics: db})
	// A cluster with its telemetry WAL, as `unyo server` runs it, on the
	// same TSDB: samples are fsync'd before the ack.
	w, err := wal.Open(wal.Options{Dir: b.TempDir(), MaxBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cw := startTelemetryCluster(b, cluster.Options{Metrics: db, TelemetryWAL: w})
	start := time.Now().Add(-time.Hour)

	for _, sh := range ingestShapes {
		b.Run(sh.name, func(b *testing.B) {
			ctx := context.Background()
			suffix := strings.ReplaceAll(sh.name, "-", "_")
			// Collection j of write i is taken at the (i*collections+j)-th second.
			at := func(i, j int) time.Time { return start.Add(time.Duration(i*sh.collections+j) * time.Second) }

			// Direct: the samples as tsdb.Store.Write takes them.
			direct := make([]tsdb.Sample, 0, benchBatch)
			for range sh.collections {
				for k := 0; k < sh.series; k++ {
					direct = append(direct, tsdb.Sample{Name: "bench_direct_" + suffix, Labels: map[string]string{"node": "web1", "series": strconv.Itoa(k)}})
				}
			}
			writeDirect := func(i int) {
				for x := range direct {
					direct[x].Timestamp, direct[x].Value = at(i, x/sh.series), float64(i*benchBatch+x)
				}
				if err := db.Write(ctx, direct); err != nil {
					b.Fatal(err)
				}
			}

			// Agent API: the same samples as the agent's collector holds
			// them, each side with its own metric name.
			var bl metricbatch.Builder // the agent keeps its builder, as metricsLoop does
			writeVia := func(c *client.Clients, name string) func(i int) {
				collection := make([]sysmetrics.Sample, sh.series)
				for k := range collection {
					collection[k] = sysmetrics.Sample{Name: name + suffix, Labels: []sysmetrics.Label{{Name: "series", Value: strconv.Itoa(k)}}}
				}
				return func(i int) { writeAPIWith(b, c, &bl, collection, sh, at, i) }
			}
			writeAPI, writeWAL := writeVia(c, "bench_api_"), writeVia(cw, "bench_wal_")

			var tDirect, tAPI, tWAL time.Duration
			timed := func(d *time.Duration, write func(int), i int) {
				t0 := time.Now()
				write(i)
				*d += time.Since(t0)
			}
			sides := []struct {
				d     *time.Duration
				write func(int)
			}{{&tDirect, writeDirect}, {&tAPI, writeAPI}, {&tWAL, writeWAL}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Each side first, second and third in turn.
				for k := range sides {
					sd := sides[(i+k)%len(sides)]
					timed(sd.d, sd.write, i)
				}
			}
			n := float64(b.N * benchBatch)
			b.ReportMetric(n/tDirect.Seconds(), "direct-samples/s")
			b.ReportMetric(n/tAPI.Seconds(), "api-samples/s")
			b.ReportMetric(n/tWAL.Seconds(), "api-wal-samples/s")
			b.ReportMetric(100*tDirect.Seconds()/tAPI.Seconds(), "api/direct-%")
			b.ReportMetric(100*tDirect.Seconds()/tWAL.Seconds(), "api-wal/direct-%")
			// What the WAL costs: the share of the API's rate it takes away.
			b.ReportMetric(100*(1-tAPI.Seconds()/tWAL.Seconds()), "wal-cost-%")
		})
	}
}

// writeAPIWith sends write i of the benchmark through the agent API of c,
// from the agent's in-memory collections: the agent's encoding (one metric
// batch per collection, spooled as a record and read back, disk aside),
// protobuf over HTTP, the cluster's checks and node label, into the store.
func writeAPIWith(b *testing.B, c *client.Clients, bl *metricbatch.Builder, collection []sysmetrics.Sample, sh ingestShape, at func(i, j int) time.Time, i int) {
	ctx := context.Background()
	// The agent: one record per collection into the spool ...
	records := make([][]byte, sh.collections)
	for j := range records {
		for k := range collection {
			collection[k].Value = float64(i*benchBatch + j*sh.series + k)
		}
		ms := at(i, j).UnixMilli()
		for _, s := range collection {
			bl.Add(s.Name, s.Labels, ms, s.Value)
		}
		var err error
		if records[j], err = metricbatch.AppendRecord(nil, bl.Take()); err != nil {
			b.Fatal(err)
		}
	}
	// ... and out of it into a request, as sendMetrics does.
	batches, bad, err := metricbatch.DecodeRecords(records, benchBatch)
	if bad > 0 {
		b.Fatal(err)
	}
	req := &unyov1.WriteMetricsRequest{Node: "web1"}
	metricbatch.SetBatches(req, batches)
	resp, err := c.Metrics.WriteMetrics(ctx, connect.NewRequest(req))
	if err != nil {
		b.Fatal(err)
	}
	if n := resp.Msg.GetAccepted(); n != benchBatch {
		b.Fatalf("the cluster accepted %d samples, want %d", n, benchBatch)
	}
}
