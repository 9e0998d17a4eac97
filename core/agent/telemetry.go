package agent

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks/metricformat"
	"github.com/unyo-ops/unyo/checks/nagios"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/ctxwait"
	"github.com/unyo-ops/unyo/core/logtail"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/spool"
	"github.com/unyo-ops/unyo/core/sysmetrics"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// PerfdataMetric is the series every perfdata item of a check becomes:
// unyo_check_perfdata{check, label, uom} with the value in base units
// (bytes, seconds; see nagios.Perf.BaseValue) and uom the base unit
// ("bytes", "seconds", "percent", "counter", "" or the plugin's own unit).
// One name with the label as a label, rather than a name per label, keeps
// every label a plugin prints (such as "/" or "time ms") without mangling,
// and lets `{check="disk"}` select all of a check's values.
const PerfdataMetric = "unyo_check_perfdata"

// openOutboxes opens the spools of metrics and logs next to the results'.
func (a *Agent) openOutboxes() error {
	for _, o := range []struct {
		name string
		dst  **outbox
		send func(context.Context, [][]byte) (int, error)
	}{
		{"metrics", &a.metrics, a.sendMetrics},
		{"logs", &a.logs, a.sendLogs},
	} {
		dir := filepath.Join(a.opts.DataDir, "spool-"+o.name)
		sp, err := spool.Open(spool.Options{Dir: dir, MaxBytes: a.opts.SpoolMaxBytes, LazyAcks: true, Logger: a.log})
		if err != nil {
			return fmt.Errorf("open the %s spool: %w", o.name, err)
		}
		a.logReplay(o.name, dir, sp)
		*o.dst = &outbox{name: o.name, dir: dir, spool: sp, send: o.send}
	}
	return nil
}

// maxPointsPerRecord bounds one spooled metric batch, so that any record
// fits a request (the cluster takes at most 100,000 points per request) and
// a batch the cluster refuses loses little.
const maxPointsPerRecord = 10_000

// spoolBuilder is a metricbatch.Builder that makes a spool record of every
// maxPointsPerRecord points.
type spoolBuilder struct {
	metricbatch.Builder
	recs [][]byte
	err  error
}

func (sb *spoolBuilder) add(name string, labels []tsdb.Label, timeMs int64, value float64) {
	sb.Add(name, labels, timeMs, value)
	if sb.Points() >= maxPointsPerRecord {
		sb.cut()
	}
}

// cut ends the current batch as a record.
func (sb *spoolBuilder) cut() {
	b := sb.Take()
	if b == nil || sb.err != nil {
		return
	}
	rec, err := metricbatch.AppendRecord(nil, b)
	if err != nil {
		sb.err = err
		return
	}
	sb.recs = append(sb.recs, rec)
}

// spool appends what was built to the metrics spool in one write, and
// readies sb for the next collection.
func (sb *spoolBuilder) spool(a *Agent) error {
	sb.cut()
	recs, err := sb.recs, sb.err
	sb.recs, sb.err = nil, nil
	if err != nil || len(recs) == 0 {
		return err
	}
	return a.metrics.spool.Append(recs...)
}

// spoolPerfdata turns a result's perfdata into samples at the run's start
// and spools them.
func (a *Agent) spoolPerfdata(e *unyov1.Event) error {
	var sb spoolBuilder
	at := e.GetStartedAt().AsTime().UnixMilli()
	for _, p := range e.GetPerfdata() {
		v, unit := nagios.Perf{Label: p.GetLabel(), Value: p.GetValue(), UOM: p.GetUom()}.BaseValue()
		if math.IsNaN(v) {
			continue // "U": the plugin could not determine the value
		}
		sb.add(PerfdataMetric, []tsdb.Label{{Name: "check", Value: e.GetCheck()}, {Name: "label", Value: p.GetLabel()}, {Name: "uom", Value: unit}}, at, v)
	}
	return sb.spool(a)
}

// spoolSamples spools the samples a check printed.
func (a *Agent) spoolSamples(samples []metricformat.Sample) error {
	var sb spoolBuilder
	for _, s := range samples {
		sb.add(s.Name, s.Labels, s.TimeMs, s.Value)
	}
	return sb.spool(a)
}

// metricsLoop collects system metrics every MetricsInterval into the spool,
// one record per collection.
func (a *Agent) metricsLoop(ctx context.Context) {
	col := sysmetrics.New(sysmetrics.Options{})
	var buf []sysmetrics.Sample
	var sb spoolBuilder // kept: its string index keeps its memory
	t := time.NewTicker(a.opts.MetricsInterval)
	defer t.Stop()
	for {
		var err error
		buf, err = col.Collect(ctx, buf[:0])
		if err != nil && ctx.Err() == nil {
			// Partial: whatever could be read is still sent.
			a.log.Debug("some system metrics could not be read", "err", err)
		}
		at := time.Now().UnixMilli()
		for _, s := range buf {
			sb.add(s.Name, s.Labels, at, s.Value)
		}
		if err := sb.spool(a); err != nil {
			a.log.Error("spooling system metrics failed; this collection is lost", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// The agent's tailer looks at its files once a second (logtail's default
// is 4 times) and writes its offsets at most every 10 s (logtail's: every
// second): each look is a wake-up of the whole process and each write
// of the offsets two fsyncs, paid on every node. A line so reaches the
// spool up to a second after it was written, about when the results
// outbox would send it anyway; after a crash up to 10 s of lines are
// read again, and the cluster drops them by file id and offset (see
// unyov1.LogEntry).
const (
	logPollInterval  = time.Second
	logStateInterval = 10 * time.Second
)

// logsLoop tails the configured files into the logs spool. A batch's
// offsets are committed only after it is spooled, so nothing is lost; lines
// replayed after a crash carry their file id and offset and the cluster
// drops them.
func (a *Agent) logsLoop(ctx context.Context) {
	files := make([]logtail.FileConfig, len(a.opts.Logs))
	copy(files, a.opts.Logs)
	tl, err := logtail.New(logtail.Options{
		Files: files, Host: a.opts.NodeName, StateFile: filepath.Join(a.opts.DataDir, "logtail.state"),
		BatchSize: a.opts.BatchSize, Logger: a.log, PollInterval: logPollInterval, PollPhase: a.flushPhase(), StateInterval: logStateInterval,
	})
	if err != nil {
		a.log.Error("agent.logs: cannot tail log files", "err", err)
		return
	}
	bo := backoff{min: time.Second, max: 30 * time.Second}
	for {
		err := tl.Run(ctx, a.spoolLogs)
		if ctx.Err() != nil {
			return
		}
		a.log.Error("tailing log files stopped; retrying", "err", err)
		if !ctxwait.Sleep(ctx, bo.next()) {
			return
		}
	}
}

func (a *Agent) spoolLogs(batch []logtail.Record) error {
	// Log checks see the lines before they are spooled, so that an alert
	// does not wait for the cluster.
	a.logChecks.observe(batch)
	recs := make([][]byte, len(batch))
	for i, r := range batch {
		fields := r.Fields
		if r.File != "" || r.Truncated {
			fields = make(map[string]string, len(r.Fields)+2)
			for k, v := range r.Fields {
				fields[k] = v
			}
			fields["file"] = r.File
			if r.Truncated {
				fields["line_truncated"] = "true"
			}
		}
		e := &unyov1.LogEntry{
			Time: timestamppb.New(r.Time), Host: r.Host, App: r.App, Level: strings.ToLower(r.Level), TraceId: r.TraceID,
			Message: r.Message, Fields: fields, File: r.File, FileId: r.FileID, Offset: r.Offset, Sequence: a.logSeq.Add(1),
		}
		b, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode a log line of %s: %w", r.File, err)
		}
		recs[i] = b
	}
	if err := a.logs.spool.Append(recs...); err != nil {
		return fmt.Errorf("spool %d log lines: %w", len(recs), err)
	}
	return nil
}
