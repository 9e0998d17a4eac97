package cluster

import (
	"context"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/store"
)

// NewMetricTicker returns the metric checks' evaluation as the controller
// runs it, for tests to drive at times they choose.
func NewMetricTicker(c *Cluster) func(ctx context.Context, at time.Time) []*unyov1.Event {
	return newMetricRunner(c).tick
}

// RunStats returns one pass of the statistics controller as the lease
// holder runs it, for tests to drive with a clock of their own.
func RunStats(c *Cluster) func(ctx context.Context, now time.Time) error { return c.stats.run }

// PruneLogs runs the controller's log retention once, at the cluster's clock.
func PruneLogs(c *Cluster, ctx context.Context) { c.newLogPruner().prune(ctx) }

// RecordHistory writes processed events to the event history as the
// pipeline does.
func RecordHistory(c *Cluster, ctx context.Context, events []*unyov1.Event) {
	seq := make([]store.SeqEvent, len(events))
	for i, e := range events {
		seq[i] = store.SeqEvent{Seq: int64(i + 1), Event: e}
	}
	c.recordHistory(ctx, seq, nil)
}

// KeepPeers takes root's answer to a registration as RegisterAtRoot does.
func KeepPeers(c *Cluster, ctx context.Context, resp *unyov1.RegisterClusterResponse) error {
	return c.keepPeers(ctx, resp, client.TLSOptions{})
}

// LogHistory puts the history lines of events ids into the telemetry WAL as
// the pipeline does before it commits the batch (expect, cursor].
func LogHistory(c *Cluster, ctx context.Context, expect, cursor int64, ids ...string) bool {
	entries := make([]logstore.Entry, len(ids))
	for i, id := range ids {
		entries[i] = logstore.EventRecord{Time: time.Now(), Host: "web1", EventID: id, Kind: "check", Outcome: "stored", Message: id}.Entry()
	}
	return c.logHistory(ctx, expect, cursor, prepareLines(entries))
}

// ReplayLines writes the lines of WAL records the log store lacks, as
// replay does.
var ReplayLines = replayLines

// RunNodeStage runs a node stage of c until ctx ends, whether or not c
// holds the controller lease: tests race two of them on one database.
func RunNodeStage(c *Cluster, ctx context.Context) { newNodeStage(c).Run(ctx) }
