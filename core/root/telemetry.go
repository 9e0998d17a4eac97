package root

import (
	"context"
	"errors"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/convert"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/logstore"
)

// metricsService fans metric queries out and labels every series with its
// cluster, so that equal label sets from two clusters stay apart.
type metricsService struct{ r *Root }

// errAgentAtRoot answers agents configured with root's address by mistake.
var errAgentAtRoot = errors.New("root stores no metrics or logs: point agent.cluster_url at a cluster")

func (s *metricsService) WriteMetrics(context.Context, *connect.Request[unyov1.WriteMetricsRequest]) (*connect.Response[unyov1.WriteMetricsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errAgentAtRoot)
}

func labelled(series []*unyov1.Series, name string) []*unyov1.Series {
	for _, s := range series {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels["cluster"] = name
	}
	return series
}

func (s *metricsService) query(ctx context.Context, name string, call func(context.Context, *client.Clients) (*unyov1.QueryMetricsResponse, error)) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	targets, err := s.r.targets(ctx, name)
	if err != nil {
		return nil, err
	}
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.Series, error) {
		out, err := call(ctx, c)
		if err != nil {
			return nil, err
		}
		return labelled(out.GetSeries(), name), nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.QueryMetricsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Series = append(resp.Series, a.value...)
	}
	return connect.NewResponse(resp), nil
}

func (s *metricsService) QueryRange(ctx context.Context, req *connect.Request[unyov1.QueryRangeRequest]) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	q := proto.Clone(req.Msg).(*unyov1.QueryRangeRequest)
	q.Cluster = ""
	return s.query(ctx, req.Msg.GetCluster(), func(ctx context.Context, c *client.Clients) (*unyov1.QueryMetricsResponse, error) {
		out, err := c.Metrics.QueryRange(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg, nil
	})
}

func (s *metricsService) Query(ctx context.Context, req *connect.Request[unyov1.QueryMetricsRequest]) (*connect.Response[unyov1.QueryMetricsResponse], error) {
	q := proto.Clone(req.Msg).(*unyov1.QueryMetricsRequest)
	q.Cluster = ""
	return s.query(ctx, req.Msg.GetCluster(), func(ctx context.Context, c *client.Clients) (*unyov1.QueryMetricsResponse, error) {
		out, err := c.Metrics.Query(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg, nil
	})
}

func (s *metricsService) Series(ctx context.Context, req *connect.Request[unyov1.SeriesRequest]) (*connect.Response[unyov1.SeriesResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.SeriesRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, name string, c *client.Clients) ([]*unyov1.SeriesLabels, error) {
		out, err := c.Metrics.Series(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		for _, l := range out.Msg.GetSeries() {
			if l.Labels == nil {
				l.Labels = map[string]string{}
			}
			l.Labels["cluster"] = name
		}
		return out.Msg.GetSeries(), nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.SeriesResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Series = append(resp.Series, a.value...)
	}
	return connect.NewResponse(resp), nil
}

// logsService fans log queries out and merges the answers in time order.
type logsService struct{ r *Root }

func (s *logsService) WriteLogs(context.Context, *connect.Request[unyov1.WriteLogsRequest]) (*connect.Response[unyov1.WriteLogsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errAgentAtRoot)
}

func (s *logsService) Query(ctx context.Context, req *connect.Request[unyov1.QueryLogsRequest]) (*connect.Response[unyov1.QueryLogsResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.QueryLogsRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.LogEntry, error) {
		out, err := c.Logs.Query(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetEntries(), nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.QueryLogsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Entries = append(resp.Entries, a.value...)
	}
	// Each cluster's answer is newest first; so is the merge, cut to the limit.
	sort.SliceStable(resp.Entries, func(i, j int) bool {
		return resp.Entries[i].GetTime().AsTime().After(resp.Entries[j].GetTime().AsTime())
	})
	limit := int(req.Msg.GetFilter().GetLimit())
	if limit <= 0 {
		limit = logstore.DefaultLimit
	}
	if len(resp.Entries) > limit {
		resp.Entries = resp.Entries[:limit]
	}
	return connect.NewResponse(resp), nil
}

func (s *logsService) Stats(ctx context.Context, req *connect.Request[unyov1.LogStatsRequest]) (*connect.Response[unyov1.LogStatsResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.LogStatsRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.LogBucket, error) {
		out, err := c.Logs.Stats(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetBuckets(), nil
	})
	if err != nil {
		return nil, err
	}
	// Buckets of the same interval and key from several clusters add up.
	type key struct {
		start int64
		key   string
	}
	sum := map[key]*unyov1.LogBucket{}
	var merged []*unyov1.LogBucket
	for _, a := range answers {
		for _, b := range a.value {
			k := key{b.GetStart().AsTime().UnixNano(), b.GetKey()}
			if m, ok := sum[k]; ok {
				m.Count += b.GetCount()
				m.Errors += b.GetErrors()
				m.Warnings += b.GetWarnings()
				continue
			}
			sum[k] = b
			merged = append(merged, b)
		}
	}
	buckets := convert.BucketsFromProto(merged)
	logstore.SortBuckets(buckets)
	return connect.NewResponse(&unyov1.LogStatsResponse{
		By: req.Msg.GetBy(), Interval: req.Msg.GetInterval(), Buckets: convert.BucketsToProto(buckets), ClusterErrors: errs,
	}), nil
}

func (s *logsService) Trace(ctx context.Context, req *connect.Request[unyov1.TraceLogsRequest]) (*connect.Response[unyov1.TraceLogsResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.TraceLogsRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.LogEntry, error) {
		out, err := c.Logs.Trace(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetEntries(), nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.TraceLogsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Entries = append(resp.Entries, a.value...)
	}
	// A trace crosses clusters: one timeline, oldest first.
	sort.SliceStable(resp.Entries, func(i, j int) bool {
		return resp.Entries[i].GetTime().AsTime().Before(resp.Entries[j].GetTime().AsTime())
	})
	return connect.NewResponse(resp), nil
}
