// Package root is the root tier: it knows the clusters, fans operators'
// reads out to them and merges the answers, and routes writes to the
// clusters that own the objects. A cluster that does not answer is named in
// the merged answer, never hidden.
package root

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// Options configure the root.
type Options struct {
	Version string
	// ClusterToken is presented to clusters; it must be an admin token there.
	ClusterToken string
	// ClusterTLS verifies the clusters' certificates.
	ClusterTLS client.TLSOptions
	// ClusterTimeout bounds each cluster's part of a fanned-out call.
	ClusterTimeout time.Duration
	Logger         *slog.Logger
}

// Root serves the operator-facing API over all clusters.
type Root struct {
	opts    Options
	store   store.Store
	log     *slog.Logger
	started time.Time

	mu      sync.Mutex
	clients map[string]*client.Clients // by cluster URL
}

// New returns a root on st.
func New(st store.Store, opts Options) *Root {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClusterTimeout <= 0 {
		opts.ClusterTimeout = 10 * time.Second
	}
	return &Root{opts: opts, store: st, log: opts.Logger.With("role", "root"), started: time.Now(), clients: map[string]*client.Clients{}}
}

// Register mounts the root's services on srv.
func (r *Root) Register(srv *server.Server) {
	o := srv.HandlerOptions()
	srv.Handle(unyov1connect.NewClusterServiceHandler(&clusterService{r}, o...))
	srv.Handle(unyov1connect.NewObjectServiceHandler(&objectService{r}, o...))
	srv.Handle(unyov1connect.NewNodeServiceHandler(&nodeService{r}, o...))
	srv.Handle(unyov1connect.NewEventServiceHandler(&eventService{r}, o...))
	srv.Handle(unyov1connect.NewStatusServiceHandler(&statusService{r}, o...))
	srv.Handle(unyov1connect.NewAlertServiceHandler(&alertService{r}, o...))
	srv.Handle(unyov1connect.NewMaintenanceServiceHandler(&maintenanceService{r}, o...))
	srv.Handle(unyov1connect.NewMetricsServiceHandler(&metricsService{r}, o...))
	srv.Handle(unyov1connect.NewLogsServiceHandler(&logsService{r}, o...))
	srv.Handle(unyov1connect.NewStatsServiceHandler(&statsService{r}, o...))
}

func (r *Root) client(url string) (*client.Clients, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[url]; ok {
		return c, nil
	}
	c, err := client.New(client.Options{URL: url, Token: r.opts.ClusterToken, TLS: r.opts.ClusterTLS, Hints: clusterHints, Logger: r.log})
	if err != nil {
		return nil, err
	}
	r.clients[url] = c
	return c, nil
}

// clusterHints name root's settings for calling clusters in the errors
// reported for a cluster.
var clusterHints = client.Hints{Token: "root.cluster_token", CAFile: "root.cluster_tls.ca_file", TLS: "root.cluster_tls", ClientCert: "root.cluster_tls.cert_file and key_file"}

// targets returns the clusters a request addresses: one by name, or all.
func (r *Root) targets(ctx context.Context, name string) ([]*unyov1.ClusterInfo, error) {
	all, err := r.store.ListClusters(ctx)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list clusters: %w", err))
	}
	if name == "" {
		return all, nil
	}
	names := make([]string, 0, len(all))
	for _, c := range all {
		if c.GetName() == name {
			return []*unyov1.ClusterInfo{c}, nil
		}
		names = append(names, c.GetName())
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("cluster %q is not registered with root (known clusters: %v)", name, names))
}

// answer is one cluster's part of a fanned-out call.
type answer[T any] struct {
	cluster string
	url     string
	value   T
	err     error
}

// fanout calls fn for every cluster in parallel, each bounded by the cluster
// timeout, and returns the answers in cluster-name order plus an error entry
// for every cluster that failed.
func fanout[T any](ctx context.Context, r *Root, clusters []*unyov1.ClusterInfo, fn func(ctx context.Context, cluster string, c *client.Clients) (T, error)) ([]answer[T], []*unyov1.ClusterError) {
	return split(ask(ctx, r, clusters, fn))
}

// fanoutQuery is fanout for queries: when every cluster refused the query
// itself (it is malformed, or its result would be too large), the caller gets
// that refusal as an error with its code, rather than an empty answer with a
// warning per cluster.
func fanoutQuery[T any](ctx context.Context, r *Root, clusters []*unyov1.ClusterInfo, fn func(ctx context.Context, cluster string, c *client.Clients) (T, error)) ([]answer[T], []*unyov1.ClusterError, error) {
	all := ask(ctx, r, clusters, fn)
	if err := refusedByAll(all); err != nil {
		return nil, nil, err
	}
	ok, errs := split(all)
	return ok, errs, nil
}

// refusedByAll returns the first cluster's refusal when every cluster
// refused the request as invalid or too large.
func refusedByAll[T any](all []answer[T]) error {
	if len(all) == 0 {
		return nil
	}
	for _, a := range all {
		if code := connect.CodeOf(a.err); a.err == nil || (code != connect.CodeInvalidArgument && code != connect.CodeResourceExhausted) {
			return nil
		}
	}
	first := all[0]
	return connect.NewError(connect.CodeOf(first.err), fmt.Errorf("cluster %s: %w", first.cluster, clusterHints.Explain(first.url, first.err)))
}

// ask calls fn for every cluster in parallel and returns every answer, failed
// or not, in cluster-name order.
func ask[T any](ctx context.Context, r *Root, clusters []*unyov1.ClusterInfo, fn func(ctx context.Context, cluster string, c *client.Clients) (T, error)) []answer[T] {
	return askWithin(ctx, r, clusters, r.opts.ClusterTimeout, fn)
}

// askWithin is ask with each cluster's part bounded by timeout; 0 leaves
// only ctx's deadline (the caller's own time-out).
func askWithin[T any](ctx context.Context, r *Root, clusters []*unyov1.ClusterInfo, timeout time.Duration, fn func(ctx context.Context, cluster string, c *client.Clients) (T, error)) []answer[T] {
	answers := make([]answer[T], len(clusters))
	var wg sync.WaitGroup
	for i, ci := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].cluster, answers[i].url = ci.GetName(), ci.GetUrl()
			cl, err := r.client(ci.GetUrl())
			if err != nil {
				answers[i].err = err
				return
			}
			cctx, cancel := context.WithCancel(ctx)
			if timeout > 0 {
				cctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			answers[i].value, answers[i].err = fn(cctx, ci.GetName(), cl)
		}()
	}
	wg.Wait()
	sort.Slice(answers, func(i, j int) bool { return answers[i].cluster < answers[j].cluster })
	return answers
}

// split separates the answers from an error entry per failed cluster.
func split[T any](answers []answer[T]) ([]answer[T], []*unyov1.ClusterError) {
	var errs []*unyov1.ClusterError
	ok := answers[:0]
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, &unyov1.ClusterError{Cluster: a.cluster, Error: clusterHints.Explain(a.url, a.err).Error()})
			continue
		}
		ok = append(ok, a)
	}
	return ok, errs
}
