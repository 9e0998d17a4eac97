package cluster

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/stats"
)

// MaxStatsRows bounds the rollups one cluster answers with.
const MaxStatsRows = 100000

// statsService answers operators' questions to the statistics tier.
type statsService struct{ c *Cluster }

// statsRange applies the defaults of a statistics query: since ago, until now.
func statsRange(since, until *timestamppb.Timestamp, ago time.Duration, now time.Time) (time.Time, time.Time, error) {
	s, u := now.Add(-ago), now
	if since != nil {
		s = since.AsTime()
	}
	if until != nil {
		u = until.AsTime()
	}
	if !u.After(s) {
		return s, u, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("until (%s) must be after since (%s)", u.UTC().Format(time.RFC3339), s.UTC().Format(time.RFC3339)))
	}
	return s, u, nil
}

func (s *statsService) MetricStats(ctx context.Context, req *connect.Request[unyov1.MetricStatsRequest]) (*connect.Response[unyov1.MetricStatsResponse], error) {
	m := req.Msg
	sel, err := stats.ParseSelector(m.GetSelector())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	res := store.Resolution(m.GetResolution())
	switch res {
	case "":
		res = store.Daily
	case store.Hourly, store.Daily:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("resolution %q: want 1h or 1d", m.GetResolution()))
	}
	since, until, err := statsRange(m.GetSince(), m.GetUntil(), 30*24*time.Hour, s.c.now())
	if err != nil {
		return nil, err
	}
	if err := limits.Limit("limit", m.GetLimit(), MaxStatsRows); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	limit := int(m.GetLimit())
	if limit == 0 {
		limit = MaxStatsRows
	}
	// The store narrows by metric name and time; the rest of the selector
	// is matched here.
	resp := &unyov1.MetricStatsResponse{}
	f := store.RollupFilter{Resolution: res, Name: sel.Name(), Since: since, Until: until}
	rows, err := s.c.store.ListRollups(ctx, f)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	for _, r := range rows {
		if !sel.Matches(r.Labels) {
			continue
		}
		if len(resp.Rollups) == limit {
			resp.Truncated = true
			break
		}
		resp.Rollups = append(resp.Rollups, &unyov1.Rollup{
			Cluster: s.c.opts.Name, Labels: r.Labels, Resolution: string(r.Resolution), Start: timestamppb.New(r.Start),
			Min: r.Min, Max: r.Max, Avg: stats.Avg(r), Last: r.Last, Sum: r.Sum, Count: r.Count,
		})
	}
	return connect.NewResponse(resp), nil
}

func (s *statsService) CountStats(ctx context.Context, req *connect.Request[unyov1.CountStatsRequest]) (*connect.Response[unyov1.CountStatsResponse], error) {
	m := req.Msg
	if k := m.GetKind(); k != store.CountLogs && k != store.CountEvents {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kind %q: want logs or events", k))
	}
	switch m.GetBy() {
	case logstore.ByLevel, logstore.ByApp, logstore.ByHost:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("by %q: want level, app or host", m.GetBy()))
	}
	since, until, err := statsRange(m.GetSince(), m.GetUntil(), 90*24*time.Hour, s.c.now())
	if err != nil {
		return nil, err
	}
	counts, err := s.c.store.ListCounts(ctx, store.CountFilter{Kind: m.GetKind(), By: m.GetBy(),
		Since: stats.Align(since, store.Daily), Until: until})
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	resp := &unyov1.CountStatsResponse{Kind: m.GetKind(), By: m.GetBy()}
	for _, c := range counts {
		resp.Counts = append(resp.Counts, &unyov1.DailyCount{Cluster: s.c.opts.Name, Day: timestamppb.New(c.Day), Key: c.Key,
			Count: c.Count, Errors: c.Errors, Warnings: c.Warnings})
	}
	return connect.NewResponse(resp), nil
}
