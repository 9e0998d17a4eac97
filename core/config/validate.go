package config

import (
	"github.com/unyo-ops/unyo/core/server"

	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/eventrules/apihook"
	"github.com/unyo-ops/unyo/stats"
)

// Validate checks the rules that span keys or depend on the role: required
// fields, allowed values, addresses and URLs. Load calls it (and names the
// source of each bad value); a caller that builds or changes a Config itself
// should call it too. It returns nil or an *Error.
func (c *Config) Validate() error {
	if ps := c.problems(); len(ps) > 0 {
		return &Error{Problems: ps}
	}
	return nil
}

func (c *Config) problems() []Problem {
	var ps []Problem
	bad := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	oneOf := func(key, value string, allowed ...string) {
		if !slices.Contains(allowed, value) {
			bad(key, "invalid value %q (expected %s)", value, orList(allowed))
		}
	}
	required := func(key, value, why string) {
		if value == "" {
			bad(key, "required %s", why)
		}
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be longer than 0s")
		}
	}
	atLeastOne := func(key string, n int64) {
		if n < 1 {
			bad(key, "must be at least 1, got %d", n)
		}
	}

	oneOf("role", c.Role, RoleDev, RoleRoot, RoleCluster, RoleAgent)
	required("data_dir", c.DataDir, "(the directory for state and spool)")
	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")

	serves := c.Role == RoleDev || c.Role == RoleRoot || c.Role == RoleCluster
	isCluster := c.Role == RoleDev || c.Role == RoleCluster
	isAgent := c.Role == RoleDev || c.Role == RoleAgent

	if serves {
		if msg := checkHostPort(c.Server.Listen); msg != "" {
			bad("server.listen", "%s", msg)
		} else if c.Role == RoleDev && !server.LoopbackOnly(c.Server.Listen) {
			bad("server.listen", "unyo dev serves only on loopback (127.0.0.1 or [::1]), got %q: run root, cluster and agent with `unyo server` and `unyo agent` to serve beyond this machine", c.Server.Listen)
		}
		tls := c.Server.TLS
		if tls.CertFile != "" && tls.KeyFile == "" {
			bad("server.tls.key_file", "required when server.tls.cert_file is set (set both or neither)")
		}
		if tls.KeyFile != "" && tls.CertFile == "" {
			bad("server.tls.cert_file", "required when server.tls.key_file is set (set both or neither)")
		}
		if tls.ClientCAFile != "" && tls.CertFile == "" {
			bad("server.tls.client_ca_file", "needs server.tls.cert_file and key_file: client certificates are verified only over TLS")
		}
		positive("server.shutdown_timeout", c.Server.ShutdownTimeout)
		if c.Server.MaxRequestBytes < MiB {
			bad("server.max_request_bytes", "must be at least 1MiB, got %d bytes", int64(c.Server.MaxRequestBytes))
		}
		oneOf("store.driver", c.Store.Driver, "sqlite", "postgres")
		if c.Store.Driver == "postgres" {
			required("store.dsn", c.Store.DSN, "when store.driver is postgres (e.g. postgres://unyo@db.example.com/unyo)")
		}
		atLeastOne("store.history_per_check", int64(c.Store.HistoryPerCheck))
	}

	if c.Role == RoleDev || c.Role == RoleRoot {
		ps = append(ps, clientTLSProblems("root.cluster_tls", c.Root.ClusterTLS)...)
		ps = append(ps, peerWatchProblems("root.peer_watch", c.Root.PeerWatch)...)
		if c.Root.Peers < 1 {
			bad("root.peers", "must be at least 1, got %d (how many clusters each cluster watches)", c.Root.Peers)
		}
	}

	if isCluster {
		required("cluster.name", c.Cluster.Name, "for role "+c.Role)
		if c.Cluster.AdvertiseURL != "" { // empty only when server.listen is bad
			if msg := checkURL(c.Cluster.AdvertiseURL); msg != "" {
				bad("cluster.advertise_url", "%s", msg)
			}
		}
		if c.Cluster.RootURL != "" {
			if msg := checkURL(c.Cluster.RootURL); msg != "" {
				bad("cluster.root_url", "%s", msg)
			}
			// No root_token: a root without authentication (on loopback)
			// takes the registration as it is; one with authentication
			// refuses it with a message naming this key.
		}
		ps = append(ps, clientTLSProblems("cluster.root_tls", c.Cluster.RootTLS)...)
		required("cluster.replica", c.Cluster.Replica, "(an id for this replica)")
		if ca := c.Cluster.NodeCA; ca.Enabled() {
			switch {
			case ca.CertFile == "":
				bad("cluster.node_ca.cert_file", "required when cluster.node_ca.key_file is set (the CA certificate, e.g. ca.crt from `unyo ca create`)")
			case ca.KeyFile == "":
				bad("cluster.node_ca.key_file", "required when cluster.node_ca.cert_file is set (the CA's key, e.g. ca.key from `unyo ca create`)")
			case !c.Server.TLS.Enabled():
				bad("cluster.node_ca", "needs server.tls.cert_file and key_file: nodes present their certificates only over TLS (and server.tls.client_ca_file, which defaults to cluster.node_ca.cert_file, verifies them)")
			}
		}
		if c.Cluster.NodeCertTTL < 10*time.Second {
			bad("cluster.node_cert_ttl", "must be at least 10s, got %s (agents renew their certificates at 2/3 of it)", c.Cluster.NodeCertTTL)
		}
		if c.Cluster.TelemetryWALMaxBytes < MiB {
			bad("cluster.telemetry_wal_max_bytes", "must be at least 1MiB, got %d bytes (a request of samples takes up to several MiB)", int64(c.Cluster.TelemetryWALMaxBytes))
		}
		positive("cluster.lease_ttl", c.Cluster.LeaseTTL)
		positive("cluster.heartbeat_interval", c.Cluster.HeartbeatInterval)
		if c.Cluster.HeartbeatInterval > 0 && c.Cluster.StaleAfter <= c.Cluster.HeartbeatInterval {
			bad("cluster.stale_after", "must be longer than cluster.heartbeat_interval (%s), or nodes turn stale between heartbeats", c.Cluster.HeartbeatInterval)
		}
		if c.Cluster.DownAfter <= c.Cluster.StaleAfter {
			bad("cluster.down_after", "must be longer than cluster.stale_after (%s): a node is Stale before it is Down", c.Cluster.StaleAfter)
		}
		if c.Cluster.AutoCordonAfter < 0 {
			bad("cluster.auto_cordon_after", "must not be negative (0 turns it off), got %s", c.Cluster.AutoCordonAfter)
		}
		if c.Cluster.AutoDrainAfter < 0 {
			bad("cluster.auto_drain_after", "must not be negative (0 turns it off), got %s", c.Cluster.AutoDrainAfter)
		}
		ps = append(ps, peerWatchProblems("cluster.peer_watch", c.Cluster.PeerWatch)...)
		ps = append(ps, pluginProblems("cluster.plugins", c.Cluster.Plugins, "action")...)
		if _, err := apihook.ParsePolicy(c.Cluster.APIHook.Allow); err != nil {
			for _, e := range unjoin(err) {
				// ParsePolicy names the entry (cluster.api_hook.allow[i]).
				key, msg, _ := strings.Cut(e.Error(), ": ")
				bad(key, "%s", msg)
			}
		}
		oneOf("metrics.store", c.Metrics.Store, "embedded", "remote", "none")
		if c.Metrics.Store == "remote" {
			if msg := checkURL(c.Metrics.URL); msg != "" {
				bad("metrics.url", "%s: the VictoriaMetrics server, required when metrics.store is remote", msg)
			}
		}
		if c.Metrics.Retention < 24*time.Hour {
			bad("metrics.retention", "must be at least 1d, got %s", c.Metrics.Retention)
		}
		if c.Metrics.MaxSeries < 1 {
			bad("metrics.max_series", "must be at least 1, got %d", c.Metrics.MaxSeries)
		}
		if c.Metrics.MaxPointsPerSeries < 1 {
			bad("metrics.max_points_per_series", "must be at least 1, got %d", c.Metrics.MaxPointsPerSeries)
		}
		oneOf("logs.store", c.Logs.Store, "embedded", "clickhouse", "none")
		if c.Logs.Store == "clickhouse" {
			if c.Logs.ClickHouse.Addr == "" {
				bad("logs.clickhouse.addr", "required when logs.store is clickhouse (ClickHouse's native protocol address, e.g. ch.example.com:9000)")
			} else if msg := checkHostPort(c.Logs.ClickHouse.Addr); msg != "" {
				bad("logs.clickhouse.addr", "%s", msg)
			}
			required("logs.clickhouse.database", c.Logs.ClickHouse.Database, "when logs.store is clickhouse")
		}
		if c.Logs.Retention < 24*time.Hour {
			bad("logs.retention", "must be at least 1d (logs are dropped by whole days), got %s", c.Logs.Retention)
		}
		ps = append(ps, statsProblems(c.Stats)...)
	}
	if serves && c.Audit.Retention < 24*time.Hour {
		bad("audit.retention", "must be at least 1d, got %s", c.Audit.Retention)
	}

	if isAgent {
		required("agent.node_name", c.Agent.NodeName, "(the name this node reports as)")
		for name := range c.Agent.Labels {
			if name == "" {
				bad("agent.labels", "label names must not be empty")
			}
		}
		if msg := checkURLList(c.Agent.ClusterURL); msg != "" {
			bad("agent.cluster_url", "%s", msg)
		}
		ps = append(ps, clientTLSProblems("agent.tls", c.Agent.TLS)...)
		atLeastOne("agent.max_output", int64(c.Agent.MaxOutput))
		atLeastOne("agent.max_concurrent_checks", int64(c.Agent.MaxConcurrentChecks))
		atLeastOne("agent.batch_size", int64(c.Agent.BatchSize))
		positive("agent.flush_interval", c.Agent.FlushInterval)
		required("agent.spool_dir", c.Agent.SpoolDir, "(where results wait while the cluster is unreachable)")
		atLeastOne("agent.spool_max_bytes", int64(c.Agent.SpoolMaxBytes))
		atLeastOne("agent.result_buffer_records", int64(c.Agent.ResultBufferRecords))
		atLeastOne("agent.result_buffer_bytes", int64(c.Agent.ResultBufferBytes))
		if c.Agent.StatusListen != "" {
			if msg := checkHostPort(c.Agent.StatusListen); msg != "" {
				bad("agent.status_listen", "%s", msg)
			}
		}
		if strings.ContainsAny(c.Agent.StatusToken, " \t\r\n") {
			bad("agent.status_token", "must not contain spaces or line breaks (it is sent as a bearer token)")
		}
		ps = append(ps, envProblems("agent.check_env", c.Agent.CheckEnv)...)
		if p := c.Agent.Ports.MetadataPort; p < 0 || p > 65535 {
			bad("agent.ports.metadata_port", "must be a TCP port (1-65535, 0 for the default 80), got %d", p)
		}
		if c.Agent.MetricsInterval != 0 && c.Agent.MetricsInterval < time.Second {
			bad("agent.metrics_interval", "must be 0 (off) or at least 1s, got %s", c.Agent.MetricsInterval)
		}
		for i, lf := range c.Agent.Logs {
			key := fmt.Sprintf("agent.logs[%d]", i)
			required(key+".path", lf.Path, "(the file or glob to tail)")
			if lf.Format != "" {
				oneOf(key+".format", lf.Format, "auto", "json", "logfmt", "plain")
			}
			if lf.StartAt != "" {
				oneOf(key+".start_at", lf.StartAt, "end", "beginning")
			}
		}
		for i, check := range c.Agent.Checks {
			if name, _ := check["name"].(string); name == "" {
				bad(fmt.Sprintf("agent.checks[%d].name", i), "required (every check needs a name)")
			}
		}
		ps = append(ps, pluginProblems("agent.plugins", c.Agent.Plugins, "check", "provider")...)
	}
	return ps
}

// clientTLSProblems checks a client's TLS settings: a client certificate
// needs its key and the other way round. Whether the files exist and hold
// PEM is checked when the client is made, with the file's own error.
func clientTLSProblems(key string, t ClientTLS) []Problem {
	var ps []Problem
	if t.CertFile != "" && t.KeyFile == "" {
		ps = append(ps, Problem{Key: key + ".key_file", Msg: "required when " + key + ".cert_file is set (set both or neither)"})
	}
	if t.KeyFile != "" && t.CertFile == "" {
		ps = append(ps, Problem{Key: key + ".cert_file", Msg: "required when " + key + ".key_file is set (set both or neither)"})
	}
	return ps
}

// peerWatchProblems checks a watcher's interval and thresholds: a
// threshold at or below the interval would judge a cluster down (or stuck)
// between two looks.
func peerWatchProblems(key string, p PeerWatch) []Problem {
	var ps []Problem
	if p.Interval <= 0 {
		return []Problem{{Key: key + ".interval", Msg: fmt.Sprintf("must be positive, got %s", p.Interval)}}
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"unreachable_after", p.UnreachableAfter}, {"lag_after", p.LagAfter}, {"ingest_after", p.IngestAfter}} {
		if t.d <= p.Interval {
			ps = append(ps, Problem{Key: key + "." + t.name, Msg: fmt.Sprintf("must be longer than %s.interval (%s), got %s", key, p.Interval, t.d)})
		}
	}
	return ps
}

// statsProblems checks the statistics tier's settings.
func statsProblems(s Stats) []Problem {
	var ps []Problem
	bad := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if !s.Enabled {
		return nil
	}
	const day = 24 * time.Hour
	// Daily rollups are made from the hourly ones of their day, recomputed
	// until the day's lateness passed: the hourly ones must outlive that.
	if s.HourlyRetention < 2*day || s.HourlyRetention%day != 0 {
		bad("stats.hourly_retention", "must be whole days and at least 2d (daily rollups are made from hourly ones), got %s", s.HourlyRetention)
	}
	if s.DailyRetention < s.HourlyRetention || s.DailyRetention%day != 0 {
		bad("stats.daily_retention", "must be whole days and at least stats.hourly_retention (%s), got %s", s.HourlyRetention, s.DailyRetention)
	}
	if s.Lateness < 0 || s.Lateness > day {
		bad("stats.lateness", "must be between 0s and 1d, got %s", s.Lateness)
	}
	if s.Interval < time.Second {
		bad("stats.interval", "must be at least 1s, got %s", s.Interval)
	}
	for i, m := range s.Metrics {
		if _, err := stats.ParseSelector(m); err != nil {
			bad(fmt.Sprintf("stats.metrics[%d]", i), "%v", err)
		}
	}
	return ps
}

// pluginProblems checks a plugins section whose plugins must be of one of
// kinds (the first is named in messages about names).
func pluginProblems(key string, p Plugins, kinds ...string) []Problem {
	kind := kinds[0]
	ps := envProblems(key+".env", p.Env)
	bad := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if len(p.Enabled) > 0 && len(p.Dirs) == 0 {
		bad(key+".dirs", "required when plugins are enabled (where unyo-<kind>-<name> binaries are looked for)")
	}
	for i, d := range p.Dirs {
		if d == "" {
			bad(fmt.Sprintf("%s.dirs[%d]", key, i), "must not be empty")
		}
	}
	seen := map[string]int{}
	for i, pl := range p.Enabled {
		at := fmt.Sprintf("%s.enabled[%d]", key, i)
		if !slices.Contains(kinds, pl.Kind) {
			want := strings.Join(kinds, " or ")
			bad(at+".kind", "invalid value %q (expected %s: only %s plugins run here)", pl.Kind, want, want)
		}
		switch {
		case pl.Name == "":
			bad(at+".name", "required (the <name> in unyo-%s-<name>)", kind)
		case strings.ContainsAny(pl.Name, "/ \t\n"):
			bad(at+".name", "%q must not contain slashes or spaces", pl.Name)
		default:
			if j, dup := seen[pl.Kind+"/"+pl.Name]; dup {
				bad(at+".name", "plugin %s/%s is already enabled at %s.enabled[%d]", pl.Kind, pl.Name, key, j)
			}
			seen[pl.Kind+"/"+pl.Name] = i
		}
		if !isSHA256(pl.SHA256) {
			if pl.SHA256 == "" {
				bad(at+".sha256", "required: the binary's sha256 (64 hex digits, as printed by sha256sum)")
			} else {
				bad(at+".sha256", "must be 64 hex digits (as printed by sha256sum)")
			}
		}
	}
	return ps
}

// envProblems checks a list of variable names to pass on to checks or
// plugins: never unyo's own (UNYO_*), which hold its tokens.
func envProblems(key string, names []string) []Problem {
	var ps []Problem
	for i, name := range names {
		if err := procenv.CheckName(name); err != nil {
			ps = append(ps, Problem{Key: fmt.Sprintf("%s[%d]", key, i), Msg: err.Error()})
		}
	}
	return ps
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// checkHostPort returns what is wrong with a listen address, or "".
func checkHostPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr == nil && n >= 0 && n <= 65535 {
			return ""
		}
	}
	return fmt.Sprintf("invalid address %q (expected host:port, e.g. 127.0.0.1:7400 or :7400)", addr)
}

// checkURL returns what is wrong with a base URL of a unyo server, or "".
func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("invalid URL %q (expected http://host:port or https://host:port)", s)
	}
	return ""
}

// checkURLList is checkURL for a server address that may list the URLs of
// several replicas, separated by commas.
func checkURLList(s string) string {
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); checkURL(u) != "" {
			return fmt.Sprintf("invalid URL %q (expected http://host:port or https://host:port, or several replicas' URLs separated by commas)", u)
		}
	}
	return ""
}

// orList writes "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
