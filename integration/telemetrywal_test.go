package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/testutil"
)

// TestTelemetryDurableAcrossKills: samples, log lines and the event history
// of results are acknowledged only once they survive a kill. A sender
// writes all three to a cluster on its embedded stores, resending each
// request until it is acknowledged as an agent does; the cluster is killed
// with SIGKILL twice mid-stream (the stores hold seconds of writes in
// memory) and restarted; every acknowledged sample, log line and history
// line is then queryable exactly once.
func TestTelemetryDurableAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a cluster twice")
	}
	cl, url := startClusterProcess(t)
	c, err := client.New(client.Options{URL: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Agent.Register(ctx, connect.NewRequest(&unyov1.RegisterRequest{Node: &unyov1.Node{Name: "walnode"}})); err != nil {
		t.Fatal(err)
	}

	s := &telemetrySender{c: c, base: time.Now().Add(-10 * time.Minute).Truncate(time.Second)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.run() }()

	waitSent := func(what string, n int) {
		testutil.Eventually(t, 60*time.Second, what, func() error {
			if got := s.ackedSamples(); got < n {
				return fmt.Errorf("%d samples acknowledged", got)
			}
			return nil
		})
	}
	for kill := 1; kill <= 2; kill++ {
		// Enough acknowledged writes that the last seconds before the kill
		// are still in the stores' memory buffers.
		waitSent(fmt.Sprintf("writes before kill %d", kill), s.ackedSamples()+2000)
		time.Sleep(2 * time.Second)
		cl.kill()
		t.Logf("kill %d: %d samples, %d lines, %d results acknowledged", kill, s.ackedSamples(), len(s.lines), len(s.events))
		cl.restart()
	}
	waitSent("writes after the last restart", s.ackedSamples()+1000)
	s.stop.Store(true)
	wg.Wait()

	samples, lines, events := s.ackedSamples(), s.lines, s.events
	t.Logf("acknowledged: %d samples, %d log lines, %d results; %d requests resent", samples, len(lines), len(events), s.resent)

	// Every acknowledged sample once: the values are 0..n-1, so the count
	// and the sum together catch a missing or doubled one.
	at := s.base.Add(time.Duration(samples)*time.Millisecond + time.Second)
	query := func(expr string) (float64, error) {
		resp, err := c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: expr, Time: timestamppb.New(at)}))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", expr, err)
		}
		ss := resp.Msg.GetSeries()
		if len(ss) != 1 || len(ss[0].GetPoints()) != 1 {
			return 0, fmt.Errorf("%s: %d series, want 1", expr, len(ss))
		}
		return ss[0].GetPoints()[0].GetValue(), nil
	}
	// The TSDB makes samples searchable within seconds.
	testutil.Eventually(t, 30*time.Second, "every acknowledged sample once", func() error {
		n, err := query(`count_over_time(wal_durable[1h])`)
		if err != nil {
			return err
		}
		sum, err := query(`sum_over_time(wal_durable[1h])`)
		if err != nil {
			return err
		}
		if want := float64(samples) * float64(samples-1) / 2; n != float64(samples) || sum != want {
			return fmt.Errorf("%v samples summing to %v stored; want the %d acknowledged, 0..%d once each, summing to %v", n, sum, samples, samples-1, want)
		}
		return nil
	})

	// Every acknowledged log line once.
	stored := queryLines(t, c, &unyov1.LogFilter{App: "waltest"})
	counts := map[string]int{}
	for _, e := range stored {
		counts[e.GetMessage()]++
	}
	for _, m := range lines {
		if counts[m] != 1 {
			t.Errorf("log line %q stored %d times", m, counts[m])
		}
	}
	if len(stored) != len(lines) {
		t.Errorf("%d log lines stored, %d acknowledged", len(stored), len(lines))
	}

	// Every acknowledged result's history line once, once the pipeline
	// has processed them all.
	testutil.Eventually(t, 60*time.Second, "the event history of every result", func() error {
		hist := queryLines(t, c, &unyov1.LogFilter{App: logstore.EventsApp, Fields: map[string]string{logstore.FieldCheck: "walcheck"}})
		byID := map[string]int{}
		for _, e := range hist {
			byID[e.GetFields()[logstore.FieldEventID]]++
		}
		missing, doubled := 0, 0
		for _, id := range events {
			switch n := byID[id]; {
			case n == 0:
				missing++
			case n > 1:
				doubled++
			}
		}
		if doubled > 0 {
			t.Fatalf("%d of %d results have more than one history line", doubled, len(events))
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d results have no history line", missing, len(events))
		}
		return nil
	})
}

func queryLines(t *testing.T, c *client.Clients, f *unyov1.LogFilter) []*unyov1.LogEntry {
	t.Helper()
	f.Limit = logstore.MaxLimit
	f.Since = timestamppb.New(time.Now().Add(-time.Hour))
	resp, err := c.Logs.Query(context.Background(), connect.NewRequest(&unyov1.QueryLogsRequest{Filter: f}))
	if err != nil {
		t.Fatalf("logs query: %v", err)
	}
	return resp.Msg.GetEntries()
}

// telemetrySender writes samples, log lines and results as one agent would,
// resending each request until the cluster acknowledges it, and records what
// was acknowledged.
type telemetrySender struct {
	c    *client.Clients
	base time.Time // the first sample's time; sample n is n ms later

	// stop ends the sending after the request in flight was acknowledged,
	// so that what is stored is exactly what was acknowledged.
	stop atomic.Bool

	mu      sync.Mutex
	samples int
	lines   []string
	events  []string
	resent  int
	seq     uint64
}

func (s *telemetrySender) ackedSamples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func (s *telemetrySender) run() {
	const perRequest = 20
	ctx := context.Background()
	for !s.stop.Load() {
		s.mu.Lock()
		n0, seq0 := s.samples, s.seq
		s.mu.Unlock()

		metrics := &unyov1.WriteMetricsRequest{Node: "walnode"}
		for k := range perRequest {
			n := n0 + k
			metrics.Samples = append(metrics.Samples, &unyov1.Sample{Name: "wal_durable", TimeMs: s.base.Add(time.Duration(n) * time.Millisecond).UnixMilli(), Value: float64(n)})
		}
		logs := &unyov1.WriteLogsRequest{Node: "walnode"}
		var msgs []string
		for k := range 5 {
			seq := seq0 + uint64(k) + 1
			m := fmt.Sprintf("wal line %d", seq)
			msgs = append(msgs, m)
			logs.Entries = append(logs.Entries, &unyov1.LogEntry{FileId: "walfile", Sequence: seq, Offset: int64(seq) * 100, App: "waltest", Level: "info", Message: m, Time: timestamppb.Now()})
		}
		results := &unyov1.ReportResultsRequest{Node: "walnode"}
		var ids []string
		for range 2 {
			id := uuid.NewString()
			ids = append(ids, id)
			results.Results = append(results.Results, &unyov1.Event{Id: id, Node: "walnode", Check: "walcheck", Level: unyov1.Level_LEVEL_SUCCESS, Output: "OK " + id, StartedAt: timestamppb.Now()})
		}

		s.until(func() error { _, err := s.c.Metrics.WriteMetrics(ctx, connect.NewRequest(metrics)); return err })
		s.until(func() error { _, err := s.c.Logs.WriteLogs(ctx, connect.NewRequest(logs)); return err })
		s.until(func() error { _, err := s.c.Agent.ReportResults(ctx, connect.NewRequest(results)); return err })
		s.mu.Lock()
		s.samples += perRequest
		s.seq += 5
		s.lines = append(s.lines, msgs...)
		s.events = append(s.events, ids...)
		s.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// until calls send until it succeeds, as an agent resends its spool.
func (s *telemetrySender) until(send func() error) {
	for send() != nil {
		s.mu.Lock()
		s.resent++
		s.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}
