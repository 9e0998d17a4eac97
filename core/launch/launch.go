// Package launch wires configuration to real stores, servers and loops, and
// runs one role (root, cluster, agent) or all of them (dev) until its
// context ends.
package launch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/cluster"
	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/identity"
	"github.com/unyo-ops/unyo/core/internal/private"
	"github.com/unyo-ops/unyo/core/launch/agentrole"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/logstore/clickhouse"
	"github.com/unyo-ops/unyo/core/logstore/vlembed"
	"github.com/unyo-ops/unyo/core/peerwatch"
	"github.com/unyo-ops/unyo/core/promapi"
	"github.com/unyo-ops/unyo/core/root"
	"github.com/unyo-ops/unyo/core/server"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/core/tsdb/vmembed"
	"github.com/unyo-ops/unyo/core/tsdb/vmremote"
	"github.com/unyo-ops/unyo/core/version"
	"github.com/unyo-ops/unyo/core/wal"
	"github.com/unyo-ops/unyo/core/web"
	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// Version is stamped into status answers and node descriptions: the
// release the Makefile linked in, or the VCS revision Go recorded.
var Version = version.Short()

// OpenStore opens the configured state store.
func OpenStore(ctx context.Context, c config.Store) (store.Store, error) {
	if c.Driver == "postgres" {
		return sqlstore.OpenPostgres(ctx, c.DSN)
	}
	if err := os.MkdirAll(filepath.Dir(c.DSN), private.DirMode); err != nil {
		return nil, fmt.Errorf("create the directory of the SQLite database %s: %w", c.DSN, err)
	}
	return sqlstore.OpenSQLite(ctx, c.DSN)
}

func serverOptions(c *config.Config, listen string, log *slog.Logger) server.Options {
	return server.Options{
		Listen:          listen,
		CertFile:        c.Server.TLS.CertFile,
		KeyFile:         c.Server.TLS.KeyFile,
		ClientCAFile:    c.Server.TLS.ClientCAFile,
		Auth:            server.Auth{AdminTokens: c.Server.AdminTokens, JoinTokens: c.Server.JoinTokens, Insecure: c.Server.Insecure},
		Limits:          server.Limits{RequestBytes: int64(c.Server.MaxRequestBytes), MessageBytes: int(c.Server.MaxRequestBytes)},
		ShutdownTimeout: c.Server.ShutdownTimeout,
		Logger:          log,
		Version:         Version,
	}
}

// preflight checks what can fail at start before anything is created: the
// server's TLS files, then the data directory's privacy.
func preflight(c *config.Config, log *slog.Logger) error {
	if err := server.New(serverOptions(c, c.Server.Listen, log)).CheckTLS(); err != nil {
		return err
	}
	return agentrole.PrivateState(c, log)
}

// Root runs a root server.
func Root(ctx context.Context, c *config.Config, log *slog.Logger) error {
	if err := preflight(c, log); err != nil {
		return err
	}
	st, err := OpenStore(ctx, c.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	return serveRoot(ctx, c, st, log)
}

func serveRoot(ctx context.Context, c *config.Config, st store.Store, log *slog.Logger) error {
	srv := server.New(serverOptions(c, c.Server.Listen, log.With("role", "root")))
	r := root.New(st, root.Options{Version: Version, ClusterToken: c.Root.ClusterToken, ClusterTLS: agentrole.ClientTLS(c.Root.ClusterTLS), AuditRetention: c.Audit.Retention, AddressQuarantine: c.Root.AddressQuarantine, PromLimits: promapi.Limits{MaxSeries: c.Root.QueryMaxSeries, MaxPoints: c.Root.QueryMaxPoints}, Logger: log,
		Peers: c.Root.Peers, PeerWatch: root.PeerWatchOptions{Interval: c.Root.PeerWatch.Interval, Thresholds: thresholds(c.Root.PeerWatch)}})
	r.Register(srv)
	// The web console at /, calling the API just registered.
	if err := web.Mount(srv, log.With("role", "root")); err != nil {
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()
	err = srv.Serve(ctx, ln)
	cancel()
	return err
}

// Cluster runs a cluster server, registering it at root when configured.
func Cluster(ctx context.Context, c *config.Config, log *slog.Logger) error {
	if err := preflight(c, log); err != nil {
		return err
	}
	st, err := OpenStore(ctx, c.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	return runCluster(ctx, c, c.Server.Listen, st, log)
}

// OpenMetrics opens the configured TSDB; nil when metrics.store is none.
// The embedded one keeps its data in <data_dir>/metrics.
func OpenMetrics(c *config.Config) (tsdb.Store, error) {
	switch c.Metrics.Store {
	case "none":
		return nil, nil
	case "remote":
		db, err := vmremote.Open(vmremote.Options{URL: c.Metrics.URL, Retention: c.Metrics.Retention, MaxSeries: c.Metrics.MaxSeries, MaxPointsPerSeries: c.Metrics.MaxPointsPerSeries})
		if err != nil {
			return nil, fmt.Errorf("metrics.url: %w", err)
		}
		return db, nil
	}
	dir := filepath.Join(c.DataDir, "metrics")
	db, err := vmembed.Open(vmembed.Options{DataDir: dir, Retention: c.Metrics.Retention,
		MaxSeries: c.Metrics.MaxSeries, MaxPointsPerSeries: c.Metrics.MaxPointsPerSeries})
	if err != nil {
		return nil, fmt.Errorf("open the embedded metrics store in %s: %w", dir, err)
	}
	return db, nil
}

// OpenLogs opens the configured log store; nil when logs.store is none. The
// embedded one keeps its data in <data_dir>/logs.
func OpenLogs(ctx context.Context, c *config.Config) (logstore.Store, error) {
	switch c.Logs.Store {
	case "none":
		return nil, nil
	case "clickhouse":
		st, err := clickhouse.Open(ctx, clickhouse.Options{Addr: c.Logs.ClickHouse.Addr, Database: c.Logs.ClickHouse.Database, Retention: c.Logs.Retention})
		if err != nil {
			return nil, fmt.Errorf("logs.clickhouse: %w", err)
		}
		return st, nil
	}
	dir := filepath.Join(c.DataDir, "logs")
	st, err := vlembed.Open(vlembed.Options{Path: dir, Retention: c.Logs.Retention})
	if err != nil {
		return nil, fmt.Errorf("open the embedded log store in %s: %w", dir, err)
	}
	return st, nil
}

func runCluster(ctx context.Context, c *config.Config, listen string, st store.Store, log *slog.Logger) error {
	release, err := guardReplicas(ctx, c, st, log)
	if err != nil {
		return err
	}
	defer release()
	metrics, err := OpenMetrics(c)
	if err != nil {
		return err
	}
	if metrics != nil {
		defer closeLogged(log, "metrics store", metrics)
	}
	logs, err := OpenLogs(ctx, c)
	if err != nil {
		return err
	}
	if logs != nil {
		defer closeLogged(log, "log store", logs)
	}
	var telemetryWAL *wal.WAL
	if metrics != nil || logs != nil {
		if telemetryWAL, err = openTelemetryWAL(c, log); err != nil {
			return err
		}
		defer closeLogged(log, "telemetry WAL", telemetryWAL)
	}
	hooks, err := apihook.ParsePolicy(c.Cluster.APIHook.Allow)
	if err != nil {
		return err // Validate reported it already
	}
	opts := serverOptions(c, listen, log.With("role", "cluster"))
	var nodeCA *identity.CA
	if c.Cluster.NodeCA.Enabled() {
		if nodeCA, err = identity.LoadCA(c.Cluster.NodeCA.CertFile, c.Cluster.NodeCA.KeyFile); err != nil {
			return fmt.Errorf("cluster.node_ca: %w", err)
		}
		// Node certificates are verified against the node CA unless the
		// operator named another client CA (a bundle with it, say).
		if opts.ClientCAFile == "" {
			opts.ClientCAFile = c.Cluster.NodeCA.CertFile
		}
	}
	if h, ok := st.(interface{ Health(context.Context) error }); ok {
		opts.Health = h.Health
	}
	srv := server.New(opts)
	cl := cluster.New(st, cluster.Options{
		HookPolicy: hooks, PluginEnv: c.Cluster.Plugins.Env,
		Name: c.Cluster.Name, Replica: c.Cluster.Replica, Version: Version,
		LeaseTTL: c.Cluster.LeaseTTL, HeartbeatInterval: c.Cluster.HeartbeatInterval,
		StaleAfter: c.Cluster.StaleAfter, DownAfter: c.Cluster.DownAfter, HistoryPerCheck: c.Store.HistoryPerCheck,
		AutoCordonAfter: c.Cluster.AutoCordonAfter, AutoDrainAfter: c.Cluster.AutoDrainAfter,
		Metrics: metrics, Logs: logs, TelemetryWAL: telemetryWAL, LogRetention: c.Logs.Retention, Logger: log,
		PluginDirs: c.Cluster.Plugins.Dirs, Plugins: agentrole.PluginConfigs(c.Cluster.Plugins),
		Stats:             statsOptions(c),
		AuditRetention:    c.Audit.Retention,
		PluginDigestCache: filepath.Join(c.DataDir, "plugin-digests.json"),
		NodeCA:            nodeCA, NodeCertTTL: c.Cluster.NodeCertTTL,
		PeerWatch: cluster.PeerWatchOptions{Interval: c.Cluster.PeerWatch.Interval, Thresholds: thresholds(c.Cluster.PeerWatch)},
	})
	if err := checkAcked(ctx, c, st, cl, log); err != nil {
		return err
	}
	// Before serving: an agent resending log lines must find the replayed
	// lines' positions recorded.
	if err := cl.ReplayTelemetry(ctx); err != nil {
		return err
	}
	if c.Cluster.DefaultRules {
		if err := applyDefaultRules(ctx, st, c.Cluster.Name, log); err != nil {
			return err
		}
	}
	cl.Register(srv)
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); cl.Run(ctx) }()
	if c.Cluster.RootURL != "" {
		adv := c.Cluster.AdvertiseURL
		if adv == "" {
			adv = "http://" + ln.Addr().String()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.RegisterAtRoot(ctx, c.Cluster.RootURL, c.Cluster.RootToken, agentrole.ClientTLS(c.Cluster.RootTLS), adv, c.Cluster.HeartbeatInterval*3)
		}()
	}
	err = srv.Serve(ctx, ln)
	cancel()
	return err
}

// thresholds are a watcher's peerwatch thresholds as configured.
func thresholds(p config.PeerWatch) peerwatch.Thresholds {
	return peerwatch.Thresholds{Unreachable: p.UnreachableAfter, Lag: p.LagAfter, Ingest: p.IngestAfter}
}

// telemetryWALDir, in the data directory, holds the cluster's telemetry
// write-ahead log (core/wal).
const telemetryWALDir = "telemetry-wal"

// telemetryWALKeep is how long a closed segment of the telemetry WAL is
// kept: several times the longest the stores take to flush to disk on
// their own (embedded VictoriaMetrics: about 12s, its pending rows and
// in-memory parts; embedded VictoriaLogs: 2s; ClickHouse and a remote
// VictoriaMetrics acknowledge writes they hold).
const telemetryWALKeep = 60 * time.Second

func openTelemetryWAL(c *config.Config, log *slog.Logger) (*wal.WAL, error) {
	dir := filepath.Join(c.DataDir, telemetryWALDir)
	w, err := wal.Open(wal.Options{Dir: dir, MaxBytes: int64(c.Cluster.TelemetryWALMaxBytes), Keep: telemetryWALKeep, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open the telemetry write-ahead log in %s: %w", dir, err)
	}
	return w, nil
}

// ackedMarkFile, in the data directory, records the highest event sequence
// the cluster acknowledged to agents (see sqlstore.TrackAcked).
const ackedMarkFile = "acked-events"

// checkAcked compares the store with the events acknowledged before it
// (re)started, reports any loss, and keeps the record from then on.
func checkAcked(ctx context.Context, c *config.Config, st store.Store, cl *cluster.Cluster, log *slog.Logger) error {
	t, ok := st.(interface {
		TrackAcked(context.Context, string) (sqlstore.AckCheck, error)
	})
	if !ok {
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("create the data directory %s: %w", c.DataDir, err)
	}
	chk, err := t.TrackAcked(ctx, filepath.Join(c.DataDir, ackedMarkFile))
	if err != nil {
		return err
	}
	if chk.Missing() > 0 {
		return cl.ReportLostEvents(ctx, chk.Missing(), chk.Acked, chk.Stored, chk.Path)
	}
	log.Info("the store holds every event acknowledged to agents", "acked_seq", chk.Acked, "stored_seq", chk.Stored, "mark", chk.Path)
	return nil
}

func closeLogged(log *slog.Logger, what string, c io.Closer) {
	if err := c.Close(); err != nil {
		log.Error("closing the "+what+" failed", "err", err)
	}
}

// nextPort returns host:port+n, for dev's cluster and agent listeners.
func nextPort(listen string, n int) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("server.listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 {
		return "", fmt.Errorf("server.listen %q: dev needs a fixed port", listen)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// statsOptions configures the statistics tier, nil when it is off. The first
// run reaches back as far as the raw stores keep data.
func statsOptions(c *config.Config) *cluster.StatsOptions {
	if !c.Stats.Enabled {
		return nil
	}
	return &cluster.StatsOptions{
		HourlyRetention: c.Stats.HourlyRetention, DailyRetention: c.Stats.DailyRetention,
		Lateness: c.Stats.Lateness, Metrics: c.Stats.Metrics, Interval: c.Stats.Interval,
		MetricsBackfill: c.Metrics.Retention, LogsBackfill: c.Logs.Retention,
	}
}
