package root

import (
	"context"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
)

// statsService fans statistics out to the clusters. Every row names its
// cluster (set by the cluster): counts are not added up across clusters, so
// that error rates stay per failure domain and operators can compare them.
type statsService struct{ r *Root }

func (s *statsService) MetricStats(ctx context.Context, req *connect.Request[unyov1.MetricStatsRequest]) (*connect.Response[unyov1.MetricStatsResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.MetricStatsRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) (*unyov1.MetricStatsResponse, error) {
		out, err := c.Stats.MetricStats(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg, nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.MetricStatsResponse{ClusterErrors: errs}
	for _, a := range answers {
		resp.Rollups = append(resp.Rollups, a.value.GetRollups()...)
		resp.Truncated = resp.Truncated || a.value.GetTruncated()
	}
	// Each cluster answers in series and time order; keep it, by cluster.
	sort.SliceStable(resp.Rollups, func(i, j int) bool { return resp.Rollups[i].GetCluster() < resp.Rollups[j].GetCluster() })
	return connect.NewResponse(resp), nil
}

func (s *statsService) CountStats(ctx context.Context, req *connect.Request[unyov1.CountStatsRequest]) (*connect.Response[unyov1.CountStatsResponse], error) {
	targets, err := s.r.targets(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, err
	}
	q := proto.Clone(req.Msg).(*unyov1.CountStatsRequest)
	q.Cluster = ""
	answers, errs, err := fanoutQuery(ctx, s.r, targets, func(ctx context.Context, _ string, c *client.Clients) ([]*unyov1.DailyCount, error) {
		out, err := c.Stats.CountStats(ctx, connect.NewRequest(q))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetCounts(), nil
	})
	if err != nil {
		return nil, err
	}
	resp := &unyov1.CountStatsResponse{Kind: req.Msg.GetKind(), By: req.Msg.GetBy(), ClusterErrors: errs}
	for _, a := range answers {
		resp.Counts = append(resp.Counts, a.value...)
	}
	sort.SliceStable(resp.Counts, func(i, j int) bool {
		a, b := resp.Counts[i], resp.Counts[j]
		if d := a.GetDay().AsTime().Compare(b.GetDay().AsTime()); d != 0 {
			return d < 0
		}
		if a.GetKey() != b.GetKey() {
			return a.GetKey() < b.GetKey()
		}
		return a.GetCluster() < b.GetCluster()
	})
	return connect.NewResponse(resp), nil
}
