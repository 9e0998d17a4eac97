package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/stats"
)

// noEnv keeps the test process's own UNYO_* variables out of a Load.
var noEnv = []string{}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustLoad(t *testing.T, opts LoadOptions) *Config {
	t.Helper()
	if opts.Env == nil {
		opts.Env = noEnv
	}
	cfg, err := Load(opts)
	if err != nil {
		t.Fatalf("Load(%+v): unexpected error:\n%v", opts, err)
	}
	return cfg
}

// problemLines loads and returns the error's lines, failing if Load
// succeeds or fails with anything but an *Error.
func problemLines(t *testing.T, opts LoadOptions) []string {
	t.Helper()
	if opts.Env == nil {
		opts.Env = noEnv
	}
	cfg, err := Load(opts)
	if err == nil {
		t.Fatalf("Load(%+v) succeeded (%+v), want problems", opts, cfg)
	}
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load error is %T (%v), want *Error", err, err)
	}
	return strings.Split(err.Error(), "\n")
}

func TestLoadValidFiles(t *testing.T) {
	t.Parallel()
	host := hostname(t)
	tests := []struct {
		file  string
		role  string
		check func(t *testing.T, c *Config)
	}{
		{"testdata/valid_dev.yaml", RoleDev, func(t *testing.T, c *Config) {
			want := Defaults(RoleDev)
			want.Log.Level = "debug"
			want.Cluster.HeartbeatInterval = 5 * time.Second
			want.Cluster.StaleAfter = 15 * time.Second
			want.File = "testdata/valid_dev.yaml"
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got  %+v\nwant %+v", c, want)
			}
		}},
		{"testdata/valid_root.yaml", RoleServer, func(t *testing.T, c *Config) {
			equal(t, "role", c.Role, RoleRoot)
			equal(t, "data_dir", c.DataDir, "/srv/unyo")
			equal(t, "log", c.Log, Log{Level: "warn", Format: "json"})
			equal(t, "server", c.Server, Server{
				Listen:          "0.0.0.0:7400",
				TLS:             TLS{CertFile: "/etc/unyo/root.crt", KeyFile: "/etc/unyo/root.key"},
				AdminTokens:     []string{"admin-1", "admin-2"},
				JoinTokens:      []string{"join-1"},
				ShutdownTimeout: 30 * time.Second, MaxRequestBytes: 32 * MiB,
			})
			equal(t, "store", c.Store, Store{Driver: "postgres", DSN: "postgres://unyo@db/unyo_root", HistoryPerCheck: 100})
			equal(t, "root", c.Root, Root{ClusterToken: "cluster-admin", Peers: 2, PeerWatch: defaultPeerWatch})
		}},
		{"testdata/valid_cluster.yaml", RoleServer, func(t *testing.T, c *Config) {
			equal(t, "role", c.Role, RoleCluster)
			equal(t, "server.listen", c.Server.Listen, "10.0.0.5:7401")
			equal(t, "store", c.Store, Store{Driver: "sqlite", DSN: "/var/lib/unyo/state.db", HistoryPerCheck: 20})
			equal(t, "cluster", c.Cluster, Cluster{
				Name:              "eu-west",
				AdvertiseURL:      "http://10.0.0.5:7401",
				RootURL:           "https://root.example.internal:7400",
				RootToken:         "root-join",
				Replica:           "eu-west-1",
				LeaseTTL:          20 * time.Second,
				HeartbeatInterval: 5 * time.Second,
				StaleAfter:        time.Minute,
				DownAfter:         90 * time.Second,
				Plugins: Plugins{Dirs: []string{"/opt/unyo/plugins"}, Enabled: []Plugin{{Kind: "action", Name: "exec",
					SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
					Config: map[string]any{"command": []any{"/usr/local/bin/notify", "--quiet"}}}},
					Env: []string{"HTTPS_PROXY"}},
				APIHook:              APIHook{Allow: []string{"10.0.0.0/8", "hooks.example.com", "https://alerts.example.com/unyo/"}},
				NodeCertTTL:          30 * 24 * time.Hour,
				PeerWatch:            defaultPeerWatch,
				TelemetryWALMaxBytes: 256 * MiB,
			})
			equal(t, "metrics", c.Metrics, Metrics{Store: "remote", URL: "http://vm.example.internal:8428", Retention: 30 * 24 * time.Hour, MaxSeries: 100_000, MaxPointsPerSeries: 30_000})
			equal(t, "logs", c.Logs, Logs{Store: "clickhouse", ClickHouse: ClickHouse{Addr: "ch.example.internal:9000", Database: "logs"}, Retention: 14 * 24 * time.Hour})
			equal(t, "stats", c.Stats, Stats{Enabled: true, HourlyRetention: 90 * 24 * time.Hour, DailyRetention: 3650 * 24 * time.Hour,
				Lateness: 6 * time.Hour, Metrics: []string{"node_load1", `{__name__=~"app_.*", env="prod"}`}, Interval: time.Minute})
		}},
		{"testdata/valid_agent.yaml", RoleAgent, func(t *testing.T, c *Config) {
			equal(t, "agent", c.Agent, Agent{
				NodeName: "web-01",
				// Viper would have lower-cased Team and split the dotted name.
				Labels:              map[string]string{"env": "prod", "app.kubernetes.io/name": "shop", "Team": "Web"},
				ClusterURL:          "https://cluster.example.internal:7401",
				Token:               "0123",
				CheckDirs:           []string{"/opt/plugins"},
				MaxOutput:           128 * KiB,
				MaxConcurrentChecks: 4,
				BatchSize:           100,
				FlushInterval:       500 * time.Millisecond,
				SpoolDir:            "/var/lib/unyo-agent/spool",
				SpoolMaxBytes:       1536 * MiB,
				ResultBufferRecords: 10_000,
				ResultBufferBytes:   32 * MiB,
				StatusListen:        "",
				StatusToken:         "s3cret",
				CheckEnv:            []string{"ORACLE_HOME", "HTTPS_PROXY"},
				MetricsInterval:     30 * time.Second,
				Logs: []LogFile{
					{Path: "/var/log/shop/*.log", App: "shop", Format: "json"},
					{Path: "/var/log/syslog", StartAt: "beginning"},
				},
				// Config keeps its keys' case and dots, and nests.
				Plugins: Plugins{Dirs: []string{"/opt/unyo/plugins", "/usr/lib/unyo/plugins"}, Enabled: []Plugin{
					{Kind: "check", Name: "http", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
						Config: map[string]any{"user_agent": "unyo", "Max.Redirects": 3, "tls": map[string]any{"verify": true}}},
					{Kind: "check", Name: "tcp", SHA256: "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"},
				}, Env: []string{"HTTPS_PROXY"}},
				Checks: []map[string]any{
					{"name": "load", "labels": map[string]any{"team": "web"}, "spec": map[string]any{
						"command":  []any{"check_load", "-w", "5,4,3", "-c", "10,8,6"},
						"interval": "30s",
						"env":      map[string]any{"PATH": "/usr/bin", "LC_ALL": "C"},
					}},
					{"name": "disk", "spec": map[string]any{
						"command":  []any{"check_disk", "-w", "20%", "-c", "10%", "-p", "/"},
						"interval": "5m",
					}},
				},
			})
		}},
		{"testdata/empty_sections.yaml", RoleCluster, func(t *testing.T, c *Config) {
			// "tls:" with only comments under it, "store:" and "replica: ~"
			// leave the defaults.
			equal(t, "tls", c.Server.TLS, TLS{})
			equal(t, "store.driver", c.Store.Driver, "sqlite")
			equal(t, "cluster.replica", c.Cluster.Replica, host+"-"+strconv.Itoa(os.Getpid()))
		}},
		{"testdata/anchors.yaml", RoleAgent, func(t *testing.T, c *Config) {
			equal(t, "agent.spool_dir", c.Agent.SpoolDir, "/srv/unyo")
			equal(t, "agent.check_dirs", c.Agent.CheckDirs, []string{"/srv/unyo", "/opt/plugins"})
		}},
		{"testdata/comments_only.yaml", RoleAgent, func(t *testing.T, c *Config) {
			want := Defaults(RoleAgent)
			want.File = "testdata/comments_only.yaml"
			equal(t, "config", c, want)
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			t.Parallel()
			cfg := mustLoad(t, LoadOptions{File: tt.file, Role: tt.role})
			equal(t, "File", cfg.File, tt.file)
			tt.check(t, cfg)
		})
	}
}

func TestLoadProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts LoadOptions
		want []string
	}{
		{
			name: "unknown keys, top-level and nested, with suggestions",
			opts: LoadOptions{File: "testdata/unknown_keys.yaml"},
			want: []string{
				`testdata/unknown_keys.yaml: lgo: unknown key (did you mean log?)`,
				`testdata/unknown_keys.yaml: server.tls.certfile: unknown key (did you mean cert_file?)`,
				// heartbeat_interval is a cluster key: suggesting it under
				// agent would be wrong, so the full key is given.
				`testdata/unknown_keys.yaml: agent.heartbeat_intervall: unknown key (did you mean cluster.heartbeat_interval?)`,
				`testdata/unknown_keys.yaml: agent.listen: unknown key (did you mean server.listen?)`,
				`testdata/unknown_keys.yaml: agent.colour: unknown key (expected one of: node_name, resource, labels, cluster_url, token, tls, check_dirs, max_output, max_concurrent_checks, batch_size, flush_interval, spool_dir, spool_max_bytes, result_buffer_records, result_buffer_bytes, status_listen, status_token, check_env, checks, metrics_interval, logs, plugins, ports, capacity)`,
			},
		},
		{
			name: "unyo's own variables are never passed on; bad api_hook allowlist entries",
			opts: LoadOptions{Role: RoleDev, Env: []string{
				"UNYO_AGENT_CHECK_ENV=HTTPS_PROXY,UNYO_AGENT_TOKEN",
				"UNYO_AGENT_PLUGINS_ENV=unyo_root_cluster_token",
				"UNYO_CLUSTER_API_HOOK_ALLOW=10.0.0.0/33,ftp://x/",
			}},
			want: []string{
				`cluster.api_hook.allow[0]: "10.0.0.0/33" is not a valid CIDR: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range`,
				`cluster.api_hook.allow[1]: "ftp://x/" is not an http or https URL prefix`,
				`agent.check_env[1]: UNYO_AGENT_TOKEN: unyo's own settings (UNYO_*) hold its tokens and are never passed to checks or plugins; give a check the value it needs in its spec.env instead`,
				`agent.plugins.env[0]: unyo_root_cluster_token: unyo's own settings (UNYO_*) hold its tokens and are never passed to checks or plugins; give a check the value it needs in its spec.env instead`,
			},
		},
		{
			name: "peer watch thresholds must outlast the interval",
			opts: LoadOptions{Role: RoleDev, Env: []string{
				"UNYO_CLUSTER_PEER_WATCH_INTERVAL=1m",
				"UNYO_ROOT_PEER_WATCH_INTERVAL=0s",
				"UNYO_ROOT_PEERS=0",
			}},
			want: []string{
				`environment UNYO_ROOT_PEER_WATCH_INTERVAL: must be positive, got 0s`,
				`environment UNYO_ROOT_PEERS: must be at least 1, got 0 (how many clusters each cluster watches)`,
				`cluster.peer_watch.unreachable_after: must be longer than cluster.peer_watch.interval (1m0s), got 30s`,
			},
		},
		{
			name: "wrong types",
			opts: LoadOptions{File: "testdata/wrong_type.yaml", Role: RoleAgent},
			want: []string{
				`testdata/wrong_type.yaml: server.listen: expected a string host:port, got a list`,
				`testdata/wrong_type.yaml: cluster: expected a mapping, got a string`,
				`testdata/wrong_type.yaml: agent.labels: expected a mapping of names to strings, got a list`,
				`testdata/wrong_type.yaml: agent.check_dirs: expected a list of strings, got a string`,
				`testdata/wrong_type.yaml: agent.batch_size: expected an integer, got a string`,
				`testdata/wrong_type.yaml: agent.max_concurrent_checks: expected an integer, got the number 2.5`,
				`testdata/wrong_type.yaml: agent.checks: expected a list of checks, got a mapping`,
			},
		},
		{
			name: "bad durations",
			opts: LoadOptions{File: "testdata/bad_duration.yaml"},
			want: []string{
				`testdata/bad_duration.yaml: server.shutdown_timeout: invalid duration "-5s" (must not be negative)`,
				`testdata/bad_duration.yaml: cluster.lease_ttl: invalid duration "15" (a unit is required, e.g. 15s)`,
				`testdata/bad_duration.yaml: cluster.heartbeat_interval: invalid duration "10 seconds" (expected a duration such as 10s, 1m30s or 1h)`,
				`testdata/bad_duration.yaml: cluster.stale_after: expected a duration such as 10s, got a list`,
			},
		},
		{
			name: "bad sizes",
			opts: LoadOptions{File: "testdata/bad_size.yaml"},
			want: []string{
				`testdata/bad_size.yaml: agent.max_output: invalid size "64QB" (expected bytes or a size such as 64KiB)`,
				`testdata/bad_size.yaml: agent.spool_max_bytes: invalid size "-1" (expected bytes or a size such as 64KiB)`,
			},
		},
		{
			name: "invalid YAML names the line, and nothing else is guessed",
			opts: LoadOptions{File: "testdata/invalid_yaml.yaml", Role: RoleCluster},
			want: []string{`testdata/invalid_yaml.yaml line 6: yaml: found unexpected end of stream`},
		},
		{
			name: "tab indentation gets a hint",
			opts: LoadOptions{File: "testdata/tabs.yaml"},
			want: []string{`testdata/tabs.yaml line 3: yaml: found character that cannot start any token (tabs cannot be used for indentation in YAML; use spaces)`},
		},
		{
			name: "top level not a mapping",
			opts: LoadOptions{File: "testdata/not_mapping.yaml"},
			want: []string{`testdata/not_mapping.yaml line 1: expected a mapping of settings (key: value) at the top level, got a list`},
		},
		{
			name: "two documents",
			opts: LoadOptions{File: "testdata/two_docs.yaml"},
			want: []string{`testdata/two_docs.yaml line 2: only one YAML document is allowed (remove the second ---)`},
		},
		{
			name: "a manifest for unyo apply is not a configuration",
			opts: LoadOptions{File: "testdata/manifest.yaml", Role: RoleAgent},
			want: []string{`testdata/manifest.yaml line 2: this is a manifest of objects for unyo apply (it has kind:), not a configuration file`},
		},
		{
			name: "odd YAML",
			opts: LoadOptions{File: "testdata/odd.yaml"},
			want: []string{
				`testdata/odd.yaml: <<: YAML merge keys are not supported; write the settings out`,
				`testdata/odd.yaml: agent.labels.env: expected a string, got a list`,
				`testdata/odd.yaml: agent.labels: names must be non-empty strings, got an empty string`,
				`testdata/odd.yaml: agent.check_dirs[1]: expected a string, got nothing`,
				`testdata/odd.yaml: agent.check_dirs[2]: expected a string, got a list`,
				`testdata/odd.yaml: agent.admin_tokens: unknown key (did you mean server.admin_tokens?)`,
				`testdata/odd.yaml: agent: keys must be plain names, got a list`,
			},
		},
		{
			name: "duplicate key",
			opts: LoadOptions{File: "testdata/duplicate.yaml"},
			want: []string{`testdata/duplicate.yaml: agent.batch_size: duplicate key (first set on line 3)`},
		},
		{
			name: "multiple problems of all kinds are reported together, in file order",
			opts: LoadOptions{File: "testdata/multiple.yaml", Env: []string{"UNYO_AGENT_BATCH_SIZE=lots"}},
			want: []string{
				`testdata/multiple.yaml: cluster.nmae: unknown key (did you mean name?)`,
				`testdata/multiple.yaml: cluster.lease_ttl: invalid duration "soon" (expected a duration such as 10s, 1m30s or 1h)`,
				`testdata/multiple.yaml: server.listen: expected a string host:port, got a mapping`,
				`testdata/multiple.yaml: agent.max_output: invalid size "64QB" (expected bytes or a size such as 64KiB)`,
				`testdata/multiple.yaml: agent.checks[1]: expected a mapping with a name and a spec, got a string`,
				`testdata/multiple.yaml: agent.checks[2].name: required (every check needs a name)`,
				`testdata/multiple.yaml: agent.checks[3].name: expected a non-empty string, got an empty string`,
				`testdata/multiple.yaml: agent.checks[4].name: expected a non-empty string, got a list`,
				`environment UNYO_AGENT_BATCH_SIZE: invalid integer "lots"`,
				// A rule across keys, still reported with the rest.
				`testdata/multiple.yaml: cluster.name: required for role cluster`,
			},
		},
		{
			name: "tls half set",
			opts: LoadOptions{File: "testdata/tls_half.yaml"},
			want: []string{`testdata/tls_half.yaml: server.tls.key_file: required when server.tls.cert_file is set (set both or neither)`},
		},
		{
			name: "dev beyond loopback, mTLS without TLS, tiny requests",
			opts: LoadOptions{File: "testdata/exposure.yaml"},
			want: []string{
				`testdata/exposure.yaml: server.listen: unyo dev serves only on loopback (127.0.0.1 or [::1]), got "0.0.0.0:7400": run root, cluster and agent with ` + "`unyo server` and `unyo agent`" + ` to serve beyond this machine`,
				`testdata/exposure.yaml: server.tls.client_ca_file: needs server.tls.cert_file and key_file: client certificates are verified only over TLS`,
				`testdata/exposure.yaml: server.max_request_bytes: must be at least 1MiB, got 1000 bytes`,
			},
		},
		{
			name: "node CA without server TLS, half a node CA, a too short certificate lifetime",
			opts: LoadOptions{File: "testdata/node_ca.yaml"},
			want: []string{
				`testdata/node_ca.yaml: cluster.node_ca: needs server.tls.cert_file and key_file: nodes present their certificates only over TLS (and server.tls.client_ca_file, which defaults to cluster.node_ca.cert_file, verifies them)`,
				`testdata/node_ca.yaml: cluster.node_cert_ttl: must be at least 10s, got 1s (agents renew their certificates at 2/3 of it)`,
			},
		},
		{
			name: "a telemetry WAL too small for a request",
			opts: LoadOptions{File: "testdata/telemetry_wal.yaml"},
			want: []string{
				`testdata/telemetry_wal.yaml: cluster.telemetry_wal_max_bytes: must be at least 1MiB, got 1000 bytes (a request of samples takes up to several MiB)`,
			},
		},
		{
			name: "half a node CA",
			opts: LoadOptions{File: "testdata/node_ca_half.yaml"},
			want: []string{
				`testdata/node_ca_half.yaml: cluster.node_ca.key_file: required when cluster.node_ca.cert_file is set (the CA's key, e.g. ca.key from ` + "`unyo ca create`" + `)`,
			},
		},
		{
			name: "tls half set from the environment",
			opts: LoadOptions{Role: RoleCluster, Env: []string{"UNYO_CLUSTER_NAME=c1", "UNYO_SERVER_TLS_KEY_FILE=/k.pem"}},
			want: []string{`server.tls.cert_file: required when server.tls.key_file is set (set both or neither)`},
		},
		{
			name: "client tls half set, for each client",
			opts: LoadOptions{Role: RoleDev, Env: []string{
				"UNYO_AGENT_TLS_CERT_FILE=/c.pem",
				"UNYO_ROOT_CLUSTER_TLS_KEY_FILE=/k.pem",
				"UNYO_CLUSTER_ROOT_TLS_CERT_FILE=/c.pem",
			}},
			want: []string{
				`root.cluster_tls.cert_file: required when root.cluster_tls.key_file is set (set both or neither)`,
				`cluster.root_tls.key_file: required when cluster.root_tls.cert_file is set (set both or neither)`,
				`agent.tls.key_file: required when agent.tls.cert_file is set (set both or neither)`,
			},
		},
		{
			name: "postgres without dsn",
			opts: LoadOptions{File: "testdata/postgres_nodsn.yaml"},
			want: []string{`testdata/postgres_nodsn.yaml: store.dsn: required when store.driver is postgres (e.g. postgres://unyo@db.example.com/unyo)`},
		},
		{
			name: "cluster without name",
			opts: LoadOptions{File: "testdata/cluster_noname.yaml", Role: RoleServer},
			want: []string{`testdata/cluster_noname.yaml: cluster.name: required for role cluster`},
		},
		{
			name: "cluster without name and no file",
			opts: LoadOptions{Role: RoleCluster},
			want: []string{`cluster.name: required for role cluster`},
		},
		{
			name: "rules across keys",
			opts: LoadOptions{File: "testdata/semantic.yaml"},
			want: []string{
				`testdata/semantic.yaml: log.level: invalid value "verbose" (expected debug, info, warn or error)`,
				`testdata/semantic.yaml: server.listen: invalid address "localhost" (expected host:port, e.g. 127.0.0.1:7400 or :7400)`,
				`testdata/semantic.yaml: cluster.root_url: invalid URL "root.example.internal:7400" (expected http://host:port or https://host:port)`,
				`testdata/semantic.yaml: cluster.stale_after: must be longer than cluster.heartbeat_interval (30s), or nodes turn stale between heartbeats`,
				`testdata/semantic.yaml: metrics.store: invalid value "prometheus" (expected embedded, remote or none)`,
				`testdata/semantic.yaml: logs.clickhouse.addr: required when logs.store is clickhouse (ClickHouse's native protocol address, e.g. ch.example.com:9000)`,
				`testdata/semantic.yaml: logs.retention: must be at least 1d (logs are dropped by whole days), got 1h0m0s`,
			},
		},
		{
			name: "statistics tier",
			opts: LoadOptions{File: "testdata/stats.yaml"},
			want: []string{
				`testdata/stats.yaml: stats.hourly_retention: must be whole days and at least 2d (daily rollups are made from hourly ones), got 36h0m0s`,
				`testdata/stats.yaml: stats.daily_retention: must be whole days and at least stats.hourly_retention (36h0m0s), got 24h0m0s`,
				`testdata/stats.yaml: stats.lateness: must be between 0s and 1d, got 48h0m0s`,
				`testdata/stats.yaml: stats.interval: must be at least 1s, got 500ms`,
				`testdata/stats.yaml: stats.metrics[1]: series selector "sum(node_load1)": want a selector such as node_load1{node="web1"}, not an expression`,
				`testdata/stats.yaml: stats.metrics[2]: series selector "{node=~\"(\"}": ` + selectorErr(t, `{node=~"("}`),
			},
		},
		{
			name: "statistics tier types",
			opts: LoadOptions{File: "testdata/stats_types.yaml"},
			want: []string{
				`testdata/stats_types.yaml: stats.enabled: expected true or false, got a string`,
				`testdata/stats_types.yaml: stats.metrics: expected a list of strings, got a string`,
			},
		},
		{
			name: "agent log files",
			opts: LoadOptions{File: "testdata/agent_logs.yaml"},
			want: []string{
				`testdata/agent_logs.yaml: agent.logs[1]: expected a mapping with a path (and app, format, start_at), got a string`,
				`testdata/agent_logs.yaml: agent.logs[2].colour: unknown key (expected path, app, format or start_at)`,
				`testdata/agent_logs.yaml: agent.logs[3].app: expected a string, got a list`,
			},
		},
		{
			name: "agent ports",
			opts: LoadOptions{File: "testdata/agent_ports.yaml"},
			want: []string{
				`testdata/agent_ports.yaml: agent.ports.metadata_port: must be a TCP port (1-65535, 0 for the default 80), got 70000`,
			},
		},
		{
			name: "agent log file values",
			opts: LoadOptions{File: "testdata/agent_logs_values.yaml"},
			want: []string{
				`testdata/agent_logs_values.yaml: agent.metrics_interval: must be 0 (off) or at least 1s, got 500ms`,
				`testdata/agent_logs_values.yaml: agent.logs[0].path: required (the file or glob to tail)`,
				`testdata/agent_logs_values.yaml: agent.logs[1].format: invalid value "xml" (expected auto, json, logfmt or plain)`,
				`testdata/agent_logs_values.yaml: agent.logs[1].start_at: invalid value "middle" (expected end or beginning)`,
			},
		},
		{
			name: "agent plugins",
			opts: LoadOptions{File: "testdata/agent_plugins.yaml"},
			want: []string{
				`testdata/agent_plugins.yaml: agent.plugins.enabled[0]: expected a mapping with a kind, name and sha256 (and config), got a string`,
				`testdata/agent_plugins.yaml: agent.plugins.enabled[1].colour: unknown key (expected kind, name, sha256 or config)`,
				`testdata/agent_plugins.yaml: agent.plugins.enabled[2].name: expected a string, got a list`,
				`testdata/agent_plugins.yaml: agent.plugins.enabled[3].config: expected a mapping (passed to the plugin as JSON), got a list`,
			},
		},
		{
			name: "cluster plugins run actions",
			opts: LoadOptions{File: "testdata/cluster_plugins.yaml"},
			want: []string{
				`testdata/cluster_plugins.yaml: cluster.plugins.enabled[0].kind: invalid value "check" (expected action: only action plugins run here)`,
			},
		},
		{
			name: "agent plugin values",
			opts: LoadOptions{File: "testdata/agent_plugins_values.yaml"},
			want: []string{
				`testdata/agent_plugins_values.yaml: agent.plugins.dirs: required when plugins are enabled (where unyo-<kind>-<name> binaries are looked for)`,
				`testdata/agent_plugins_values.yaml: agent.plugins.enabled[0].kind: invalid value "action" (expected check or provider: only check or provider plugins run here)`,
				`testdata/agent_plugins_values.yaml: agent.plugins.enabled[1].name: "a/b" must not contain slashes or spaces`,
				`testdata/agent_plugins_values.yaml: agent.plugins.enabled[1].sha256: must be 64 hex digits (as printed by sha256sum)`,
				`testdata/agent_plugins_values.yaml: agent.plugins.enabled[2].sha256: required: the binary's sha256 (64 hex digits, as printed by sha256sum)`,
				`testdata/agent_plugins_values.yaml: agent.plugins.enabled[3].name: plugin check/tcp is already enabled at agent.plugins.enabled[2]`,
			},
		},
		{
			name: "a rule is not reported on top of a type error in the same key",
			opts: LoadOptions{Role: RoleRoot, Env: []string{"UNYO_SERVER_SHUTDOWN_TIMEOUT=0", "UNYO_STORE_HISTORY_PER_CHECK=x"}},
			want: []string{
				`environment UNYO_STORE_HISTORY_PER_CHECK: invalid integer "x"`,
				`environment UNYO_SERVER_SHUTDOWN_TIMEOUT: must be longer than 0s`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			equal(t, "problems", problemLines(t, tt.opts), tt.want)
		})
	}
}

func TestProblemFields(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{File: "testdata/bad_size.yaml", Env: []string{"UNYO_CLUSTER_LEASE_TTL=x"}})
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want *Error", err)
	}
	equal(t, "problems", cerr.Problems, []Problem{
		{File: "testdata/bad_size.yaml", Line: 3, Key: "agent.max_output", Msg: `invalid size "64QB" (expected bytes or a size such as 64KiB)`},
		{File: "testdata/bad_size.yaml", Line: 4, Key: "agent.spool_max_bytes", Msg: `invalid size "-1" (expected bytes or a size such as 64KiB)`},
		{Env: "UNYO_CLUSTER_LEASE_TTL", Key: "cluster.lease_ttl", Msg: `invalid duration "x" (expected a duration such as 10s, 1m30s or 1h)`},
	})
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{File: "testdata/missing.yaml", Role: RoleAgent, Env: noEnv})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
	if _, err := Load(LoadOptions{Role: "worker", Env: noEnv}); err == nil {
		t.Error("LoadOptions.Role worker: got no error")
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, LoadOptions{
		File: "testdata/valid_cluster.yaml",
		Env: []string{
			"PATH=/usr/bin",
			"UNYO_SERVER_LISTEN=0.0.0.0:9401",              // overrides the file
			"UNYO_STORE_DSN=/tmp/state.db",                 // nested key with an underscore
			"UNYO_SERVER_ADMIN_TOKENS=tok1, tok2,",         // comma-separated list
			"UNYO_CLUSTER_LEASE_TTL=1m",                    // duration
			"UNYO_STORE_HISTORY_PER_CHECK=7",               // integer
			"UNYO_AGENT_MAX_OUTPUT=1MiB",                   // size
			"UNYO_AGENT_LABELS=env=prod, app.k8s.io/x=Y",   // labels keep dots and case
			"UNYO_AGENT_PLUGINS_DIRS=/a,/b",                // nested list
			"UNYO_STATS_ENABLED=false",                     // boolean
			"UNYO_CLUSTER_NAME=",                           // empty: ignored
			"UNYO_NO_SUCH_KEY=1",                           // unknown: ignored
			"UNYO_CONFIG=/etc/unyo/cluster.yaml",           // the cmd layer's own
			"UNYO_SERVER_LISTEN=ignored, the first counts", // as os.Getenv
		},
	})
	equal(t, "server.listen", cfg.Server.Listen, "0.0.0.0:9401")
	equal(t, "store.dsn", cfg.Store.DSN, "/tmp/state.db")
	equal(t, "server.admin_tokens", cfg.Server.AdminTokens, []string{"tok1", "tok2"})
	equal(t, "server.join_tokens (file)", cfg.Server.JoinTokens, []string{"join-a"})
	equal(t, "cluster.lease_ttl", cfg.Cluster.LeaseTTL, time.Minute)
	equal(t, "store.history_per_check", cfg.Store.HistoryPerCheck, 7)
	equal(t, "agent.max_output", cfg.Agent.MaxOutput, MiB)
	equal(t, "agent.labels", cfg.Agent.Labels, map[string]string{"env": "prod", "app.k8s.io/x": "Y"})
	equal(t, "agent.plugins.dirs", cfg.Agent.Plugins.Dirs, []string{"/a", "/b"})
	equal(t, "stats.enabled", cfg.Stats.Enabled, false)
	equal(t, "cluster.name (file)", cfg.Cluster.Name, "eu-west")
	// Derived values follow the overridden listen address.
	equal(t, "cluster.advertise_url", cfg.Cluster.AdvertiseURL, "http://"+hostname(t)+":9401")

	lines := problemLines(t, LoadOptions{Role: RoleAgent, Env: []string{
		"UNYO_CLUSTER_LEASE_TTL=x",
		"UNYO_AGENT_MAX_OUTPUT=lots",
		"UNYO_AGENT_LABELS=env",
		"UNYO_AGENT_CHECKS=load",
		"UNYO_AGENT_PLUGINS_ENABLED=http",
		"UNYO_STATS_ENABLED=maybe",
	}})
	equal(t, "problems", lines, []string{
		`environment UNYO_CLUSTER_LEASE_TTL: invalid duration "x" (expected a duration such as 10s, 1m30s or 1h)`,
		`environment UNYO_AGENT_LABELS: invalid labels "env" (expected name=value pairs separated by commas)`,
		`environment UNYO_AGENT_MAX_OUTPUT: invalid size "lots" (expected bytes or a size such as 64KiB)`,
		`environment UNYO_AGENT_CHECKS: checks can only be set in the configuration file`,
		`environment UNYO_AGENT_PLUGINS_ENABLED: plugins can only be enabled in the configuration file`,
		`environment UNYO_STATS_ENABLED: invalid value "maybe" (expected true or false)`,
	})
}

func TestEnvDefaultsToProcessEnvironment(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("UNYO_AGENT_BATCH_SIZE", "42")
	cfg, err := Load(LoadOptions{Role: RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "agent.batch_size", cfg.Agent.BatchSize, 42)
}

func TestFlags(t *testing.T) {
	t.Parallel()
	newFlags := func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("unyo agent", pflag.ContinueOnError)
		fs.String("config", "", "configuration file") // the command's own
		fs.String("token", "", "")                    // the CLI's own; not agent.token
		BindFlags(fs, RoleAgent)                      // --cluster-url, --label, ...
		fs.String("agent.node_name", "", "")          // by dotted key
		fs.Duration("agent-flush-interval", 0, "")    // by dashed key
		fs.StringSlice("agent-check-dirs", nil, "")
		fs.String("agent-batch-size", "", "")
		var size Size
		fs.Var(&size, "spool-max", "")
		_ = fs.SetAnnotation("spool-max", FlagKeyAnnotation, []string{"agent.spool_max_bytes"})
		return fs
	}

	fs := newFlags()
	err := fs.Parse([]string{
		"--config", "testdata/valid_agent.yaml",
		"--token", "cli-token",
		"--cluster-url", "http://flag:7401",
		"--agent.node_name", "from-flag",
		"--agent-flush-interval", "3s",
		"--agent-check-dirs", "/a,/b", "--agent-check-dirs", "/c",
		"--label", "env=flag", "--label", "Zone=A.B",
		"--status-listen", "",
		"--spool-max", "1GB",
		"--log-level", "debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, LoadOptions{
		File:  "testdata/valid_agent.yaml",
		Env:   []string{"UNYO_AGENT_CLUSTER_URL=http://env:7401", "UNYO_AGENT_BATCH_SIZE=9", "UNYO_AGENT_NODE_NAME=from-env"},
		Flags: fs,
	})
	equal(t, "agent.cluster_url (flag over env over file)", cfg.Agent.ClusterURL, "http://flag:7401")
	equal(t, "agent.node_name (flag over env)", cfg.Agent.NodeName, "from-flag")
	equal(t, "agent.batch_size (env; flag not set)", cfg.Agent.BatchSize, 9)
	equal(t, "agent.max_output (file; no flag)", cfg.Agent.MaxOutput, 128*KiB)
	equal(t, "agent.token (file; --token is not a config flag)", cfg.Agent.Token, "0123")
	equal(t, "agent.flush_interval", cfg.Agent.FlushInterval, 3*time.Second)
	equal(t, "agent.check_dirs", cfg.Agent.CheckDirs, []string{"/a", "/b", "/c"})
	equal(t, "agent.labels (replaced)", cfg.Agent.Labels, map[string]string{"env": "flag", "Zone": "A.B"})
	equal(t, "agent.status_listen (turned off)", cfg.Agent.StatusListen, "")
	equal(t, "agent.spool_max_bytes", cfg.Agent.SpoolMaxBytes, Size(1e9))
	equal(t, "log.level", cfg.Log.Level, "debug")

	fs = newFlags()
	fs.String("x", "", "")
	_ = fs.SetAnnotation("x", FlagKeyAnnotation, []string{"agent.no_such_key"})
	if err := fs.Parse([]string{"--agent-batch-size", "many", "--cluster-url", "cluster:7401", "--x", "1"}); err != nil {
		t.Fatal(err)
	}
	lines := problemLines(t, LoadOptions{Role: RoleAgent, Flags: fs})
	equal(t, "problems", lines, []string{
		`flag --agent-batch-size: invalid integer "many"`,
		`flag --x: sets "agent.no_such_key", which is not a configuration key`,
		`flag --cluster-url: invalid URL "cluster:7401" (expected http://host:port or https://host:port, or several replicas' URLs separated by commas)`,
	})
}

func TestBindFlags(t *testing.T) {
	t.Parallel()
	for _, role := range []string{RoleDev, RoleServer, RoleRoot, RoleCluster, RoleAgent} {
		fs := pflag.NewFlagSet(role, pflag.ContinueOnError)
		BindFlags(fs, role)
		// Every flag sets a real key, and none shadows the CLI's own.
		fs.VisitAll(func(fl *pflag.Flag) {
			keys := fl.Annotations[FlagKeyAnnotation]
			if len(keys) != 1 || !slices.ContainsFunc(schema().leaves(), func(f *field) bool { return f.key == keys[0] }) {
				t.Errorf("%s: flag --%s sets %v", role, fl.Name, keys)
			}
			if slices.Contains([]string{"config", "role", "server", "token", "ca", "output", "timeout"}, fl.Name) {
				t.Errorf("%s: flag --%s is taken by the command", role, fl.Name)
			}
		})
	}
	fs := pflag.NewFlagSet("unyo server", pflag.ContinueOnError)
	BindFlags(fs, RoleServer)
	if err := fs.Parse([]string{"--listen", ":9400", "--cluster-name", "c9"}); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, LoadOptions{Role: RoleServer, Env: []string{"UNYO_ROLE=cluster"}, Flags: fs})
	equal(t, "server.listen", cfg.Server.Listen, ":9400")
	equal(t, "cluster.name", cfg.Cluster.Name, "c9")
}

func TestRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     LoadOptions
		wantRole string
		want     []string // problems; nil for success
	}{
		{name: "file agrees", opts: LoadOptions{File: "testdata/valid_agent.yaml", Role: RoleAgent}, wantRole: RoleAgent},
		{name: "file decides", opts: LoadOptions{File: "testdata/valid_agent.yaml"}, wantRole: RoleAgent},
		{name: "command decides", opts: LoadOptions{File: "testdata/comments_only.yaml", Role: RoleDev}, wantRole: RoleDev},
		{name: "server: file says cluster", opts: LoadOptions{File: "testdata/valid_cluster.yaml", Role: RoleServer}, wantRole: RoleCluster},
		{name: "server: environment says root", opts: LoadOptions{Role: RoleServer, Env: []string{"UNYO_ROLE=root"}}, wantRole: RoleRoot},
		{name: "all agree", opts: LoadOptions{File: "testdata/valid_cluster.yaml", Role: RoleServer, Env: []string{"UNYO_ROLE=cluster"}}, wantRole: RoleCluster},
		{
			// The role changes what the whole file means: not an override.
			name: "environment disagrees with the file",
			opts: LoadOptions{File: "testdata/valid_cluster.yaml", Role: RoleServer, Env: []string{"UNYO_ROLE=root"}},
			want: []string{`testdata/valid_cluster.yaml: role: "cluster" conflicts with "root" set by environment UNYO_ROLE`},
		},
		{
			name: "flag conflicts with the command",
			opts: LoadOptions{File: "testdata/valid_root.yaml", Role: RoleRoot, Flags: roleFlag(t, "cluster")},
			want: []string{`flag --role: "cluster" conflicts with the command, which runs as "root" (remove role from the configuration or run the matching command)`},
		},
		{
			name: "file conflicts with the command",
			opts: LoadOptions{File: "testdata/valid_agent.yaml", Role: RoleCluster},
			want: []string{`testdata/valid_agent.yaml: role: "agent" conflicts with the command, which runs as "cluster" (remove role from the configuration or run the matching command)`},
		},
		{
			name: "environment conflicts with the command",
			opts: LoadOptions{Role: RoleAgent, Env: []string{"UNYO_ROLE=dev"}},
			want: []string{`environment UNYO_ROLE: "dev" conflicts with the command, which runs as "agent" (remove role from the configuration or run the matching command)`},
		},
		{
			name: "server with an agent file",
			opts: LoadOptions{File: "testdata/valid_agent.yaml", Role: RoleServer},
			want: []string{`testdata/valid_agent.yaml: role: "agent" is not a server role (expected root or cluster for unyo server)`},
		},
		{
			name: "server with no role stated",
			opts: LoadOptions{File: "testdata/comments_only.yaml", Role: RoleServer},
			want: []string{`testdata/comments_only.yaml: role: required for unyo server (set role to root or cluster)`},
		},
		{
			name: "no role anywhere",
			opts: LoadOptions{},
			want: []string{`role: required (expected dev, root, cluster or agent)`},
		},
		{
			name: "invalid role, with the other problems",
			opts: LoadOptions{Env: []string{"UNYO_ROLE=master", "UNYO_LOG_LEVEL=x", "UNYO_AGENT_BATCH_SIZE=x"}},
			want: []string{
				`environment UNYO_AGENT_BATCH_SIZE: invalid integer "x"`,
				`environment UNYO_ROLE: invalid role "master" (expected dev, root, cluster or agent)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.want != nil {
				equal(t, "problems", problemLines(t, tt.opts), tt.want)
				return
			}
			equal(t, "role", mustLoad(t, tt.opts).Role, tt.wantRole)
		})
	}
}

func roleFlag(t *testing.T, role string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("unyo server", pflag.ContinueOnError)
	fs.String("role", "cluster", "")
	if err := fs.Parse([]string{"--role", role}); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	host := hostname(t)
	for _, role := range []string{RoleDev, RoleRoot, RoleCluster, RoleAgent} {
		c := Defaults(role)
		// Defaults are valid on their own, except that a cluster must be
		// named.
		err := c.Validate()
		if role == RoleCluster {
			equal(t, "Defaults(cluster).Validate()", err.Error(), "cluster.name: required for role cluster")
		} else if err != nil {
			t.Errorf("Defaults(%s).Validate(): %v", role, err)
		}
		// Load without a file gives the same.
		if role != RoleCluster {
			equal(t, "Load "+role, mustLoad(t, LoadOptions{Role: role}), c)
		}
	}

	dev, root, cluster, agent := Defaults(RoleDev), Defaults(RoleRoot), Defaults(RoleCluster), Defaults(RoleAgent)
	equal(t, "dev data_dir", dev.DataDir, "./.unyo-data")
	equal(t, "dev store.dsn", dev.Store.DSN, filepath.Join(".unyo-data", "state.db"))
	equal(t, "dev cluster.name", dev.Cluster.Name, "local")
	equal(t, "root data_dir", root.DataDir, "/var/lib/unyo")
	equal(t, "root store", root.Store, Store{Driver: "sqlite", DSN: "/var/lib/unyo/state.db", HistoryPerCheck: 100})
	equal(t, "root server", root.Server, Server{Listen: "127.0.0.1:7400", AdminTokens: []string{}, JoinTokens: []string{}, ShutdownTimeout: 10 * time.Second, MaxRequestBytes: 32 * MiB})
	equal(t, "root log", root.Log, Log{Level: "info", Format: "text"})
	equal(t, "cluster server.listen", cluster.Server.Listen, "127.0.0.1:7401")
	equal(t, "cluster", cluster.Cluster, Cluster{
		AdvertiseURL:         "http://127.0.0.1:7401",
		Replica:              host + "-" + strconv.Itoa(os.Getpid()),
		LeaseTTL:             15 * time.Second,
		HeartbeatInterval:    10 * time.Second,
		StaleAfter:           30 * time.Second,
		DownAfter:            90 * time.Second,
		Plugins:              Plugins{Dirs: []string{"/usr/lib/unyo/plugins"}, Enabled: []Plugin{}, Env: []string{}},
		APIHook:              APIHook{Allow: []string{}},
		NodeCertTTL:          30 * 24 * time.Hour,
		DefaultRules:         true,
		PeerWatch:            defaultPeerWatch,
		TelemetryWALMaxBytes: 1024 * MiB,
	})
	equal(t, "agent", agent.Agent, Agent{
		NodeName:            host,
		Labels:              map[string]string{},
		ClusterURL:          "http://127.0.0.1:7401",
		CheckDirs:           []string{"/usr/lib/nagios/plugins", "/usr/lib/monitoring-plugins"},
		MaxOutput:           64 * KiB,
		MaxConcurrentChecks: 8,
		BatchSize:           500,
		FlushInterval:       time.Second,
		SpoolDir:            "/var/lib/unyo/spool",
		SpoolMaxBytes:       256 * MiB,
		ResultBufferRecords: 10_000,
		ResultBufferBytes:   32 * MiB,
		StatusListen:        "127.0.0.1:7402",
		CheckEnv:            []string{},
		MetricsInterval:     10 * time.Second,
		Plugins:             Plugins{Dirs: []string{"/usr/lib/unyo/plugins"}, Enabled: []Plugin{}, Env: []string{}},
	})
	equal(t, "metrics", agent.Metrics, Metrics{Store: "embedded", Retention: 14 * 24 * time.Hour, MaxSeries: 100_000, MaxPointsPerSeries: 30_000})
	equal(t, "logs", agent.Logs, Logs{Store: "embedded", ClickHouse: ClickHouse{Database: "unyo"}, Retention: 14 * 24 * time.Hour})
}

func TestDerivedDefaultsFollowOverrides(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, LoadOptions{Role: RoleCluster, Env: []string{
		"UNYO_CLUSTER_NAME=c1",
		"UNYO_DATA_DIR=/data",
		"UNYO_SERVER_LISTEN=:7401",
		"UNYO_SERVER_TLS_CERT_FILE=/c.pem",
		"UNYO_SERVER_TLS_KEY_FILE=/k.pem",
	}})
	equal(t, "store.dsn", cfg.Store.DSN, "/data/state.db")
	equal(t, "agent.spool_dir", cfg.Agent.SpoolDir, "/data/spool")
	// A wildcard listen address is not reachable; the hostname is.
	equal(t, "cluster.advertise_url", cfg.Cluster.AdvertiseURL, "https://"+hostname(t)+":7401")

	// Set values are not replaced by derived ones.
	cfg = mustLoad(t, LoadOptions{Role: RoleCluster, Env: []string{
		"UNYO_CLUSTER_NAME=c1",
		"UNYO_STORE_DRIVER=postgres",
		"UNYO_STORE_DSN=postgres://db/x",
		"UNYO_CLUSTER_ADVERTISE_URL=http://lb:80",
		"UNYO_CLUSTER_REPLICA=r1",
	}})
	equal(t, "store.dsn", cfg.Store.DSN, "postgres://db/x")
	equal(t, "cluster.advertise_url", cfg.Cluster.AdvertiseURL, "http://lb:80")
	equal(t, "cluster.replica", cfg.Cluster.Replica, "r1")
}

// TestYAMLRoundTrip: a Config written with yaml.v3 (durations and sizes as
// text) loads back unchanged, so `unyo config show`-style output is a valid
// configuration.
func TestYAMLRoundTrip(t *testing.T) {
	t.Parallel()
	want := mustLoad(t, LoadOptions{File: "testdata/valid_agent.yaml"})
	data, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got := mustLoad(t, LoadOptions{File: path})
	got.File = want.File
	equal(t, "round trip of\n"+string(data), got, want)
}

// TestExampleConfigs loads every example configuration under configs/ as
// its command would. Object manifests there (kind: ..., for unyo apply) are
// not configurations and are skipped.
func TestExampleConfigs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{RoleDev, RoleRoot, RoleCluster, RoleAgent} {
		if !slices.Contains(files, "../../configs/"+role+".yaml") {
			t.Errorf("configs/%s.yaml is missing", role)
		}
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]any
			if err := yaml.Unmarshal(data, &top); err == nil && top["kind"] != nil {
				t.Skipf("%s is a manifest for unyo apply, not a configuration", file)
			}
			cfg := mustLoad(t, LoadOptions{File: file})
			role := cfg.Role
			if role == RoleRoot || role == RoleCluster {
				role = RoleServer
			}
			mustLoad(t, LoadOptions{File: file, Role: role})
			if name := strings.TrimSuffix(filepath.Base(file), ".yaml"); name != cfg.Role {
				t.Errorf("%s states role %q", file, cfg.Role)
			}
		})
	}
}

func TestSchema(t *testing.T) {
	t.Parallel()
	root := schema() // panics on an unsupported field type
	envs, flags := map[string]string{}, map[string]string{}
	for _, f := range root.leaves() {
		if other, dup := envs[envName(f.key)]; dup {
			t.Errorf("%s and %s share the variable %s", f.key, other, envName(f.key))
		}
		envs[envName(f.key)] = f.key
		if other, dup := flags[flagName(f.key)]; dup {
			t.Errorf("%s and %s share the flag name %s", f.key, other, flagName(f.key))
		}
		flags[flagName(f.key)] = f.key
	}
	equal(t, "UNYO_STORE_DSN", envs["UNYO_STORE_DSN"], "store.dsn")
	equal(t, "UNYO_SERVER_TLS_CERT_FILE", envs["UNYO_SERVER_TLS_CERT_FILE"], "server.tls.cert_file")

	// yaml and mapstructure tags must agree: the file is checked by one and
	// decoded by the other.
	var walk func(reflect.Type)
	walk = func(t2 reflect.Type) {
		for i := range t2.NumField() {
			sf := t2.Field(i)
			if y, m := sf.Tag.Get("yaml"), sf.Tag.Get("mapstructure"); y != m {
				t.Errorf("%s.%s: yaml tag %q, mapstructure tag %q", t2.Name(), sf.Name, y, m)
			}
			if sf.Type.Kind() == reflect.Struct && kindOf(sf.Type) == kindSection {
				walk(sf.Type)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
}

func TestSize(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"65536", 65536},
		{"512B", 512},
		{"64KiB", 64 << 10},
		{"64kib", 64 << 10},
		{"256 MiB", 256 << 20},
		{"1GiB", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"10KB", 10_000},
		{"10MB", 10_000_000},
		{"2GB", 2_000_000_000},
	}
	for _, tt := range good {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if back, err := ParseSize(got.String()); err != nil || back != got {
			t.Errorf("ParseSize(%q.String() = %q) = %d, %v", tt.in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "64QB", "KiB", "-1", "1e3", "99999999999GiB", "64 Ki B"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for size, want := range map[Size]string{0: "0B", 1000: "1KB", 1024: "1KiB", 1536: "1536B", 64 * KiB: "64KiB", 3 * GiB: "3GiB", 1e9: "1GB"} {
		equal(t, "String", size.String(), want)
	}
	var s Size
	if err := s.Set("2MiB"); err != nil || s != 2*MiB {
		t.Errorf("Set(2MiB): %d, %v", s, err)
	}
}

func TestSuggestions(t *testing.T) {
	t.Parallel()
	root := schema()
	agent := root.child("agent")
	tests := []struct {
		section *field
		name    string
		want    string
	}{
		{agent, "node_nmae", "unknown key (did you mean node_name?)"},
		{agent, "Labels", "unknown key (did you mean labels?)"},
		{agent, "max_outptu", "unknown key (did you mean max_output?)"},
		{root, "lgo", "unknown key (did you mean log?)"},
		{root, "listen", "unknown key (did you mean server.listen?)"},
		{root, "dsn", "unknown key (did you mean store.dsn?)"},
		{root, "zzz", "unknown key (expected one of: role, data_dir, log, server, store, cluster, root, agent, metrics, logs, stats, audit)"},
	}
	for _, tt := range tests {
		equal(t, tt.name, unknownKey(root, tt.section, tt.name), tt.want)
	}
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

// selectorErr is the parser's own words for a bad selector, which the
// configuration error quotes.
func selectorErr(t *testing.T, sel string) string {
	t.Helper()
	_, err := stats.ParseSelector(sel)
	if err == nil {
		t.Fatalf("selector %s parses", sel)
	}
	_, msg, _ := strings.Cut(err.Error(), ": ")
	return msg
}
