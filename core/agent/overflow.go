package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/ctxwait"
)

const (
	// DefaultBufferRecords and DefaultBufferBytes bound the results kept in
	// memory while the spool cannot be written.
	DefaultBufferRecords = 10_000
	DefaultBufferBytes   = 32 << 20

	// spoolCheck names the synthetic check whose CRITICAL results report
	// results the agent had to drop.
	spoolCheck = "agent-spool"
)

// overflow keeps, in order, the results the spool could not take (disk
// full, I/O errors), within bounds; when full it drops the oldest and
// counts them. While it holds anything, new results queue behind them so
// that order is kept.
type overflow struct {
	maxRecords int
	maxBytes   int64

	// mu also serializes writes to the results spool, so that a result
	// never passes one queued here.
	mu    sync.Mutex
	recs  [][]byte
	bytes int64
	// head numbers recs[0]; it tells a sender whether what it took is
	// still at the front after unlocking.
	head uint64
	// Totals since start, and the drops not yet raised as an event.
	droppedRecords, droppedBytes int64
	unreported, unreportedBytes  int64
	// lastErr is the spool's last write error; dropErr the one current
	// when results were last dropped.
	lastErr, dropErr string
}

// bufferStats is the overflow buffer in the agent's /status.
type bufferStats struct {
	Records        int    `json:"records"`
	Bytes          int64  `json:"bytes"`
	MaxRecords     int    `json:"max_records"`
	MaxBytes       int64  `json:"max_bytes"`
	DroppedRecords int64  `json:"dropped_records"`
	DroppedBytes   int64  `json:"dropped_bytes"`
	SpoolError     string `json:"spool_error,omitempty"`
}

func (o *overflow) stats() bufferStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bufferStats{Records: len(o.recs), Bytes: o.bytes, MaxRecords: o.maxRecords, MaxBytes: o.maxBytes,
		DroppedRecords: o.droppedRecords, DroppedBytes: o.droppedBytes, SpoolError: o.lastErr}
}

// pushLocked queues rec, dropping the oldest records to stay in bounds. It
// returns how many it dropped.
func (o *overflow) pushLocked(rec []byte) int {
	o.recs = append(o.recs, rec)
	o.bytes += int64(len(rec))
	n := 0
	for len(o.recs) > 1 && (len(o.recs) > o.maxRecords || o.bytes > o.maxBytes) {
		sz := int64(len(o.recs[0]))
		o.recs[0] = nil
		o.recs = o.recs[1:]
		o.head++
		o.bytes -= sz
		o.droppedRecords++
		o.droppedBytes += sz
		o.unreported++
		o.unreportedBytes += sz
		o.dropErr = o.lastErr
		n++
	}
	return n
}

// removeLocked drops the first n records, which were delivered.
func (o *overflow) removeLocked(n int) {
	for i := range n {
		o.bytes -= int64(len(o.recs[i]))
		o.recs[i] = nil
	}
	o.recs = o.recs[n:]
	o.head += uint64(n)
	if len(o.recs) == 0 {
		o.recs = nil // let a grown array go
	}
}

// storeResult writes an encoded result to the spool or, if that fails or
// results are already waiting in memory, to the overflow buffer.
func (a *Agent) storeResult(rec []byte, check string) {
	o := &a.overflow
	o.mu.Lock()
	if len(o.recs) == 0 {
		err := a.appendResults(rec)
		if err == nil {
			o.mu.Unlock()
			return
		}
		o.lastErr = err.Error()
		a.log.Error("cannot write a check result to the spool; keeping results in memory until it can be written or sent",
			"check", check, "dir", a.opts.SpoolDir, "buffer_max_records", o.maxRecords, "buffer_max_bytes", o.maxBytes, "err", err)
	}
	dropped := o.pushLocked(rec)
	total := o.droppedRecords
	o.mu.Unlock()
	if dropped > 0 {
		a.log.Error("the in-memory result buffer is full; dropped the oldest results",
			"dropped", dropped, "dropped_total", total, "buffer_max_records", o.maxRecords, "buffer_max_bytes", o.maxBytes)
	}
	select {
	case a.overflowKick <- struct{}{}:
	default:
	}
}

// overflowLoop empties the overflow buffer: into the spool once it can be
// written again, or straight to the cluster while it cannot, and raises
// an event for the results it had to drop.
func (a *Agent) overflowLoop(ctx context.Context) {
	bo := backoff{min: 500 * time.Millisecond, max: 10 * time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.overflowKick:
		}
		for {
			progress, left := a.flushOverflow(ctx)
			a.reportDrops()
			if left == 0 {
				bo.reset()
				break
			}
			if progress {
				bo.reset()
				continue
			}
			if !ctxwait.Sleep(ctx, bo.next()) {
				return
			}
		}
	}
}

// flushOverflowAtExit spools what the buffer still holds when the agent
// stops, and says how many results are lost if the spool still fails.
func (a *Agent) flushOverflowAtExit() {
	o := &a.overflow
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.recs) == 0 {
		return
	}
	if err := a.appendResults(o.recs...); err != nil {
		a.log.Error("stopping with check results the spool cannot take; they are lost",
			"results", len(o.recs), "bytes", o.bytes, "dir", a.opts.SpoolDir, "err", err)
		return
	}
	o.removeLocked(len(o.recs))
}

// flushOverflow moves what it can out of the buffer, reporting whether it
// moved anything and how many records are left.
func (a *Agent) flushOverflow(ctx context.Context) (progress bool, left int) {
	o := &a.overflow
	o.mu.Lock()
	for len(o.recs) > 0 {
		n := min(len(o.recs), a.opts.BatchSize)
		if err := a.appendResults(o.recs[:n]...); err != nil {
			// A prefix may have been written: the cluster drops results
			// it has seen, so sending them again is harmless.
			o.lastErr = err.Error()
			break
		}
		o.removeLocked(n)
		progress = true
	}
	if len(o.recs) == 0 {
		if o.lastErr != "" {
			a.log.Info("the spool can be written again; the results kept in memory are spooled")
		}
		o.lastErr = ""
		o.mu.Unlock()
		return progress, 0
	}
	// The spool still fails. Send straight to the cluster, once the spool
	// has delivered the older results it holds.
	if !a.isRegistered() || a.spool.Stats().PendingRecords > 0 {
		left = len(o.recs)
		o.mu.Unlock()
		return progress, left
	}
	n := min(len(o.recs), a.opts.BatchSize)
	batch, head := append([][]byte(nil), o.recs[:n]...), o.head
	o.mu.Unlock()

	if _, err := a.sendResults(ctx, batch); err != nil {
		a.status.sendFailed(err)
		a.log.Warn("sending results kept in memory to the cluster failed; will retry", "records", len(batch),
			"err", client.Explain(a.opts.ClusterURL, err))
		o.mu.Lock()
		defer o.mu.Unlock()
		return progress, len(o.recs)
	}
	a.status.sent(len(batch))
	o.mu.Lock()
	defer o.mu.Unlock()
	// Drops may have removed some of the batch from the front meanwhile.
	if done := int(int64(head) + int64(n) - int64(o.head)); done > 0 {
		o.removeLocked(min(done, len(o.recs)))
	}
	return true, len(o.recs)
}

// reportDrops raises a CRITICAL result of the agent-spool check for results
// dropped since the last report, once the buffer has room for it.
func (a *Agent) reportDrops() {
	o := &a.overflow
	o.mu.Lock()
	n, b, total, why := o.unreported, o.unreportedBytes, o.droppedRecords, o.dropErr
	if n == 0 || len(o.recs) >= o.maxRecords {
		o.mu.Unlock()
		return
	}
	o.unreported, o.unreportedBytes = 0, 0
	o.mu.Unlock()
	if why == "" {
		why = "the spool could not be written"
	}
	e := a.newEvent(checks.Definition{Name: spoolCheck})
	e.StartedAt = timestamppb.Now()
	e.Duration = durationpb.New(0)
	e.Status = unyov1.CheckStatus_CHECK_STATUS_CRITICAL
	e.Level = checks.LevelFor(e.Status, 0)
	e.ExitCode = 2
	e.Output = fmt.Sprintf("CRITICAL - dropped %d check results (%d bytes; %d since the agent started): the spool in %s could not be written (%s) and the in-memory buffer (%d results, %d bytes) was full",
		n, b, total, a.opts.SpoolDir, why, o.maxRecords, o.maxBytes)
	a.log.Error("raised an event for dropped results", "check", spoolCheck, "dropped", n, "dropped_total", total)
	a.spoolResult(e)
}
