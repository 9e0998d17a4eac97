package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/metricbatch"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// maxSamplesPerWrite bounds one request, like maxResultsPerReport.
const maxSamplesPerWrite = 100000

// metricsService stores agents' samples in the cluster's TSDB and answers
// operators' queries on it.
type metricsService struct{ c *Cluster }

func (s *metricsService) store() (tsdb.Store, error) {
	if s.c.opts.Metrics == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("cluster %q keeps no metrics: its metrics.store is none", s.c.opts.Name))
	}
	return s.c.opts.Metrics, nil
}

func (s *metricsService) WriteMetrics(ctx context.Context, req *connect.Request[unyov1.WriteMetricsRequest]) (*connect.Response[unyov1.WriteMetricsResponse], error) {
	node := req.Msg.GetNode()
	if _, err := s.c.agentNode(ctx, node); err != nil {
		return nil, err
	}
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	points := len(req.Msg.GetSamples())
	for _, b := range req.Msg.GetBatches() {
		points += metricbatch.Points(b)
	}
	if points > maxSamplesPerWrite {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("samples: %d in one request, at most %d", points, maxSamplesPerWrite))
	}
	w, err := convertSamples(req.Msg)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	// The WAL's fsync and the TSDB's write run side by side; the answer
	// waits for both. Samples in the TSDB but not in the WAL (a full WAL)
	// are harmless: the agent resends them and rewriting samples is too.
	logged := make(chan error, 1)
	if s.c.opts.TelemetryWAL == nil {
		logged <- nil
	} else {
		rec, err := metricsRecord(req.Msg)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("encode samples for the telemetry WAL: %w", err))
		}
		go func() { logged <- s.c.logTelemetry(ctx, "samples", rec) }()
	}
	werr := w.write(ctx, db)
	if err := <-logged; err != nil {
		return nil, err
	}
	if err := writeError(node, points, werr); err != nil {
		s.c.count("unyo_metrics_write_failures_total", 1)
		return nil, err
	}
	s.c.count("unyo_metrics_samples_received_total", points)
	return connect.NewResponse(&unyov1.WriteMetricsResponse{Accepted: int32(points)}), nil
}

// legacySamples converts the one-message-per-sample form of older agents.
func legacySamples(node string, in []*unyov1.Sample) []tsdb.Sample {
	samples := make([]tsdb.Sample, 0, len(in))
	for _, p := range in {
		labels := make(map[string]string, len(p.GetLabels())+1)
		for k, v := range p.GetLabels() {
			labels[k] = v
		}
		labels["node"] = node
		if _, ok := labels[instanceLabel]; !ok {
			labels[instanceLabel] = node
		}
		if _, ok := labels[jobLabel]; !ok {
			labels[jobLabel] = jobOf(p.GetName())
		}
		samples = append(samples, tsdb.Sample{Name: p.GetName(), Labels: labels, Timestamp: time.UnixMilli(p.GetTimeMs()), Value: p.GetValue()})
	}
	return samples
}

// writeError words a failed write of n samples for the agent.
func writeError(node string, n int, err error) error {
	if err == nil {
		return nil
	}
	var bad *tsdb.InvalidSampleError
	if errors.As(err, &bad) {
		// A bug at the agent; resending cannot help.
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("samples from node %q: %w", node, err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("store %d samples from node %q: %w", n, node, err))
}

func (s *metricsService) QueryRange(ctx context.Context, req *connect.Request[unyov1.QueryRangeRequest]) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetStart() == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("start: required for a range query"))
	}
	end := time.Now()
	if m.GetEnd() != nil {
		end = m.GetEnd().AsTime()
	}
	start := m.GetStart().AsTime()
	if !end.After(start) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("end (%s) must be after start (%s)", end.Format(time.RFC3339), start.Format(time.RFC3339)))
	}
	step := m.GetStep().AsDuration()
	if step <= 0 {
		step = DefaultStep(end.Sub(start))
	}
	if err := checkExpr(m.GetExpr()); err != nil {
		return nil, err
	}
	series, err := db.QueryRange(ctx, tsdb.QueryRange{Expr: m.GetExpr(), Start: start, End: end, Step: step})
	if err != nil {
		return nil, queryError(m.GetExpr(), err)
	}
	return connect.NewResponse(&unyov1.QueryMetricsResponse{Series: convert.SeriesToProto(series)}), nil
}

// DefaultStep gives a range about 250 points, rounded to whole seconds.
func DefaultStep(span time.Duration) time.Duration {
	return max(time.Second, (span / 250).Truncate(time.Second))
}

func (s *metricsService) Query(ctx context.Context, req *connect.Request[unyov1.QueryMetricsRequest]) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	at := time.Now()
	if req.Msg.GetTime() != nil {
		at = req.Msg.GetTime().AsTime()
	}
	if err := checkExpr(req.Msg.GetExpr()); err != nil {
		return nil, err
	}
	series, err := db.Query(ctx, req.Msg.GetExpr(), at)
	if err != nil {
		return nil, queryError(req.Msg.GetExpr(), err)
	}
	return connect.NewResponse(&unyov1.QueryMetricsResponse{Series: convert.SeriesToProto(series)}), nil
}

func (s *metricsService) Series(ctx context.Context, req *connect.Request[unyov1.SeriesRequest]) (*connect.Response[unyov1.SeriesResponse], error) {
	db, err := s.store()
	if err != nil {
		return nil, err
	}
	end := time.Now()
	if req.Msg.GetEnd() != nil {
		end = req.Msg.GetEnd().AsTime()
	}
	start := end.Add(-time.Hour)
	if req.Msg.GetStart() != nil {
		start = req.Msg.GetStart().AsTime()
	}
	if err := checkExpr(req.Msg.GetMatch()); err != nil {
		return nil, err
	}
	sets, err := db.SeriesMatch(ctx, req.Msg.GetMatch(), start, end)
	if err != nil {
		return nil, queryError(req.Msg.GetMatch(), err)
	}
	resp := &unyov1.SeriesResponse{}
	for _, l := range sets {
		resp.Series = append(resp.Series, &unyov1.SeriesLabels{Labels: l})
	}
	return connect.NewResponse(resp), nil
}

// checkExpr refuses an expression that does not parse before it reaches
// the store, so that a typo is InvalidArgument and a store failure is not.
func checkExpr(expr string) error {
	if expr == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("the expression is empty"))
	}
	if _, err := metricsql.Parse(expr); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("expression %q: %w", expr, err))
	}
	return nil
}

// queryError words a failed query: the store's message already says which
// limit was hit or what failed.
func queryError(expr string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("query %q: %w", expr, err))
	case errors.Is(err, tsdb.ErrTooLarge):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("query %q: %w; narrow the selector or the time range", expr, err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("query %q: %w", expr, err))
}
