package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/wal"
)

// Telemetry is acknowledged only once it is in the cluster's write-ahead
// log (Options.TelemetryWAL): the TSDB and the log store buffer writes in
// memory for seconds, the WAL is fsync'd (one fsync shared by concurrent
// requests). At start, ReplayTelemetry writes what the WAL holds into the
// stores; the WAL deletes a segment once the stores have flushed it to disk
// (wal.Options.Keep after the segment was closed).
//
// Records are one kind byte and a body:
//
//	M  a WriteMetricsRequest as the agent sent it (the node is in it)
//	L  node, the log positions the write records, the entries (prepared)
//	H  expect cursor, cursor, the history entries of one pipeline batch
//	A  expect cursor, cursor: that batch was not committed
//
// Replay is idempotent: rewriting samples is harmless (the TSDB keeps one
// sample per series and millisecond), and log and history lines already in
// the log store are not written again (replayLines).
const (
	recMetrics      = 'M'
	recLogs         = 'L'
	recHistory      = 'H'
	recHistoryAbort = 'A'
)

// forever is a retention no entry is older than: entries are prepared for
// the WAL without rejecting any, the store's Write rejects as it always did.
const forever = time.Duration(math.MaxInt64)

// logTelemetry appends rec to the WAL, if there is one, and words a failure
// for the agent: a full WAL is a retryable ResourceExhausted, so the agent
// keeps the data in its spool and sends it again.
func (c *Cluster) logTelemetry(ctx context.Context, what string, rec []byte) error {
	w := c.opts.TelemetryWAL
	if w == nil {
		return nil
	}
	err := w.Append(ctx, rec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wal.ErrFull):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("cluster %q cannot take %s now: %w; the stores are behind, retry later", c.opts.Name, what, err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("cluster %q: make %s durable: %w", c.opts.Name, what, err))
}

func metricsRecord(req *unyov1.WriteMetricsRequest) ([]byte, error) {
	return proto.MarshalOptions{}.MarshalAppend([]byte{recMetrics}, req)
}

// logsRecord encodes an L record.
func logsRecord(node string, pos map[string]store.LogPosition, entries []logstore.Entry) ([]byte, error) {
	b := []byte{recLogs}
	b = appendString(b, node)
	b = binary.AppendUvarint(b, uint64(len(pos)))
	for _, id := range slices.Sorted(maps.Keys(pos)) {
		b = appendString(b, id)
		b = binary.AppendUvarint(b, pos[id].Sequence)
		b = binary.AppendVarint(b, pos[id].Offset)
	}
	return proto.MarshalOptions{}.MarshalAppend(b, &unyov1.QueryLogsResponse{Entries: convert.EntriesToProto(entries)})
}

// historyRecord encodes an H record, or an A record when entries is nil.
func historyRecord(kind byte, expect, cursor int64, entries []logstore.Entry) ([]byte, error) {
	b := []byte{kind}
	b = binary.AppendVarint(b, expect)
	b = binary.AppendVarint(b, cursor)
	if kind == recHistoryAbort {
		return b, nil
	}
	return proto.MarshalOptions{}.MarshalAppend(b, &unyov1.QueryLogsResponse{Entries: convert.EntriesToProto(entries)})
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// reader decodes a record's body.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errors.New("bad number"), nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zig-zag encoded uvarint.
func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err, r.b = errors.New("bad string"), nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) entries() []logstore.Entry {
	if r.err != nil {
		return nil
	}
	var m unyov1.QueryLogsResponse
	if err := proto.Unmarshal(r.b, &m); err != nil {
		r.err = err
		return nil
	}
	out := make([]logstore.Entry, len(m.GetEntries()))
	for i, e := range m.GetEntries() {
		out[i] = convert.EntryFromProto(e, e.GetHost(), e.GetCluster())
	}
	return out
}

// prepareLines normalises entries as the log store will (logstore.Prepare)
// before they go into the WAL, so that a replayed line is the line the
// store holds, times included, and replay can recognise it.
func prepareLines(entries []logstore.Entry) []logstore.Entry {
	out, _ := logstore.Prepare(entries, time.Now(), forever)
	return out
}

// historyBatch is one H record found at replay.
type historyBatch struct {
	expect, cursor int64
	entries        []logstore.Entry
}

// replayed is what the WAL held from before the start.
type replayed struct {
	metrics []*unyov1.WriteMetricsRequest
	// lines are the L records' lines, one slice per record.
	lines [][]logstore.Entry
	// positions are the log positions of the L records, per node and file.
	positions map[string]map[string]store.LogPosition
	history   []historyBatch
	aborted   map[[2]int64]bool
	records   int
	// historyBatches counts the committed history batches, moved to lines.
	historyBatches int
}

func (rp *replayed) add(rec []byte) error {
	if len(rec) == 0 {
		return errors.New("empty record")
	}
	rp.records++
	r := &reader{b: rec[1:]}
	switch rec[0] {
	case recMetrics:
		m := new(unyov1.WriteMetricsRequest)
		if err := proto.Unmarshal(rec[1:], m); err != nil {
			return err
		}
		rp.metrics = append(rp.metrics, m)
	case recLogs:
		node := r.string()
		n := r.uvarint()
		for i := uint64(0); i < n && r.err == nil; i++ {
			id, seq, off := r.string(), r.uvarint(), r.varint()
			if rp.positions[node] == nil {
				rp.positions[node] = map[string]store.LogPosition{}
			}
			if p, ok := rp.positions[node][id]; !ok || seq > p.Sequence {
				rp.positions[node][id] = store.LogPosition{Sequence: seq, Offset: off}
			}
		}
		rp.lines = append(rp.lines, r.entries())
	case recHistory:
		h := historyBatch{expect: r.varint(), cursor: r.varint()}
		h.entries = r.entries()
		rp.history = append(rp.history, h)
	case recHistoryAbort:
		rp.aborted[[2]int64{r.varint(), r.varint()}] = true
	default:
		return fmt.Errorf("unknown record kind %q", rec[0])
	}
	return r.err
}

// ReplayTelemetry writes what the telemetry WAL holds from before the start
// into the TSDB and the log store. Call it before Run and before serving:
// it first records the log positions of the lines it holds, so that an
// agent resending them has them dropped as duplicates, and decides which
// event history was committed. When a store cannot take the replay (a
// remote store down), the cluster serves anyway and the telemetry-wal
// component retries; the WAL then keeps every segment until the replay is
// done.
func (c *Cluster) ReplayTelemetry(ctx context.Context) error {
	w := c.opts.TelemetryWAL
	if w == nil {
		return nil
	}
	rp := &replayed{positions: map[string]map[string]store.LogPosition{}, aborted: map[[2]int64]bool{}}
	if err := w.Replay(func(rec []byte) error {
		if err := rp.add(rec); err != nil {
			// The checksum matched, so this is a record of another version.
			c.log.Warn("telemetry WAL: a record cannot be read; dropped", "err", err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("replay the telemetry WAL: %w", err)
	}
	if rp.records == 0 {
		w.Replayed()
		return nil
	}
	if err := c.settleReplay(ctx, rp); err != nil {
		return fmt.Errorf("replay the telemetry WAL: %w", err)
	}
	if err := c.replayIntoStores(ctx, rp); err != nil {
		c.log.Warn("telemetry WAL: the stores cannot take the replay yet; serving meanwhile, retrying every 5s", "err", err)
		c.replayPending = rp
		return nil
	}
	w.Replayed()
	return nil
}

// settleReplay decides which event history batches were committed and
// records the replayed lines' log positions: what must be settled before
// the cluster serves and runs its pipeline.
func (c *Cluster) settleReplay(ctx context.Context, rp *replayed) error {
	// History batches whose commit did not happen are dropped: the pipeline
	// processes those events again and writes their history then. An A
	// record marks them, so that a later replay, when the cursor has moved
	// past them, does not take them for committed.
	if len(rp.history) > 0 {
		st, err := c.store.LoadPipeline(ctx)
		if err != nil {
			return fmt.Errorf("read the pipeline cursor: %w", err)
		}
		for _, h := range rp.history {
			key := [2]int64{h.expect, h.cursor}
			switch {
			case rp.aborted[key]:
			case h.cursor <= st.Cursor:
				rp.lines = append(rp.lines, h.entries)
				rp.historyBatches++
			default:
				rec, _ := historyRecord(recHistoryAbort, h.expect, h.cursor, nil)
				if err := c.opts.TelemetryWAL.Append(ctx, rec); err != nil {
					return fmt.Errorf("mark uncommitted event history: %w", err)
				}
				rp.aborted[key] = true
			}
		}
		rp.history = nil
	}
	if c.opts.Logs != nil {
		for node, pos := range rp.positions {
			if err := c.advanceLogPositions(ctx, node, pos); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayIntoStores writes the replayed samples and lines; it may be
// called again after a failure.
func (c *Cluster) replayIntoStores(ctx context.Context, rp *replayed) error {
	samples := 0
	if len(rp.metrics) > 0 && c.opts.Metrics == nil {
		c.log.Warn("telemetry WAL: samples from before the restart dropped: metrics.store is none now", "requests", len(rp.metrics))
	} else {
		for _, m := range rp.metrics {
			n, err := c.writeSamples(ctx, c.opts.Metrics, m)
			var bad *tsdb.InvalidSampleError
			var badBatch *badBatchError
			if errors.As(err, &bad) || errors.As(err, &badBatch) {
				c.log.Warn("telemetry WAL: invalid samples dropped", "node", m.GetNode(), "err", err)
				continue
			}
			if err != nil {
				return fmt.Errorf("rewrite samples: %w", err)
			}
			samples += n
		}
	}
	written := 0
	if len(rp.lines) > 0 && c.opts.Logs == nil {
		c.log.Warn("telemetry WAL: log lines from before the restart dropped: logs.store is none now", "requests", len(rp.lines))
	} else if len(rp.lines) > 0 {
		var err error
		if written, err = replayLines(ctx, c.opts.Logs, rp.lines); err != nil {
			return err
		}
	}
	c.log.Info("telemetry WAL replayed", "records", rp.records, "samples", samples,
		"lines_written", written, "history_batches", rp.historyBatches)
	return nil
}

// advanceLogPositions records the positions of replayed lines where they
// are ahead of the stored ones, so that the agent resending them (it had no
// answer) has them dropped as duplicates.
func (c *Cluster) advanceLogPositions(ctx context.Context, node string, pos map[string]store.LogPosition) error {
	cur, err := c.store.GetLogPositions(ctx, node)
	if err != nil {
		return fmt.Errorf("read log positions of node %q: %w", node, err)
	}
	ahead := map[string]store.LogPosition{}
	for id, p := range pos {
		if q, ok := cur[id]; !ok || p.Sequence > q.Sequence {
			ahead[id] = p
		}
	}
	if len(ahead) == 0 {
		return nil
	}
	if err := c.store.PutLogPositions(ctx, node, ahead); err != nil {
		return fmt.Errorf("record log positions of node %q: %w", node, err)
	}
	return nil
}

// lineKey identifies a log line by everything stored about it.
func lineKey(e logstore.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", e.Time.UnixNano(), e.Host, e.App, e.Level, e.TraceID, e.Cluster, e.Message)
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		fmt.Fprintf(&b, "\x00%s=%s", k, e.Fields[k])
	}
	return b.String()
}

// replayLines writes the lines of records the log store does not hold yet:
// the store flushed some of them before the kill, and log stores keep
// duplicates. Lines are compared by everything stored about them. A line
// is owed as many times as the one record holding it most often holds it:
// the same line in two records is a request sent again after a failed
// write, not a second line. A store that can hide lines after a kill
// (logstore.StreamRevealer) reveals them first, or they would be written
// again and turn up twice once their stream is next written to. It returns
// how many lines it wrote.
func replayLines(ctx context.Context, db logstore.Store, records [][]logstore.Entry) (int, error) {
	type group struct{ host, app string }
	type owed struct {
		n     int
		entry logstore.Entry
	}
	groups := map[group]map[string]*owed{}
	spans := map[group][2]time.Time{}
	for _, rec := range records {
		inRecord := map[string]int{}
		for _, e := range rec {
			g, k := group{e.Host, e.App}, lineKey(e)
			if groups[g] == nil {
				groups[g], spans[g] = map[string]*owed{}, [2]time.Time{e.Time, e.Time}
			}
			sp := spans[g]
			spans[g] = [2]time.Time{minTime(sp[0], e.Time), maxTime(sp[1], e.Time)}
			inRecord[k]++
			if o := groups[g][k]; o == nil {
				groups[g][k] = &owed{n: 1, entry: e}
			} else {
				o.n = max(o.n, inRecord[k])
			}
		}
	}
	if r, ok := db.(logstore.StreamRevealer); ok {
		var streams []logstore.Stream
		for g, sp := range spans {
			streams = append(streams, streamDays(g.host, g.app, sp[0], sp[1])...)
		}
		if err := r.RevealStreams(ctx, streams); err != nil {
			return 0, fmt.Errorf("reveal the log streams of replayed lines: %w", err)
		}
	}
	var missing []logstore.Entry
	for g, lines := range groups {
		have := map[string]int{}
		sp := spans[g]
		if err := countStored(ctx, db, logstore.Query{Host: g.host, App: g.app, Since: sp[0], Until: sp[1].Add(time.Nanosecond)}, have); err != nil {
			return 0, err
		}
		for k, o := range lines {
			for range o.n - have[k] {
				missing = append(missing, o.entry)
			}
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	if err := db.Write(ctx, missing); err != nil && !errors.Is(err, logstore.ErrRejected) {
		return 0, fmt.Errorf("rewrite %d log lines: %w", len(missing), err)
	}
	return len(missing), nil
}

// streamDays is one Stream of host and app per UTC day from since to until.
func streamDays(host, app string, since, until time.Time) []logstore.Stream {
	var out []logstore.Stream
	for t := since.UTC(); !t.After(until); t = t.Truncate(24 * time.Hour).Add(24 * time.Hour) {
		out = append(out, logstore.Stream{Host: host, App: app, Time: t})
	}
	return out
}

// countStored counts the stored lines q selects by key, halving the time
// range while an answer is at the query limit.
func countStored(ctx context.Context, db logstore.Store, q logstore.Query, have map[string]int) error {
	q.Limit = logstore.MaxLimit
	got, err := db.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("look up replayed log lines in the log store: %w", err)
	}
	if span := q.Until.Sub(q.Since); len(got) == q.Limit && span > time.Nanosecond {
		mid := q.Since.Add(span / 2)
		lo, hi := q, q
		lo.Until, hi.Since = mid, mid
		if err := countStored(ctx, db, lo, have); err != nil {
			return err
		}
		return countStored(ctx, db, hi, have)
	}
	for _, e := range got {
		have[lineKey(e)]++
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// walTrimmer closes and deletes the WAL's segments as the stores flush them.
type walTrimmer struct{ c *Cluster }

func (t walTrimmer) Run(ctx context.Context) {
	c, last := t.c, time.Time{}
	every(ctx, time.Second, func(ctx context.Context) {
		// Only this component touches replayPending once Run started.
		if rp := c.replayPending; rp != nil && time.Since(last) >= 5*time.Second {
			last = time.Now()
			if err := c.replayIntoStores(ctx, rp); err != nil {
				c.log.Warn("telemetry WAL: the stores still cannot take the replay", "err", err)
			} else {
				c.replayPending = nil
				c.opts.TelemetryWAL.Replayed()
			}
		}
		if err := c.opts.TelemetryWAL.Trim(); err != nil {
			c.log.Warn("telemetry WAL: trimming failed", "err", err)
		}
	})
}

// writeSamples converts a WriteMetricsRequest and writes it into db,
// returning the number of samples.
func (c *Cluster) writeSamples(ctx context.Context, db tsdb.Store, m *unyov1.WriteMetricsRequest) (int, error) {
	w, err := convertSamples(m)
	if err != nil {
		return 0, err
	}
	return w.points, w.write(ctx, db)
}

// samplesWrite is a WriteMetricsRequest converted for the TSDB.
type samplesWrite struct {
	legacy []tsdb.Sample
	series []tsdb.SeriesPoints
	points int
}

// Prometheus' instance and job labels on agents' series, so that queries
// written for node_exporter ({instance="$node",job="$job"}, as the stock
// "Node Exporter Full" dashboard selects a host) work unchanged: instance
// is the node's name (unyo has no host:port target), job "node" for the
// system metrics under node_exporter's names and "unyo" for the rest
// (the agent's own, checks' perfdata and the metrics checks print). A
// series keeps its own instance or job (a check relaying another
// exporter's); the node label is the one the cluster vouches for.
const (
	instanceLabel = "instance"
	jobLabel      = "job"
)

// jobOf is the job label of an agent's series of metric name.
func jobOf(name string) string {
	if strings.HasPrefix(name, "node_") {
		return "node"
	}
	return "unyo"
}

// agentDefaults are the labels an agent's series of node get where they
// have none of those names.
func agentDefaults(node string) []metricbatch.Default {
	return []metricbatch.Default{
		func(string) tsdb.Label { return tsdb.Label{Name: instanceLabel, Value: node} },
		func(name string) tsdb.Label { return tsdb.Label{Name: jobLabel, Value: jobOf(name)} },
	}
}

// convertSamples converts a request's samples; the node label comes from
// the request, so an agent cannot write another node's series.
func convertSamples(m *unyov1.WriteMetricsRequest) (samplesWrite, error) {
	node := m.GetNode()
	legacy, batches := m.GetSamples(), m.GetBatches()
	w := samplesWrite{points: len(legacy)}
	nSeries := 0
	for _, b := range batches {
		w.points += metricbatch.Points(b)
		nSeries += len(b.GetPointCounts())
	}
	if len(legacy) > 0 {
		w.legacy = legacySamples(node, legacy)
	}
	if len(batches) > 0 {
		set, defaults := tsdb.Label{Name: "node", Value: node}, agentDefaults(node)
		w.series = make([]tsdb.SeriesPoints, 0, min(nSeries, w.points))
		for i, b := range batches {
			var err error
			if w.series, err = metricbatch.Series(w.series, b, set, defaults...); err != nil {
				return w, &badBatchError{fmt.Errorf("metric batch %d of %d from node %q: %w", i+1, len(batches), node, err)}
			}
		}
	}
	return w, nil
}

// badBatchError is a metric batch that does not decode: a bug at the agent.
type badBatchError struct{ err error }

func (e *badBatchError) Error() string { return e.err.Error() }
func (e *badBatchError) Unwrap() error { return e.err }

func (w samplesWrite) write(ctx context.Context, db tsdb.Store) error {
	if len(w.legacy) > 0 {
		if err := db.Write(ctx, w.legacy); err != nil {
			return err
		}
	}
	if len(w.series) > 0 {
		return db.WriteSeries(ctx, w.series)
	}
	return nil
}
