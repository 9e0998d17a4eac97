// Package agent is the per-node runtime: it registers the node with its
// cluster and heartbeats, runs the checks that select this node (central
// ones from the cluster and local ones from its config), and delivers every
// result through an on-disk spool so that nothing is lost while the cluster
// is unreachable.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/checks/schedule"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/internal/private"
	"github.com/unyo-ops/unyo/core/logtail"
	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/core/selfmon"
	"github.com/unyo-ops/unyo/core/spool"
	"github.com/unyo-ops/unyo/plugins/host"
)

// Options configure an agent.
type Options struct {
	NodeName string
	// Resource names the PhysicalResource of root's inventory this node is
	// (agent.resource); empty lets root match the hostname, then the
	// serial number.
	Resource   string
	Labels     map[string]string
	ClusterURL string
	Token      string
	DataDir    string
	CheckDirs  []string
	// CheckEnv names the variables of the agent's environment that command
	// checks also get, beyond procenv's base; UNYO_* never passes.
	CheckEnv      []string
	MaxOutput     int
	MaxConcurrent int
	BatchSize     int
	FlushInterval time.Duration
	SpoolDir      string
	SpoolMaxBytes int64
	// BufferRecords and BufferBytes bound the results kept in memory while
	// the spool cannot be written (DefaultBufferRecords, DefaultBufferBytes
	// when 0); past them the oldest are dropped, counted and reported.
	BufferRecords int
	BufferBytes   int64
	// StatusListen is where the agent's status endpoint answers; empty turns it off.
	StatusListen string
	// StatusToken is the bearer token that shows the full /status (check
	// outputs, plugin errors); empty: only the redacted view is served.
	StatusToken string
	LocalChecks []*unyov1.Check
	// MetricsInterval is how often system metrics are collected; 0 turns
	// collection off (check perfdata is still sent).
	MetricsInterval time.Duration
	// Logs are the files to tail; none turns tailing off.
	Logs []logtail.FileConfig
	// TLS verifies the cluster's certificate (agent.tls).
	TLS client.TLSOptions
	// PluginDirs are searched for plugin binaries (unyo-<kind>-<name>);
	// Plugins are the check plugins started (none: no plugin host).
	PluginDirs []string
	Plugins    []host.PluginConfig
	// Capacity, per non-zero field, replaces the capacity the agent
	// detects and its providers report (agent.capacity).
	Capacity *unyov1.Capacity
	// PluginEnv names the variables of the agent's environment that its
	// plugins also get (host.Config.PassEnv).
	PluginEnv []string
	// Ports turn on per-port network namespaces (see ports.go).
	Ports   PortOptions
	Version string
	Logger  *slog.Logger
}

// Agent is one node's agent.
type Agent struct {
	opts  Options
	self  *selfmon.Registry // /metrics on the status endpoint
	log   *slog.Logger
	cl    *client.Clients
	spool *spool.Spool
	// metrics and logs are outboxes of their own, in
	// <data_dir>/spool-metrics and spool-logs.
	metrics, logs *outbox
	sched         *schedule.Scheduler
	local         []checks.Definition
	// checkEnv is what command checks get of the agent's environment
	// (procenv.Inherit), before their spec.env.
	checkEnv  []string
	status    status
	logChecks logChecks
	// overflow holds results the spool could not take; overflowKick wakes
	// the loop that empties it.
	overflow     overflow
	overflowKick chan struct{}
	// appendResults writes to the results spool (a seam for tests that
	// make the disk fail).
	appendResults func(recs ...[]byte) error
	// plugins runs the check plugins (nil when none are enabled, or when
	// the host could not be made: pluginsErr); pluginsReady is closed once
	// their first start is over.
	plugins      *host.Host
	pluginsErr   error
	pluginsReady chan struct{}
	// providerRestarts names provider plugins the supervisor started
	// again, for the assignment runner to recover their resources.
	providerRestarts chan string
	// ports wires the compute ports (nil unless agent.ports.enabled).
	ports *portRunner

	// nodeCert is the node's client certificate when its cluster signs
	// one (tlsCluster: the cluster URL is https); certChanged wakes the
	// renewal loop when the agent enrols.
	nodeCert    nodeCert
	tlsCluster  bool
	certChanged chan struct{}

	// sentPlugins and sentProviders are what the heartbeats told the
	// cluster of the plugins and providers (syncLoop's alone).
	sentPlugins   sentReport[*unyov1.PluginStatus]
	sentProviders sentReport[*unyov1.ProviderStatus]
	// providers are the provider plugins' latest fingerprints.
	providers providerHealth

	mu         sync.Mutex
	cred       credential
	registered bool
	// clusterName is the cluster's name as its registration answered;
	// provider resources carry it as their owner.
	clusterName string
	heartbeat   time.Duration
	checksRev   int64
	centralDefs []checks.Definition
	reregister  chan struct{}
	statusLn    net.Listener
	// seq numbers results; seeded from the clock so that it keeps
	// increasing across agent restarts.
	seq atomic.Uint64
	// logSeq numbers spooled log lines, likewise; the cluster drops a line
	// whose number it has seen (see unyov1.LogEntry).
	logSeq atomic.Uint64
}

// New validates the options and opens the spool; Run starts the work.
func New(opts Options) (*Agent, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("agent.node_name is empty and the hostname is unknown: %w", err)
		}
		opts.NodeName = h
	}
	if err := validate.Name(opts.NodeName); err != nil {
		return nil, fmt.Errorf("agent.node_name %q: %w", opts.NodeName, err)
	}
	if opts.Resource != "" {
		if err := validate.Name(opts.Resource); err != nil {
			return nil, fmt.Errorf("agent.resource %q: %w", opts.Resource, err)
		}
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 8
	}
	if opts.BufferRecords <= 0 {
		opts.BufferRecords = DefaultBufferRecords
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	if opts.SpoolDir == "" {
		opts.SpoolDir = filepath.Join(opts.DataDir, "spool")
	}
	log := opts.Logger.With("node", opts.NodeName)
	if opts.DataDir != "" {
		// Private, with the state in it (checks cache, plugin digests, log
		// offsets), whatever modes an older version left.
		if err := private.Dir(opts.DataDir, log); err != nil {
			return nil, fmt.Errorf("the agent's data directory: %w", err)
		}
		if err := private.Files(opts.DataDir, log); err != nil {
			return nil, fmt.Errorf("the agent's data directory: %w", err)
		}
	}
	for i, name := range opts.CheckEnv {
		if err := procenv.CheckName(name); err != nil {
			return nil, fmt.Errorf("agent.check_env[%d]: %w", i, err)
		}
	}
	a := &Agent{opts: opts, log: log, heartbeat: 10 * time.Second, reregister: make(chan struct{}, 1), self: selfmon.New(opts.Version),
		checkEnv: procenv.Inherit(os.Environ(), opts.CheckEnv), overflowKick: make(chan struct{}, 1)}
	a.overflow.maxRecords, a.overflow.maxBytes = opts.BufferRecords, opts.BufferBytes
	a.logChecks.matched = make(chan struct{}, 1)
	a.seq.Store(uint64(time.Now().UnixNano()))
	a.logSeq.Store(uint64(time.Now().UnixNano()))
	for i, c := range opts.LocalChecks {
		c.Source = "local"
		d, err := checks.Compile(c)
		if err != nil {
			return nil, fmt.Errorf("agent.checks[%d]: %w", i, err)
		}
		if d.Metric != nil {
			return nil, fmt.Errorf("agent.checks[%d] (%s): spec.metric: a metric check runs in the cluster on its metrics; apply it centrally (unyo apply)", i, d.Name)
		}
		a.local = append(a.local, d)
	}
	a.cred = credential{path: nodeTokenPath(opts.DataDir), configured: opts.Token}
	if err := a.cred.load(); err != nil {
		return nil, err
	}
	a.tlsCluster = strings.HasPrefix(opts.ClusterURL, "https://")
	a.certChanged = make(chan struct{}, 1)
	a.nodeCert.path = nodeCertPath(opts.DataDir)
	if err := a.nodeCert.load(); err != nil {
		return nil, err
	}
	cl, err := client.New(client.Options{URL: opts.ClusterURL, TokenFunc: a.token, TLS: opts.TLS, Timeout: 30 * time.Second, Hints: agentHints, Logger: log,
		ClientCertificate: a.nodeCert.clientCertificate, Interceptors: []connect.Interceptor{a.retryRenewed()}})
	if err != nil {
		return nil, fmt.Errorf("agent.cluster_url: %w", err)
	}
	a.cl = cl
	sp, err := spool.Open(spool.Options{Dir: opts.SpoolDir, MaxBytes: opts.SpoolMaxBytes, LazyAcks: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open the result spool: %w", err)
	}
	a.spool = sp
	a.appendResults = sp.Append
	a.logReplay("results", opts.SpoolDir, sp)
	if err := a.openOutboxes(); err != nil {
		a.closeSpools()
		return nil, err
	}
	a.sched = schedule.New(a.runCheck, schedule.Options{
		NodeName: opts.NodeName, MaxConcurrent: opts.MaxConcurrent, Logger: log,
		// Checks start on the node's flush ticks, half an interval after the
		// outboxes send: the runs due in a second share one wake-up, and a
		// result waits FlushInterval/2 for delivery, as it did on average.
		Tick: opts.FlushInterval, TickPhase: a.flushPhase() + opts.FlushInterval/2,
	})
	if opts.StatusListen != "" {
		ln, err := net.Listen("tcp", opts.StatusListen)
		if err != nil {
			a.closeSpools()
			return nil, fmt.Errorf("agent.status_listen: %w", err)
		}
		a.statusLn = ln
	}
	a.newPlugins()
	a.providers.init(a.providerNames(), time.Now())
	if opts.Ports.Enabled {
		if a.ports, err = newPortRunner(a); err != nil {
			a.closeSpools()
			return nil, fmt.Errorf("agent.ports: %w", err)
		}
	}
	return a, nil
}

// token is what the agent presents: its node's credential once it has one,
// and none while it presents a valid certificate.
func (a *Agent) token() string {
	if a.nodeCert.valid(time.Now()) != nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cred.node != "" {
		return a.cred.node
	}
	return a.cred.configured
}

// StatusAddr is the address the status endpoint listens on, if any.
func (a *Agent) StatusAddr() string {
	if a.statusLn == nil {
		return ""
	}
	return a.statusLn.Addr().String()
}

// Run works until ctx ends, then stops the checks and closes the spool.
func (a *Agent) Run(ctx context.Context) error {
	defer a.closeSpools()
	defer a.flushOverflowAtExit()
	// Plugins stop after everything else and before the spools close, so
	// that their last state changes are spooled.
	defer a.closePlugins()
	a.loadCachedChecks()
	a.applyChecks()
	var wg sync.WaitGroup
	run := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	run(a.startPlugins)
	if a.hasProviders() {
		run(a.runAssignments)
		run(a.watchProviders)
	}
	if a.ports != nil {
		run(a.ports.run)
	}
	run(func(ctx context.Context) { a.sched.Run(ctx) })
	run(a.syncLoop)
	run(a.renewLoop)
	run(a.overflowLoop)
	for _, o := range []*outbox{{name: "results", dir: a.opts.SpoolDir, spool: a.spool, send: a.sendResults}, a.metrics, a.logs} {
		run(func(ctx context.Context) { a.sendLoop(ctx, o) })
	}
	if a.opts.MetricsInterval > 0 {
		run(a.metricsLoop)
	}
	if len(a.opts.Logs) > 0 {
		run(a.logsLoop)
		run(a.logChecksLoop)
	}
	if a.statusLn != nil {
		run(a.serveStatus)
	}
	wg.Wait()
	return nil
}

func (a *Agent) closeSpools() {
	for _, sp := range []*spool.Spool{a.spool, a.metrics.spoolOrNil(), a.logs.spoolOrNil()} {
		if sp == nil {
			continue
		}
		if err := sp.Close(); err != nil {
			a.log.Error("closing a spool failed", "err", err)
		}
	}
}

func (o *outbox) spoolOrNil() *spool.Spool {
	if o == nil {
		return nil
	}
	return o.spool
}

// applyChecks hands the scheduler the local checks plus the central ones; a
// local check shadows a central check of the same name.
func (a *Agent) applyChecks() {
	a.mu.Lock()
	central := a.centralDefs
	a.mu.Unlock()
	defs := append([]checks.Definition(nil), a.local...)
	names := map[string]bool{}
	for _, d := range a.local {
		names[d.Name] = true
	}
	for _, d := range central {
		if names[d.Name] {
			a.log.Warn("local check shadows the central check of the same name", "check", d.Name)
			continue
		}
		defs = append(defs, d)
	}
	// Commands and plugin checks go to the scheduler and log checks to the tailer; metric
	// checks are the cluster's (it does not send them, but an older cluster
	// or the on-disk cache might).
	var commands, logs []checks.Definition
	for _, d := range defs {
		switch {
		case d.Log != nil:
			logs = append(logs, d)
		case d.Metric == nil:
			commands = append(commands, d)
		}
	}
	if len(logs) > 0 && len(a.opts.Logs) == 0 {
		a.log.Warn("log checks apply to this node but agent.logs tails no files, so they never match", "checks", len(logs))
	}
	a.logChecks.set(logs)
	a.sched.Update(commands)
	a.status.setChecks(append(commands, logs...))
}

// agentHints name the agent's settings in the errors its client explains.
var agentHints = client.Hints{
	Server:     "agent.cluster_url",
	Token:      "agent.token (env UNYO_AGENT_TOKEN, flag unyo agent --token)",
	CAFile:     "agent.tls.ca_file",
	TLS:        "agent.tls",
	ClientCert: "agent.tls.cert_file and key_file",
}
