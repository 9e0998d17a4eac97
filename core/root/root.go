// Package root is the root tier: it knows the clusters, fans operators'
// reads out to them and merges the answers, and routes writes to the
// clusters that own the objects. A cluster that does not answer is named in
// the merged answer, never hidden.
package root

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/amapi"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
)

// Options configure the root.
type Options struct {
	Version string
	// PromLimits bound what root gathers from the clusters for a query
	// it evaluates itself (zero: promapi's defaults).
	PromLimits promapi.Limits
	// ClusterToken is presented, for compatibility, to clusters root has no
	// credential of its own for (registered anonymously, or before
	// `unyo clusters add`); it must be an admin token there. Every cluster
	// registered with its credential gets a credential of root's own,
	// presented to it alone.
	ClusterToken string
	// ClusterTLS verifies the clusters' certificates.
	ClusterTLS client.TLSOptions
	// ClusterTimeout bounds each cluster's part of a fanned-out call.
	ClusterTimeout time.Duration
	// AuditRetention is how long root's own audit records are kept; 0
	// means rbac.DefaultAuditRetention.
	AuditRetention time.Duration
	Logger         *slog.Logger
	// Kinds are the kinds of objects root serves; nil means every kind
	// unyo has (builtin.Kinds).
	Kinds *kinds.Registry
	// SyncInterval is how often root brings every cluster up to date with
	// the objects it keeps for every cluster (besides when a cluster
	// registers); 0 means DefaultSyncInterval.
	SyncInterval time.Duration
	// Peers is how many clusters each cluster watches (peers.go); 0 means
	// peerwatch.DefaultPeers.
	Peers int
	// PeerWatch is how root itself watches every cluster.
	PeerWatch PeerWatchOptions
	// AddressQuarantine is how long a released address is not allocated
	// again; 0 means DefaultAddressQuarantine.
	AddressQuarantine time.Duration
}

// Root serves the operator-facing API over all clusters.
type Root struct {
	opts    Options
	store   store.Store
	log     *slog.Logger
	started time.Time
	// audit records root's own writes (tokens, refused writes); clusters
	// record the writes root forwards to them.
	audit *rbac.Recorder

	// auth recognises the clusters' credentials.
	auth *identity.Authenticator

	mu      sync.Mutex
	clients map[clientKey]*client.Clients

	// nudge names clusters that registered, for the sync loop.
	nudge chan string
	// nudgeAll asks the sync loop to bring every cluster up to date (the
	// inventory changed, so node topology may have).
	nudgeAll chan struct{}

	// watch is what root saw of every cluster (peers.go).
	watch rootWatch

	// svcMu orders writes of services and computes: the service
	// controller's and operators' (provision.go).
	svcMu sync.Mutex
	// nudgeServices asks the service controller for a pass soon.
	nudgeServices chan struct{}
	services      *serviceController
	// autoscaler scales the services with spec.compute.autoscale (autoscale.go).
	autoscaler *autoscaler
}

// clientKey names a cached client: root's credential is per cluster and is
// sent only to the URL that cluster registered.
type clientKey struct{ cluster, url, token string }

// New returns a root on st.
func New(st store.Store, opts Options) *Root {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClusterTimeout <= 0 {
		opts.ClusterTimeout = 10 * time.Second
	}
	if opts.Kinds == nil {
		opts.Kinds = builtin.Kinds()
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Peers <= 0 {
		opts.Peers = peerwatch.DefaultPeers
	}
	if opts.PeerWatch.Interval <= 0 {
		opts.PeerWatch.Interval = 10 * time.Second
	}

	if opts.AddressQuarantine <= 0 {
		opts.AddressQuarantine = DefaultAddressQuarantine
	}
	log := opts.Logger.With("role", "root")
	r := &Root{opts: opts, store: st, log: log, started: time.Now(),
		auth: identity.NewAuthenticator(st, credentialKinds), clients: map[clientKey]*client.Clients{},
		nudge: make(chan string, 64), nudgeAll: make(chan struct{}, 1),
		watch: rootWatch{watches: map[string]*peerwatch.Watch{}},
		audit: &rbac.Recorder{Store: st, Logger: log}, nudgeServices: make(chan struct{}, 1)}
	r.services = newServiceController(st, rootCalls{r}, &r.svcMu, opts.ClusterTimeout, log.With("component", "services"))
	r.autoscaler = newAutoscaler(r, log.With("component", "autoscaler"))
	r.services.quarantine = opts.AddressQuarantine
	if opts.ClusterToken != "" {
		r.log.Warn("root.cluster_token is set: root presents it to every cluster it holds no credential of its own for; register each cluster with `unyo clusters add NAME` and remove root.cluster_token")
	}
	return r
}

// Run keeps root's own state tidy until ctx ends: audit records past their
// retention are pruned hourly, the clusters are kept up to date with the
// objects root keeps for every cluster (globals.go), and root watches
// every cluster (peers.go).
func (r *Root) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(4)
	go func() { defer wg.Done(); r.syncLoop(ctx) }()
	go func() { defer wg.Done(); r.serviceLoop(ctx) }()
	go func() { defer wg.Done(); r.autoscaleLoop(ctx) }()
	go func() { defer wg.Done(); r.watchLoop(ctx) }()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		rbac.Prune(ctx, r.store, r.opts.AuditRetention, time.Now(), r.log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Register mounts the root's services on srv.
func (r *Root) Register(srv *server.Server) {
	srv.Auth().Authenticators = append(srv.Auth().Authenticators, r.auth)
	r.registerSelfMetrics(srv.Metrics())
	o := srv.HandlerOptions()
	srv.Handle(unyov1connect.NewClusterServiceHandler(&clusterService{r}, o...))
	srv.Handle(unyov1connect.NewObjectServiceHandler(newObjectService(r), o...))
	srv.Handle(unyov1connect.NewNodeServiceHandler(&nodeService{r}, o...))
	srv.Handle(unyov1connect.NewEventServiceHandler(&eventService{r}, o...))
	srv.Handle(unyov1connect.NewStatusServiceHandler(&statusService{r}, o...))
	srv.Handle(unyov1connect.NewAlertServiceHandler(&alertService{r}, o...))
	srv.Handle(unyov1connect.NewMaintenanceServiceHandler(&maintenanceService{r}, o...))
	srv.Handle(unyov1connect.NewMetricsServiceHandler(&metricsService{r}, o...))
	srv.Handle(unyov1connect.NewLogsServiceHandler(&logsService{r}, o...))
	srv.Handle(unyov1connect.NewStatsServiceHandler(&statsService{r}, o...))
	srv.Handle(unyov1connect.NewTokenServiceHandler(&rbac.TokenService{Store: r.store, Audit: r.audit}, o...))
	srv.Handle(unyov1connect.NewAuditServiceHandler(&auditService{r}, o...))
	srv.Handle(unyov1connect.NewNetworkServiceHandler(&networkService{r}, o...))
	srv.Handle(unyov1connect.NewBillingServiceHandler(&billingService{r}, o...))
	// Alertmanager's API v2 over the services above (amtool, karma).
	srv.Handle("/api/v2/", amapi.New(amapi.Options{Local: srv.Handler(), Name: "root", Version: r.opts.Version, Logger: r.log}))
	// Prometheus' query API for Grafana: over every cluster, and over one.
	auth := func(req *http.Request) (context.Context, error) {
		return srv.Auth().Authorize(req, unyov1connect.MetricsServiceQueryProcedure)
	}
	srv.Handle("/api/v1/", promapi.Handler(promapi.Options{Backend: promBackend{r: r}, Authorize: auth, Version: r.opts.Version}))
	srv.Handle("/clusters/{cluster}/api/v1/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		promapi.Handler(promapi.Options{Backend: promBackend{r: r, cluster: req.PathValue("cluster")}, Authorize: auth, Version: r.opts.Version}).ServeHTTP(w, req)
	}))
	// Tokens root issued are credentials at root; root acts for their
	// holders at the clusters (see client).
	srv.Auth().Denied = r.audit.Denied
	srv.Auth().Authenticators = append(srv.Auth().Authenticators, &rbac.Authenticator{Store: r.store, Logger: r.log})
}

// Audit is root's audit log, for writes root makes itself (clusters add
// and delete).
func (r *Root) Audit() *rbac.Recorder { return r.audit }

// client returns the clients for a cluster at its registered URL, with the
// credential root keeps for that cluster (or the configured cluster_token
// for a cluster root has none for).
func (r *Root) client(ctx context.Context, ci *unyov1.ClusterInfo) (*client.Clients, error) {
	token := r.opts.ClusterToken
	cred, err := r.store.GetCredential(ctx, store.CredRootToCluster, ci.GetName())
	switch {
	case err == nil:
		token = cred.Secret
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("read root's credential for cluster %q: %w", ci.GetName(), err)
	}
	key := clientKey{ci.GetName(), ci.GetUrl(), token}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[key]; ok {
		return c, nil
	}
	c, err := client.New(client.Options{URL: ci.GetUrl(), Token: token, TLS: r.opts.ClusterTLS, Hints: clusterHints, Logger: r.log, Interceptors: []connect.Interceptor{onBehalfOf}})
	if err != nil {
		return nil, err
	}
	r.clients[key] = c
	return c, nil
}

// forgetClients drops the cached clients of a deleted cluster.
func (r *Root) forgetClients(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.clients {
		if k.cluster == cluster {
			delete(r.clients, k)
		}
	}
}

// onBehalfOf names the operator root acts for on every call to a cluster,
// so that the cluster records them, not root.
var onBehalfOf = connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		server.SetOnBehalfOf(ctx, req.Header())
		return next(ctx, req)
	}
})

// clusterHints name root's settings for calling clusters in the errors
// reported for a cluster.
var clusterHints = client.Hints{Server: "the cluster's URL (unyo clusters add, or the cluster's cluster.advertise_url)", Token: "root.cluster_token", CAFile: "root.cluster_tls.ca_file", TLS: "root.cluster_tls", ClientCert: "root.cluster_tls.cert_file and key_file"}

// targets returns the clusters a request addresses: one by name, or all;
// only those in the caller's cluster scope.
func (r *Root) targets(ctx context.Context, name string) ([]*unyov1.ClusterInfo, error) {
	p := server.PrincipalFrom(ctx)
	if name != "" && !p.InCluster(name) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not see cluster %q: its scope is the clusters %s", p, name, strings.Join(p.Clusters, ", ")))
	}
	all, err := r.store.ListClusters(ctx)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list clusters: %w", err))
	}
	all = slices.DeleteFunc(all, func(c *unyov1.ClusterInfo) bool { return !p.InCluster(c.GetName()) })
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
	procedure := "a call"
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
		procedure = info.Spec().Procedure
	}
	var wg sync.WaitGroup
	for i, ci := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// net/http recovers only the goroutine serving the request; a
			// panic here would end the whole process.
			defer func() {
				if p := recover(); p != nil {
					r.log.Error("fanned-out call panicked; answering Internal for that cluster",
						"cluster", ci.GetName(), "procedure", procedure, "panic", p, "stack", string(debug.Stack()))
					answers[i].err = connect.NewError(connect.CodeInternal,
						fmt.Errorf("root failed on %s for cluster %s (a bug: panic %v; the stack is in root's log)", procedure, ci.GetName(), p))
				}
			}()
			answers[i].cluster, answers[i].url = ci.GetName(), ci.GetUrl()
			cl, err := r.client(ctx, ci)
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
