package root

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/tsdb"
)

// promBackend answers the Prometheus API at root: over every cluster the
// caller may see (cluster ""), or over one (root's /clusters/NAME/api/v1/).
// Global evaluation is promapi.Plan's: what the clusters evaluate (partial
// aggregates, per-series parts), combined and finished here.
type promBackend struct {
	r       *Root
	cluster string
	plan    promapi.PlanOptions // zero but in benchmarks
}

// run asks every target cluster for each of the plan's expressions and
// combines the answers; a single target evaluates what the plan refuses
// as it is, since nothing spans clusters then.
func (b promBackend) run(ctx context.Context, expr string, call func(ctx context.Context, c *client.Clients, expr string) ([]*unyov1.Series, error)) ([]tsdb.Series, error) {
	targets, err := b.r.targets(ctx, b.cluster)
	if err != nil {
		return nil, err
	}
	plan, err := promapi.NewPlanWith(expr, b.plan)
	if errors.Is(err, promapi.ErrNotGlobal) && len(targets) == 1 {
		plan, err = promapi.Passthrough(expr), nil
	}
	if err != nil {
		return nil, err
	}
	answers, errs, err := fanoutQuery(ctx, b.r, targets, func(ctx context.Context, name string, c *client.Clients) (promapi.Part, error) {
		p := promapi.Part{Cluster: name}
		for _, e := range plan.Remote {
			got, err := call(ctx, c, e)
			if err != nil {
				return p, err
			}
			p.Series = append(p.Series, fromProto(got))
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	warn(ctx, errs)
	parts := make([]promapi.Part, len(answers))
	for i, a := range answers {
		parts[i] = a.value
	}
	if err := plan.Check(parts, b.r.opts.PromLimits); err != nil {
		return nil, err
	}
	return plan.Eval(parts)
}

func warn(ctx context.Context, errs []*unyov1.ClusterError) {
	for _, e := range errs {
		promapi.Warn(ctx, fmt.Sprintf("cluster %s did not answer; its series are missing: %s", e.GetCluster(), e.GetError()))
	}
}

func fromProto(in []*unyov1.Series) []tsdb.Series {
	out := make([]tsdb.Series, len(in))
	for i, s := range in {
		out[i].Labels = s.GetLabels()
		out[i].Points = make([]tsdb.Point, len(s.GetPoints()))
		for j, p := range s.GetPoints() {
			out[i].Points[j] = tsdb.Point{T: time.UnixMilli(p.GetTimeMs()), V: p.GetValue()}
		}
	}
	return out
}

func (b promBackend) Query(ctx context.Context, expr string, at time.Time) ([]tsdb.Series, error) {
	return b.run(ctx, expr, func(ctx context.Context, c *client.Clients, e string) ([]*unyov1.Series, error) {
		out, err := c.Metrics.Query(ctx, connect.NewRequest(&unyov1.QueryMetricsRequest{Expr: e, Time: timestamppb.New(at)}))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetSeries(), nil
	})
}

func (b promBackend) QueryRange(ctx context.Context, q tsdb.QueryRange) ([]tsdb.Series, error) {
	return b.run(ctx, q.Expr, func(ctx context.Context, c *client.Clients, e string) ([]*unyov1.Series, error) {
		out, err := c.Metrics.QueryRange(ctx, connect.NewRequest(&unyov1.QueryRangeRequest{
			Expr: e, Start: timestamppb.New(q.Start), End: timestamppb.New(q.End), Step: durationpb.New(q.Step)}))
		if err != nil {
			return nil, err
		}
		return out.Msg.GetSeries(), nil
	})
}

func (b promBackend) SeriesMatch(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error) {
	resp, err := (&metricsService{b.r}).Series(ctx, connect.NewRequest(&unyov1.SeriesRequest{
		Cluster: b.cluster, Match: match, Start: timestamppb.New(start), End: timestamppb.New(end)}))
	if err != nil {
		return nil, err
	}
	warn(ctx, resp.Msg.GetClusterErrors())
	out := make([]map[string]string, len(resp.Msg.GetSeries()))
	for i, s := range resp.Msg.GetSeries() {
		out[i] = s.GetLabels()
	}
	return out, nil
}

// LabelValues collects the values from the matching series: the clusters'
// API has no label-values call, and root adds the cluster label anyway.
func (b promBackend) LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	sets, err := b.SeriesMatch(ctx, match, start, end)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, l := range sets {
		if v, ok := l[label]; ok && v != "" {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
