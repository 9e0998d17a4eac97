package agent

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
)

// maxBatchBytes keeps one report well under the server's message limit.
const maxBatchBytes = 4 << 20

// sendLoop delivers spooled results in order, oldest first, and removes them
// from the spool only after the cluster has stored them. A failed send is
// retried with backoff; the cluster drops ids it has already stored, so a
// resend after a lost answer never doubles a result.
func (a *Agent) sendLoop(ctx context.Context) {
	bo := backoff{min: 200 * time.Millisecond, max: 30 * time.Second}
	for {
		if err := a.spool.Wait(ctx); err != nil {
			return
		}
		// Let a few results gather so a busy node sends batches, not drips.
		if a.spool.Stats().PendingRecords < int64(a.opts.BatchSize) && !sleep(ctx, a.opts.FlushInterval) {
			return
		}
		if !a.isRegistered() {
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		batch, err := a.spool.Peek(a.opts.BatchSize, maxBatchBytes)
		if err != nil {
			a.log.Error("reading the result spool failed", "dir", a.opts.SpoolDir, "err", err)
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		if len(batch.Records) == 0 {
			continue
		}
		req := &unyov1.ReportResultsRequest{Node: a.opts.NodeName}
		for _, rec := range batch.Records {
			e := new(unyov1.Event)
			if err := proto.Unmarshal(rec, e); err != nil {
				a.log.Error("dropping an unreadable spooled result", "err", err)
				continue
			}
			req.Results = append(req.Results, e)
		}
		resp, err := a.cl.Agent.ReportResults(ctx, connect.NewRequest(req))
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
			a.log.Warn("sending results failed; they stay spooled", "pending", a.spool.Stats().PendingRecords, "err", client.Explain(a.opts.ClusterURL, err))
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		for _, r := range resp.Msg.GetRejected() {
			a.log.Error("the cluster rejected a result", "why", r)
		}
		if err := a.spool.Ack(batch); err != nil {
			a.log.Error("acknowledging sent results in the spool failed; they may be sent again", "err", err)
		}
		a.status.sent(len(req.Results))
	}
}
