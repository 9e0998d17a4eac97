package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Roles a process runs as (Config.Role).
const (
	RoleDev     = "dev"     // root, one cluster and one agent in one process
	RoleRoot    = "root"    // the top tier: knows the clusters
	RoleCluster = "cluster" // a cluster: its agents report here
	RoleAgent   = "agent"   // runs checks on a node

	// RoleServer is only for LoadOptions.Role: `unyo server` runs as root or
	// as cluster, and the configuration says which.
	RoleServer = "server"
)

// Config is the whole configuration of a unyo process. Keys not used by the
// process's role are still type-checked but otherwise ignored, so one file
// may serve several roles.
//
// The `want` tags only word error messages ("expected a string host:port").
type Config struct {
	// Role is dev, root, cluster or agent; normally set by the subcommand.
	Role string `yaml:"role" mapstructure:"role"`
	// DataDir holds the SQLite database and the agent's spool by default.
	DataDir string  `yaml:"data_dir" mapstructure:"data_dir"`
	Log     Log     `yaml:"log" mapstructure:"log"`
	Server  Server  `yaml:"server" mapstructure:"server"`
	Store   Store   `yaml:"store" mapstructure:"store"`
	Cluster Cluster `yaml:"cluster" mapstructure:"cluster"`
	Root    Root    `yaml:"root" mapstructure:"root"`
	Agent   Agent   `yaml:"agent" mapstructure:"agent"`
	Metrics Metrics `yaml:"metrics" mapstructure:"metrics"`
	Logs    Logs    `yaml:"logs" mapstructure:"logs"`
	Stats   Stats   `yaml:"stats" mapstructure:"stats"`
	Audit   Audit   `yaml:"audit" mapstructure:"audit"`

	// File is the configuration file Load read ("" if none). It is not a
	// setting; it lets later checks (such as of agent.checks[i].spec) name
	// the file in their errors.
	File string `yaml:"-" mapstructure:"-"`
}

// Log says how the process logs.
type Log struct {
	Level  string `yaml:"level" mapstructure:"level" want:"log level"`    // debug, info, warn or error
	Format string `yaml:"format" mapstructure:"format" want:"log format"` // text or json
}

// Server is the API server of root and cluster.
type Server struct {
	Listen string `yaml:"listen" mapstructure:"listen" want:"host:port"`
	TLS    TLS    `yaml:"tls" mapstructure:"tls"`
	// AdminTokens are bearer tokens for operators (and for root calling a
	// cluster).
	AdminTokens []string `yaml:"admin_tokens" mapstructure:"admin_tokens"`
	// JoinTokens are bearer tokens agents present (and clusters registering
	// at root).
	JoinTokens []string `yaml:"join_tokens" mapstructure:"join_tokens"`
	// Insecure lets a server without tokens listen beyond loopback; without
	// it such a server refuses to start.
	Insecure        bool          `yaml:"insecure" mapstructure:"insecure"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" mapstructure:"shutdown_timeout"`
	// MaxRequestBytes bounds one request body, as it arrives and after
	// decompression.
	MaxRequestBytes Size `yaml:"max_request_bytes" mapstructure:"max_request_bytes"`
}

// TLS enables TLS when both files are set.
type TLS struct {
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" want:"path"`
	KeyFile  string `yaml:"key_file" mapstructure:"key_file" want:"path"`
	// ClientCAFile verifies client certificates (mTLS) against this CA.
	ClientCAFile string `yaml:"client_ca_file" mapstructure:"client_ca_file" want:"path"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" && t.KeyFile != "" }

// ClientTLS is how a client verifies the https server it calls and, for
// servers that ask (mTLS), the certificate it presents. Without ca_file the
// system's CAs (and SSL_CERT_FILE) are used; with it, only that file's CAs.
type ClientTLS struct {
	CAFile string `yaml:"ca_file" mapstructure:"ca_file" want:"path"`
	// ServerName is the name the server's certificate must carry when it
	// is not the URL's host.
	ServerName string `yaml:"server_name" mapstructure:"server_name" want:"host name"`
	CertFile   string `yaml:"cert_file" mapstructure:"cert_file" want:"path"`
	KeyFile    string `yaml:"key_file" mapstructure:"key_file" want:"path"`
}

// Store is the state store of root and cluster.
type Store struct {
	Driver string `yaml:"driver" mapstructure:"driver" want:"driver name"` // sqlite or postgres
	// DSN is required for postgres; for sqlite it is the database path and
	// defaults to <data_dir>/state.db.
	DSN string `yaml:"dsn" mapstructure:"dsn"`
	// HistoryPerCheck bounds the events kept per node and check.
	HistoryPerCheck int `yaml:"history_per_check" mapstructure:"history_per_check"`
}

// Cluster is used by role cluster (and dev).
type Cluster struct {
	Name string `yaml:"name" mapstructure:"name"`
	// AdvertiseURL is how root reaches this cluster; default
	// http(s)://<server.listen>, with the hostname for a wildcard host.
	AdvertiseURL string `yaml:"advertise_url" mapstructure:"advertise_url" want:"URL"`
	// RootURL, if set, makes the cluster register itself at root, presenting
	// RootToken (the credential `unyo clusters add NAME` printed at root).
	RootURL   string `yaml:"root_url" mapstructure:"root_url" want:"URL"`
	RootToken string `yaml:"root_token" mapstructure:"root_token"`
	// RootTLS verifies root's certificate when root_url is https.
	RootTLS ClientTLS `yaml:"root_tls" mapstructure:"root_tls"`
	// Replica identifies this replica among those sharing the cluster's
	// store; default <hostname>-<pid>.
	Replica  string        `yaml:"replica" mapstructure:"replica"`
	LeaseTTL time.Duration `yaml:"lease_ttl" mapstructure:"lease_ttl"`
	// HeartbeatInterval is told to agents.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval" mapstructure:"heartbeat_interval"`
	// StaleAfter: a node without heartbeats for this long turns Stale.
	StaleAfter time.Duration `yaml:"stale_after" mapstructure:"stale_after"`
	// DownAfter: a Stale node whose agent also fails the direct probe turns
	// Down after this long without heartbeats.
	DownAfter time.Duration `yaml:"down_after" mapstructure:"down_after"`
	// AutoCordonAfter and AutoDrainAfter are every node's automatic cordon
	// and drain (0, the default, is off): a node not Ready for that long is
	// cordoned (and uncordoned once Ready again as long), or drained.
	// `unyo nodes set NAME --auto-cordon D --auto-drain D|off` overrides
	// them per node.
	AutoCordonAfter time.Duration `yaml:"auto_cordon_after" mapstructure:"auto_cordon_after"`
	AutoDrainAfter  time.Duration `yaml:"auto_drain_after" mapstructure:"auto_drain_after"`
	// Plugins are the action plugins EventRule plugin actions run.
	Plugins Plugins `yaml:"plugins" mapstructure:"plugins"`
	// APIHook says where EventRule api_hook actions may be sent.
	APIHook APIHook `yaml:"api_hook" mapstructure:"api_hook"`
	// NodeCA, when set, makes the cluster sign a client certificate for
	// every node that enrols over TLS; the node then authenticates with it
	// (mTLS) instead of a token. All replicas share it; make one with
	// `unyo ca create`.
	NodeCA NodeCA `yaml:"node_ca" mapstructure:"node_ca"`
	// NodeCertTTL is how long a node certificate is valid; agents renew
	// theirs when 2/3 of it has passed.
	NodeCertTTL time.Duration `yaml:"node_cert_ttl" mapstructure:"node_cert_ttl"`
	// DefaultRules makes a cluster whose store has never held an event
	// rule start with the default rules (configs/resources/rules.yaml):
	// alerts for critical results and for nodes that are down. Applied
	// once, so a default rule deleted later stays deleted.
	DefaultRules bool `yaml:"default_rules" mapstructure:"default_rules"`
	// TelemetryWALMaxBytes bounds the telemetry write-ahead log under
	// <data_dir>/telemetry-wal; beyond it agents' samples and log lines
	// are refused (retryably) until the stores catch up.
	TelemetryWALMaxBytes Size `yaml:"telemetry_wal_max_bytes" mapstructure:"telemetry_wal_max_bytes"`
	// PeerWatch is how this cluster watches the peers root assigns it.
	PeerWatch PeerWatch `yaml:"peer_watch" mapstructure:"peer_watch"`
}

// PeerWatch is inter-cluster monitoring (cluster.peer_watch and
// root.peer_watch): how often a watcher looks at each cluster it watches
// and when it judges one down or stuck (see package peerwatch).
type PeerWatch struct {
	Interval time.Duration `yaml:"interval" mapstructure:"interval"`
	// UnreachableAfter: a cluster not answering for longer is down
	// (critical); so is one with no controller for longer.
	UnreachableAfter time.Duration `yaml:"unreachable_after" mapstructure:"unreachable_after"`
	// LagAfter: an event waiting longer for the pipeline makes it stuck.
	LagAfter time.Duration `yaml:"lag_after" mapstructure:"lag_after"`
	// IngestAfter: no agent result for longer, with nodes and checks,
	// makes it stuck.
	IngestAfter time.Duration `yaml:"ingest_after" mapstructure:"ingest_after"`
}

// NodeCA is cluster.node_ca: the CA certificate and key that sign node
// certificates.
type NodeCA struct {
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" want:"path"`
	KeyFile  string `yaml:"key_file" mapstructure:"key_file" want:"path"`
}

// Enabled reports whether the node CA is configured.
func (n NodeCA) Enabled() bool { return n.CertFile != "" || n.KeyFile != "" }

// APIHook is cluster.api_hook.
type APIHook struct {
	// Allow lists the destinations api_hooks may reach: IP addresses and
	// CIDRs (matched against the address dialled), host names and http(s)
	// URL prefixes. Empty allows any destination except loopback,
	// link-local (the cloud metadata address among them), unspecified and
	// multicast addresses; those need an address or CIDR entry. Not empty,
	// only what it lists is reached. See eventrules/apihook.Policy.
	Allow []string `yaml:"allow" mapstructure:"allow"`
}

// Root is used by role root (and dev).
type Root struct {
	// ClusterToken is presented by root to clusters (an admin token there).
	ClusterToken string `yaml:"cluster_token" mapstructure:"cluster_token"`
	// ClusterTLS verifies the clusters' certificates (https advertise URLs).
	ClusterTLS ClientTLS `yaml:"cluster_tls" mapstructure:"cluster_tls"`
	// Peers is how many clusters root assigns each cluster to watch.
	Peers int `yaml:"peers" mapstructure:"peers"`
	// PeerWatch is how root itself watches every cluster.
	PeerWatch PeerWatch `yaml:"peer_watch" mapstructure:"peer_watch"`
	// AddressQuarantine is how long a released IP address is not
	// allocated again; 0 means root's default (1h).
	AddressQuarantine time.Duration `yaml:"address_quarantine" mapstructure:"address_quarantine"`
	// QueryMaxSeries and QueryMaxPoints bound what root gathers from the
	// clusters for one Prometheus API query it evaluates itself; 0 means
	// root's defaults (100,000 series, 10,000,000 points).
	QueryMaxSeries int `yaml:"query_max_series" mapstructure:"query_max_series"`
	QueryMaxPoints int `yaml:"query_max_points" mapstructure:"query_max_points"`
}

// Agent is used by role agent (and dev).
type Agent struct {
	NodeName string `yaml:"node_name" mapstructure:"node_name"` // default: the hostname
	// Resource names the PhysicalResource of root's inventory this node is
	// (env UNYO_AGENT_RESOURCE); empty: root matches the node by its
	// hostname, then by its serial number.
	Resource   string            `yaml:"resource" mapstructure:"resource"`
	Labels     map[string]string `yaml:"labels" mapstructure:"labels"`
	ClusterURL string            `yaml:"cluster_url" mapstructure:"cluster_url" want:"URL"`
	Token      string            `yaml:"token" mapstructure:"token"` // a join token of the cluster
	// TLS verifies the cluster's certificate when cluster_url is https.
	TLS ClientTLS `yaml:"tls" mapstructure:"tls"`
	// CheckDirs are searched for a check's command (then PATH).
	CheckDirs []string `yaml:"check_dirs" mapstructure:"check_dirs"`
	// MaxOutput caps the plugin output kept per run.
	MaxOutput           Size          `yaml:"max_output" mapstructure:"max_output"`
	MaxConcurrentChecks int           `yaml:"max_concurrent_checks" mapstructure:"max_concurrent_checks"`
	BatchSize           int           `yaml:"batch_size" mapstructure:"batch_size"`
	FlushInterval       time.Duration `yaml:"flush_interval" mapstructure:"flush_interval"`
	// SpoolDir keeps results while the cluster is unreachable; default
	// <data_dir>/spool.
	SpoolDir      string `yaml:"spool_dir" mapstructure:"spool_dir" want:"path"`
	SpoolMaxBytes Size   `yaml:"spool_max_bytes" mapstructure:"spool_max_bytes"`
	// ResultBufferRecords and ResultBufferBytes bound the results kept in
	// memory while the spool cannot be written (disk full); past them the
	// oldest are dropped, counted in /status and reported as an event.
	ResultBufferRecords int  `yaml:"result_buffer_records" mapstructure:"result_buffer_records"`
	ResultBufferBytes   Size `yaml:"result_buffer_bytes" mapstructure:"result_buffer_bytes"`
	// StatusListen is the agent's status endpoint for liveness probes;
	// empty disables it.
	StatusListen string `yaml:"status_listen" mapstructure:"status_listen" want:"host:port"`
	// StatusToken, when set, is the bearer token that shows the full
	// /status (check outputs, plugin errors); without it /status shows
	// only health and counters. /healthz needs no token.
	StatusToken string `yaml:"status_token" mapstructure:"status_token"`
	// CheckEnv names variables of the agent's environment that command
	// checks get besides the base (PATH, HOME, LANG, LANGUAGE, LC_*, TZ,
	// TMPDIR). UNYO_* variables are refused: they hold unyo's tokens.
	CheckEnv []string `yaml:"check_env" mapstructure:"check_env"`
	// Checks are local checks, each a mapping with at least a string name
	// (and labels, spec). They are kept raw: the spec is decoded and checked
	// by the same code as `unyo apply`, not here.
	Checks []map[string]any `yaml:"checks" mapstructure:"checks"`
	// MetricsInterval is how often system metrics are collected; 0 turns
	// collection off (perfdata of checks is still sent).
	MetricsInterval time.Duration `yaml:"metrics_interval" mapstructure:"metrics_interval"`
	// Logs are the files the agent tails and sends to its cluster.
	Logs []LogFile `yaml:"logs" mapstructure:"logs"`
	// Plugins are the check plugins the agent runs (see plugins/README.md).
	Plugins Plugins `yaml:"plugins" mapstructure:"plugins"`
	// Ports turn on per-port network namespaces for the computes the
	// agent runs (root only: namespaces, links, routes, nftables).
	Ports AgentPorts `yaml:"ports" mapstructure:"ports"`
	// Capacity, per field when set, is what the scheduler may place on
	// this node instead of what the agent detects and its providers'
	// fingerprints report: to overcommit on purpose, or to hold part of
	// the machine back.
	Capacity AgentCapacity `yaml:"capacity" mapstructure:"capacity"`
}

// AgentPorts is agent.ports.
type AgentPorts struct {
	// Enabled gives each compute with an address its own port namespace,
	// routed from the node through a link address of 169.254.32.0/19,
	// with its gateway 169.254.1.1 and the metadata endpoint on
	// 169.254.1.2.
	Enabled bool `yaml:"enabled" mapstructure:"enabled"`
	// MetadataPort is the metadata endpoint's port (default 80).
	MetadataPort int `yaml:"metadata_port" mapstructure:"metadata_port"`
}

// AgentCapacity is agent.capacity; a zero field keeps the detected value.
type AgentCapacity struct {
	CPUs   int  `yaml:"cpus" mapstructure:"cpus"`
	Memory Size `yaml:"memory" mapstructure:"memory"`
	Disk   Size `yaml:"disk" mapstructure:"disk"`
}

// Plugins says where plugin binaries live and which ones to run.
type Plugins struct {
	// Dirs are searched in order for binaries named unyo-<kind>-<name>.
	Dirs []string `yaml:"dirs" mapstructure:"dirs"`
	// Enabled are the only plugins started; none starts no plugin host.
	Enabled []Plugin `yaml:"enabled" mapstructure:"enabled"`
	// Env names variables of unyo's environment that plugins (and the
	// commands they run) get besides the base, as agent.check_env does for
	// checks. UNYO_* variables are refused.
	Env []string `yaml:"env" mapstructure:"env"`
}

// Plugin is one item of plugins.enabled.
type Plugin struct {
	// Kind is check (on agents) or action (on clusters).
	Kind string `yaml:"kind" mapstructure:"kind"`
	// Name is the <name> in unyo-<kind>-<name>.
	Name string `yaml:"name" mapstructure:"name"`
	// SHA256 is the hex digest the binary must have; it is checked before
	// every start.
	SHA256 string `yaml:"sha256" mapstructure:"sha256"`
	// Config is passed to the plugin's Configure as JSON.
	Config map[string]any `yaml:"config,omitempty" mapstructure:"config"`
}

// LogFile is one item of agent.logs.
type LogFile struct {
	// Path is a file or a glob (/var/log/app/*.log).
	Path string `yaml:"path"`
	// App names the application; default: from each line, if it says.
	App string `yaml:"app"`
	// Format is auto (default), json, logfmt or plain.
	Format string `yaml:"format"`
	// StartAt is end (default: only new lines) or beginning, for files that
	// exist when the agent first sees them.
	StartAt string `yaml:"start_at"`
}

// Metrics is a cluster's time-series database.
type Metrics struct {
	// Store is embedded (VictoriaMetrics in-process, data under data_dir),
	// remote (a VictoriaMetrics server at URL) or none.
	Store string `yaml:"store" mapstructure:"store" want:"metrics store"`
	URL   string `yaml:"url" mapstructure:"url" want:"URL"`
	// Retention is how long samples are kept (embedded store only).
	Retention time.Duration `yaml:"retention" mapstructure:"retention"`
	// MaxSeries bounds the series one query may return, and
	// MaxPointsPerSeries the points per series of a range query: a query
	// over more fails with an error naming the limit instead of exhausting
	// the cluster's memory.
	MaxSeries          int `yaml:"max_series" mapstructure:"max_series"`
	MaxPointsPerSeries int `yaml:"max_points_per_series" mapstructure:"max_points_per_series"`
}

// Logs is a cluster's log store.
type Logs struct {
	// Store is embedded (VictoriaLogs storage in-process, data under
	// data_dir), clickhouse or none.
	Store      string        `yaml:"store" mapstructure:"store" want:"log store"`
	ClickHouse ClickHouse    `yaml:"clickhouse" mapstructure:"clickhouse"`
	Retention  time.Duration `yaml:"retention" mapstructure:"retention"`
}

// Stats is a cluster's statistics tier: rollups of metrics and daily counts
// of logs and events, kept in the state store long after metrics.retention
// and logs.retention dropped the raw data.
type Stats struct {
	// Enabled runs the statistics controller (on the lease holder).
	Enabled bool `yaml:"enabled" mapstructure:"enabled"`
	// HourlyRetention and DailyRetention are how long hourly and daily
	// rollups (daily counts: DailyRetention) are kept.
	HourlyRetention time.Duration `yaml:"hourly_retention" mapstructure:"hourly_retention"`
	DailyRetention  time.Duration `yaml:"daily_retention" mapstructure:"daily_retention"`
	// Lateness is how long after its end a bucket is still recomputed, to
	// take in data agents deliver late from their spools.
	Lateness time.Duration `yaml:"lateness" mapstructure:"lateness"`
	// Metrics are the series selectors rolled up.
	Metrics []string `yaml:"metrics" mapstructure:"metrics"`
	// Interval is how often the controller computes what is due.
	Interval time.Duration `yaml:"interval" mapstructure:"interval"`
}

// Audit is the log of every write to a root or cluster, in its state store.
type Audit struct {
	// Retention is how long audit records are kept.
	Retention time.Duration `yaml:"retention" mapstructure:"retention"`
}

// DefaultStatsMetrics are the series rolled up by default: utilisation of
// nodes and the perfdata of checks.
func DefaultStatsMetrics() []string {
	return []string{
		"node_cpu_average_usage_ratio",
		"node_load1",
		`{__name__=~"node_memory_(MemTotal|MemAvailable)_bytes"}`,
		`{__name__=~"node_filesystem_(size|avail)_bytes"}`,
		`{__name__=~"node_network_(receive|transmit)_bytes_per_second"}`,
		"unyo_check_perfdata",
	}
}

// ClickHouse is where logs.store clickhouse writes.
type ClickHouse struct {
	Addr     string `yaml:"addr" mapstructure:"addr" want:"host:port"`
	Database string `yaml:"database" mapstructure:"database"`
}

// DefaultPluginDir is where plugin binaries are looked for by default.
const DefaultPluginDir = "/usr/lib/unyo/plugins"

// Defaults returns the configuration a role gets when nothing is set,
// including the values derived from others (store.dsn for sqlite,
// agent.spool_dir, agent.node_name, cluster.advertise_url and
// cluster.replica). An unknown role gets the defaults of root.
func Defaults(role string) *Config {
	c := staticDefaults(role)
	c.fillDerived()
	return c
}

// defaultPeerWatch is peerwatch.DefaultThresholds with a look every 10s.
var defaultPeerWatch = PeerWatch{Interval: 10 * time.Second, UnreachableAfter: 30 * time.Second, LagAfter: 2 * time.Minute, IngestAfter: 10 * time.Minute}

// staticDefaults are the defaults without the derived values: Load must
// derive those after merging, from the data_dir and listen address actually
// in effect.
func staticDefaults(role string) *Config {
	c := &Config{
		Role:    role,
		DataDir: "/var/lib/unyo",
		Log:     Log{Level: "info", Format: "text"},
		Server: Server{
			Listen:          "127.0.0.1:7400",
			AdminTokens:     []string{},
			JoinTokens:      []string{},
			ShutdownTimeout: 10 * time.Second,
			MaxRequestBytes: 32 * MiB,
		},
		Store: Store{Driver: "sqlite", HistoryPerCheck: 100},
		Cluster: Cluster{
			LeaseTTL:             15 * time.Second,
			HeartbeatInterval:    10 * time.Second,
			StaleAfter:           30 * time.Second,
			DownAfter:            90 * time.Second,
			Plugins:              Plugins{Dirs: []string{DefaultPluginDir}, Enabled: []Plugin{}, Env: []string{}},
			APIHook:              APIHook{Allow: []string{}},
			NodeCertTTL:          30 * 24 * time.Hour,
			DefaultRules:         true,
			PeerWatch:            defaultPeerWatch,
			TelemetryWALMaxBytes: 1024 * MiB,
		},
		Root: Root{Peers: 2, PeerWatch: defaultPeerWatch},
		Agent: Agent{
			Labels:              map[string]string{},
			ClusterURL:          "http://127.0.0.1:7401",
			CheckDirs:           []string{"/usr/lib/nagios/plugins", "/usr/lib/monitoring-plugins"},
			MaxOutput:           64 * KiB,
			MaxConcurrentChecks: 8,
			BatchSize:           500,
			FlushInterval:       time.Second,
			SpoolMaxBytes:       256 * MiB,
			ResultBufferRecords: 10_000,
			ResultBufferBytes:   32 * MiB,
			StatusListen:        "127.0.0.1:7402",
			CheckEnv:            []string{},
			MetricsInterval:     10 * time.Second,
			Plugins:             Plugins{Dirs: []string{DefaultPluginDir}, Enabled: []Plugin{}, Env: []string{}},
		},
		Metrics: Metrics{Store: "embedded", Retention: 14 * 24 * time.Hour, MaxSeries: 100_000, MaxPointsPerSeries: 30_000},
		Logs: Logs{
			Store:      "embedded",
			ClickHouse: ClickHouse{Database: "unyo"},
			Retention:  14 * 24 * time.Hour,
		},
		Audit: Audit{Retention: 400 * 24 * time.Hour},
		Stats: Stats{
			Enabled:         true,
			HourlyRetention: 400 * 24 * time.Hour,
			DailyRetention:  5 * 365 * 24 * time.Hour,
			Lateness:        3 * time.Hour,
			Metrics:         DefaultStatsMetrics(),
			Interval:        time.Minute,
		},
	}
	switch role {
	case RoleDev:
		// Keep a developer's state next to the checkout, and give the one
		// in-process cluster a name so `unyo dev` needs no file.
		c.DataDir = "./.unyo-data"
		c.Cluster.Name = "local"
	case RoleCluster:
		// A cluster often shares a machine with root (or with `unyo dev`).
		c.Server.Listen = "127.0.0.1:7401"
	}
	return c
}

// fillDerived sets the defaults that depend on other settings, where they
// were left empty.
func (c *Config) fillDerived() {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if c.Store.Driver == "sqlite" && c.Store.DSN == "" {
		c.Store.DSN = filepath.Join(c.DataDir, "state.db")
	}
	if c.Agent.SpoolDir == "" {
		c.Agent.SpoolDir = filepath.Join(c.DataDir, "spool")
	}
	if c.Agent.NodeName == "" {
		// Node names are lower case; hostnames often are not.
		c.Agent.NodeName = strings.ToLower(host)
	}
	if c.Cluster.Replica == "" {
		c.Cluster.Replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Cluster.AdvertiseURL == "" {
		c.Cluster.AdvertiseURL = advertiseURL(c.Server.Listen, c.Server.TLS.Enabled(), host)
	}
}

// advertiseURL turns a listen address into a URL others can use: a wildcard
// host (":7401", "0.0.0.0:7401") is not reachable, the hostname is. It
// returns "" for an invalid address, which Validate reports.
func advertiseURL(listen string, tls bool, hostname string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = hostname
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
