package agent

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/checks/schedule"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/selfmon"
	"github.com/unyo-ops/unyo/core/spool"
)

// maxBatchBytes keeps one report well under the server's message limit.
const maxBatchBytes = 4 << 20

// outbox is one spool and how its records reach the cluster. Results,
// metrics and logs each have their own, so that a flood of log lines never
// delays check results, and a cluster refusing one kind does not block the
// others.
type outbox struct {
	name  string // results, metrics or logs: for the log
	dir   string
	spool *spool.Spool
	// send delivers a batch of records; the cluster must drop (or harmlessly
	// rewrite) records it stored before. It returns how many it sent.
	send func(ctx context.Context, records [][]byte) (int, error)
}

// sendLoop delivers spooled records in order, oldest first, and removes them
// from the spool only after the cluster has stored them. A failed send is
// retried with backoff; the cluster drops what it has already stored, so a
// resend after a lost answer never doubles anything.
func (a *Agent) sendLoop(ctx context.Context, o *outbox) {
	bo := backoff{min: 200 * time.Millisecond, max: 30 * time.Second}
	for {
		if err := o.spool.Wait(ctx); err != nil {
			return
		}
		// Let a few records gather so a busy node sends batches, not drips.
		if o.spool.Stats().PendingRecords < int64(a.opts.BatchSize) && !ctxwait.Sleep(ctx, time.Until(ctxwait.NextTick(time.Now(), a.opts.FlushInterval, a.flushPhase()))) {
			return
		}
		if !a.isRegistered() {
			if !ctxwait.Sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		batch, err := o.spool.Peek(a.opts.BatchSize, maxBatchBytes)
		if err != nil {
			a.log.Error("reading the spool failed", "spool", o.name, "dir", o.dir, "err", err)
			if !ctxwait.Sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		if len(batch.Records) == 0 {
			continue
		}
		n, err := o.send(ctx, batch.Records)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if connect.CodeOf(err) == connect.CodeNotFound {
				select {
				case a.reregister <- struct{}{}:
				default:
				}
			}
			a.status.sendFailed(err)
			a.self.Counter("unyo_agent_send_failures_total{spool=" + selfmon.Label(o.name) + "}").Inc()
			a.log.Warn("sending to the cluster failed; the records stay spooled", "spool", o.name,
				"pending", o.spool.Stats().PendingRecords, "err", a.cl.Explain(err))
			if !ctxwait.Sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		a.self.Counter("unyo_agent_sent_records_total{spool=" + selfmon.Label(o.name) + "}").Add(len(batch.Records))
		if err := o.spool.Ack(batch); err != nil {
			a.log.Error("acknowledging sent records in the spool failed; they may be sent again", "spool", o.name, "err", err)
		}
		if o.name == "results" {
			a.status.sent(n)
		}
	}
}

// An outbox with records waits for the node's next instant of
// FlushInterval (flushPhase) before it sends. The results, metrics and
// logs outboxes (and the log tailer's looks) share those instants, so that
// they take one wake-up of the agent instead of three, and a record waits
// FlushInterval/2 on average instead of FlushInterval. The phase comes from
// the node's name, so that a fleet does not send in the same instant.
//
// flushPhase is this node's phase of the outboxes' sends and the log
// tailer's looks.
func (a *Agent) flushPhase() time.Duration {
	return schedule.Splay(a.opts.NodeName, "", a.opts.FlushInterval)
}

// decodeAll unmarshals spooled records, dropping (and logging) unreadable
// ones: a corrupt record must not block the spool forever.
func decodeAll[T proto.Message](a *Agent, what string, records [][]byte, fresh func() T) []T {
	out := make([]T, 0, len(records))
	for _, rec := range records {
		m := fresh()
		if err := proto.Unmarshal(rec, m); err != nil {
			a.log.Error("dropping an unreadable spooled record", "spool", what, "err", err)
			continue
		}
		out = append(out, m)
	}
	return out
}

func (a *Agent) sendResults(ctx context.Context, records [][]byte) (int, error) {
	req := &unyov1.ReportResultsRequest{Node: a.opts.NodeName,
		Results: decodeAll(a, "results", records, func() *unyov1.Event { return new(unyov1.Event) })}
	resp, err := a.cl.Agent.ReportResults(ctx, connect.NewRequest(req))
	if err != nil {
		return 0, err
	}
	for _, r := range resp.Msg.GetRejected() {
		a.log.Error("the cluster rejected a result", "why", r)
	}
	return len(req.Results), nil
}

// maxPointsPerRequest is the cluster's limit of samples per WriteMetrics.
const maxPointsPerRequest = 100_000

// sendMetrics sends spooled metric batches, in several requests when they
// exceed the cluster's limit. A failure part-way fails the whole call, and
// the records are sent again: rewriting samples the cluster already stored
// is harmless.
func (a *Agent) sendMetrics(ctx context.Context, records [][]byte) (int, error) {
	batches, bad, err := metricbatch.DecodeRecords(records, maxPointsPerRecord)
	if bad > 0 {
		a.log.Error("dropping unreadable spooled metric records", "records", bad, "first", err)
	}
	sent := 0
	for len(batches) > 0 {
		n, points := 0, 0
		for n < len(batches) && (n == 0 || points+batches[n].Points <= maxPointsPerRequest) {
			points += batches[n].Points
			n++
		}
		req := &unyov1.WriteMetricsRequest{Node: a.opts.NodeName}
		metricbatch.SetBatches(req, batches[:n])
		batches = batches[n:]
		if _, err := a.cl.Metrics.WriteMetrics(ctx, connect.NewRequest(req)); err != nil {
			if c := connect.CodeOf(err); c == connect.CodeInvalidArgument || c == connect.CodeFailedPrecondition {
				// Resending cannot help: drop the batch rather than block the
				// spool (a cluster without a TSDB would otherwise fill it).
				a.log.Error("the cluster refused metrics; dropping the batch", "samples", points, "err", err)
				continue
			}
			return sent, err
		}
		sent += points
	}
	return sent, nil
}

func (a *Agent) sendLogs(ctx context.Context, records [][]byte) (int, error) {
	req := &unyov1.WriteLogsRequest{Node: a.opts.NodeName,
		Entries: decodeAll(a, "logs", records, func() *unyov1.LogEntry { return new(unyov1.LogEntry) })}
	resp, err := a.cl.Logs.WriteLogs(ctx, connect.NewRequest(req))
	if err != nil {
		if c := connect.CodeOf(err); c == connect.CodeInvalidArgument || c == connect.CodeFailedPrecondition {
			a.log.Error("the cluster refused log lines; dropping the batch", "lines", len(req.Entries), "err", err)
			return 0, nil
		}
		return 0, err
	}
	if r := resp.Msg.GetRejected(); r > 0 {
		a.log.Warn("the cluster did not store log lines older than its retention", "lines", r)
	}
	return len(req.Entries), nil
}
