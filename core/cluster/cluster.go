// Package cluster is the cluster tier: it answers agents (registration,
// heartbeats, check results, check definitions) and operators (objects,
// nodes, events), and runs the cluster's controller loops on the replica
// holding the controller lease.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/amapi"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/cluster/ingest"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/lease"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/rbac"
	"github.com/unyo-ops/unyo/core/selfmon"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/wal"
	"github.com/unyo-ops/unyo/eventrules/apihook"
	"github.com/unyo-ops/unyo/plugins/host"
)

// Options configure a cluster server.
type Options struct {
	Name              string
	Replica           string
	Version           string
	LeaseTTL          time.Duration
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	DownAfter         time.Duration
	// AutoCordonAfter and AutoDrainAfter are the nodes' automatic cordon
	// and drain by default (0 is off); a node's own setting wins.
	AutoCordonAfter time.Duration
	AutoDrainAfter  time.Duration
	HistoryPerCheck int
	// Metrics and Logs are the cluster's TSDB and log store; nil means none
	// is configured, and their services say so. The caller closes them.
	Metrics tsdb.Store
	Logs    logstore.Store
	// TelemetryWAL, if set, is where samples, log lines and event history
	// are made durable before they are acknowledged (see durable.go); call
	// ReplayTelemetry before serving. The caller closes it.
	TelemetryWAL *wal.WAL
	// LogRetention is how long log lines are kept (the controller drops
	// older days); 0 means logstore.DefaultRetention.
	LogRetention time.Duration
	// PluginDirs are searched for plugin binaries; Plugins are the action
	// plugins started (on every replica), for EventRule plugin actions.
	PluginDirs []string
	Plugins    []host.PluginConfig
	// PluginDigestCache is where the plugins' verified digests are kept
	// across restarts (host.Config.DigestCache); empty: in memory only.
	PluginDigestCache string
	// HookPolicy says where api_hooks may be sent (cluster.api_hook.allow);
	// nil is the default policy, which refuses loopback, link-local and
	// metadata addresses.
	HookPolicy *apihook.Policy
	// PluginEnv names the variables of the cluster's environment that its
	// plugins also get (cluster.plugins.env).
	PluginEnv []string
	// Stats configures the statistics tier; nil turns it off.
	Stats *StatsOptions
	// NodeCA, if set, signs the client certificates nodes enrol and renew
	// with (cluster.node_ca), valid for NodeCertTTL (default
	// identity.DefaultNodeCertTTL); the server's client CA must be its
	// certificate.
	NodeCA      *identity.CA
	NodeCertTTL time.Duration
	// AuditRetention is how long audit records are kept; 0 means
	// rbac.DefaultAuditRetention.
	AuditRetention time.Duration
	Logger         *slog.Logger
	// Now is the controller's clock (retention and statistics); default
	// time.Now. Tests run days of it in moments.
	Now func() time.Time
	// PeerWatch is how the controller watches the peers root assigns.
	PeerWatch PeerWatchOptions
}

// PeerWatchOptions configure the watching of peer clusters.
type PeerWatchOptions struct {
	// Interval between looks at each peer; default 10s.
	Interval time.Duration
	// Thresholds' zero fields are peerwatch.DefaultThresholds'.
	Thresholds peerwatch.Thresholds
}

// Cluster holds one cluster replica's services and loops.
type Cluster struct {
	opts    Options
	self    *selfmon.Registry // the server's /metrics, from Register
	store   store.Store
	log     *slog.Logger
	started time.Time
	lease   *lease.Runner

	beats *heartbeats
	kinds *kinds.Registry
	// ingest is the one way events enter the store, from every source.
	ingest *ingest.Ingester
	// ingested wakes the pipeline when ingest stored events on this replica.
	ingested chan struct{}
	// rootNudge makes RegisterAtRoot register again at once (a node
	// registered, so root should derive its topology).
	rootNudge chan struct{}
	// placeKick wakes the node stage (computes synced, an agent reported,
	// a node cordoned); assignments wakes agents long-polling
	// GetAssignments on this replica.
	placeKick   chan struct{}
	assignments broadcast
	// computeGone wakes the compute agents' sweep (computeagents.go).
	computeGone chan struct{}
	knownMu     sync.Mutex
	known       map[string]*unyov1.Node // registered nodes, to answer heartbeats without a read
	revisions   revisionCache

	// nodePlugins is each node's plugin statuses as last stored (guarded by
	// knownMu): a heartbeat writes them only when they changed.
	nodePlugins map[string][]*unyov1.PluginStatus
	// nodeProviders is each node's provider statuses as last stored
	// (guarded by knownMu too).
	nodeProviders map[string][]*unyov1.ProviderStatus

	// auth recognises the credentials of this cluster's nodes and of root.
	auth *identity.Authenticator
	// certAuth recognises the nodes' certificates (nil without a node CA).
	certAuth *identity.CertAuthenticator

	// stats computes the statistics tier; nil when it is off.
	stats *statsRunner
	// audit records every write to this cluster.
	audit *rbac.Recorder

	// peers is inter-cluster monitoring: the peers root assigned, and what
	// the controller saw of them (peers.go).
	peers peerState
	// replayPending is the telemetry WAL's replay the stores could not take
	// at start; the telemetry-wal component retries it.
	replayPending *replayed

	pluginsMu sync.Mutex
	plugins   *host.Host // nil without plugins
	// pluginsReady is closed once the plugins' first start is over.
	pluginsReady chan struct{}
}

// New returns a cluster on st. Call Register to serve it and Run for its loops.
func New(st store.Store, opts Options) *Cluster {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 15 * time.Second
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 3 * opts.HeartbeatInterval
	}
	if opts.DownAfter <= opts.StaleAfter {
		opts.DownAfter = 3 * opts.StaleAfter
	}
	if opts.LogRetention <= 0 {
		opts.LogRetention = logstore.DefaultRetention
	}
	if opts.HistoryPerCheck <= 0 {
		opts.HistoryPerCheck = 100
	}
	if opts.Now == nil {
		opts.Now = time.Now
	} else if sc, ok := st.(interface{ SetClock(func() time.Time) }); ok {
		// The times the store stamps itself (a released reservation's
		// ledger end) on the cluster's clock too.
		sc.SetClock(opts.Now)
	}
	if opts.PeerWatch.Interval <= 0 {
		opts.PeerWatch.Interval = 10 * time.Second
	}
	if opts.NodeCertTTL <= 0 {
		opts.NodeCertTTL = identity.DefaultNodeCertTTL
	}
	log := opts.Logger.With("cluster", opts.Name)
	c := &Cluster{
		opts:      opts,
		store:     st,
		log:       log,
		started:   time.Now(),
		beats:     newHeartbeats(st, log, opts.StaleAfter),
		known:     map[string]*unyov1.Node{},
		kinds:     builtin.Kinds(),
		ingested:  make(chan struct{}, 1),
		rootNudge: make(chan struct{}, 1),
		placeKick: make(chan struct{}, 1),

		nodePlugins:   map[string][]*unyov1.PluginStatus{},
		nodeProviders: map[string][]*unyov1.ProviderStatus{},
		auth:          identity.NewAuthenticator(st, credentialKinds),
		pluginsReady:  make(chan struct{}),
	}
	// The clock of receipt is the wall clock: opts.Now may be a test's
	// clock for retention and statistics, days away from agents' results.
	c.ingest = ingest.New(ingest.Options{Cluster: opts.Name, Store: st, Wake: c.ingested, Logger: log, DeletedGrace: opts.StaleAfter})
	if opts.Stats != nil {
		r, err := newStatsRunner(*opts.Stats, st, opts.Metrics, opts.Logs, opts.Now, log)
		if err != nil {
			// The configuration is validated before; keep serving without
			// statistics rather than refuse to start.
			log.Error("statistics are off", "err", err)
		}
		c.stats = r
	}
	c.audit = &rbac.Recorder{Store: st, Logger: log}
	if opts.NodeCA != nil {
		c.certAuth = identity.NewCertAuthenticator(opts.NodeCA.Cert, st)
	}
	c.revisions.load = st.ChecksRevision
	c.computeGone = make(chan struct{}, 1)
	c.lease = &lease.Runner{Leases: st, Name: "cluster-controller", Holder: opts.Replica, TTL: opts.LeaseTTL, Logger: log}
	return c
}

// Register mounts the cluster's services on srv.
func (c *Cluster) Register(srv *server.Server) {
	srv.Auth().Authenticators = append(srv.Auth().Authenticators, c.auth)
	srv.Auth().ComputeOf = c.computeOf
	c.registerSelfMetrics(srv.Metrics())
	if c.certAuth != nil {
		srv.Auth().Authenticators = append(srv.Auth().Authenticators, c.certAuth)
	}
	o := srv.HandlerOptions()
	srv.Handle(unyov1connect.NewAgentServiceHandler(&agentService{c}, o...))
	srv.Handle(unyov1connect.NewObjectServiceHandler(newObjectService(c), o...))
	srv.Handle(unyov1connect.NewNodeServiceHandler(&nodeService{c}, o...))
	srv.Handle(unyov1connect.NewProvisionServiceHandler(&provisionService{c}, o...))
	srv.Handle(unyov1connect.NewBillingServiceHandler(&billingService{c}, o...))
	srv.Handle(unyov1connect.NewEventServiceHandler(&eventService{c}, o...))
	srv.Handle(unyov1connect.NewStatusServiceHandler(&statusService{c}, o...))
	srv.Handle(unyov1connect.NewAlertServiceHandler(&alertService{c}, o...))
	srv.Handle(unyov1connect.NewMaintenanceServiceHandler(&maintenanceService{c}, o...))
	srv.Handle(unyov1connect.NewMetricsServiceHandler(&metricsService{c}, o...))
	srv.Handle(unyov1connect.NewLogsServiceHandler(&logsService{c}, o...))
	srv.Handle(unyov1connect.NewStatsServiceHandler(&statsService{c}, o...))
	srv.Handle(unyov1connect.NewTokenServiceHandler(&rbac.TokenService{Store: c.store, Audit: c.audit}, o...))
	srv.Handle(unyov1connect.NewAuditServiceHandler(&rbac.AuditService{Store: c.store, Cluster: c.opts.Name}, o...))
	// Alertmanager's API v2 over the services above (amtool, karma).
	srv.Handle("/api/v2/", amapi.New(amapi.Options{Local: srv.Handler(), Name: c.opts.Name, Version: c.opts.Version, Logger: c.log}))
	// Prometheus' query API over this cluster's TSDB, for Grafana.
	prom := promapi.Options{
		Unavailable: fmt.Sprintf("cluster %q keeps no metrics: its metrics.store is none", c.opts.Name),
		Version:     c.opts.Version,
		Authorize: func(req *http.Request) (context.Context, error) {
			return srv.Auth().Authorize(req, unyov1connect.MetricsServiceQueryProcedure)
		},
	}
	if c.opts.Metrics != nil {
		prom.Backend = c.opts.Metrics
	}
	srv.Handle("/api/v1/", promapi.Handler(prom))
	// Tokens this cluster issued are credentials here.
	srv.Auth().Denied = c.audit.Denied
	srv.Auth().Authenticators = append(srv.Auth().Authenticators, &rbac.Authenticator{Store: c.store, Cluster: c.opts.Name, Logger: c.log})
}

// revisionCache answers "has any check changed" for every heartbeat from
// memory, re-reading the database at most once a second so that changes made
// through another replica are seen promptly.
type revisionCache struct {
	mu   sync.Mutex
	at   time.Time
	rev  int64
	load func(context.Context) (int64, error)
}

func (r *revisionCache) get(ctx context.Context) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.at) < time.Second {
		return r.rev, nil
	}
	rev, err := r.load(ctx)
	if err != nil {
		return 0, err
	}
	r.rev, r.at = rev, time.Now()
	return rev, nil
}

func (r *revisionCache) invalidate() {
	r.mu.Lock()
	r.at = time.Time{}
	r.mu.Unlock()
}

func (c *Cluster) now() time.Time { return c.opts.Now() }
