// Package agentrole runs the node agent from its configuration. It is the
// part of package launch that the agent needs, kept apart so that the
// agent's own binary (cmd/unyo-agent) links none of the servers' packages:
// their stores, query engines and web UI would cost every node of a fleet
// the pages their init touches at start.
package agentrole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/unyo-ops/unyo/core/agent"
	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/internal/footprint"
	"github.com/unyo-ops/unyo/core/internal/private"
	"github.com/unyo-ops/unyo/core/logtail"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/version"
	"github.com/unyo-ops/unyo/plugins/host"
)

// Run runs a node agent until ctx ends.
func Run(ctx context.Context, c *config.Config, log *slog.Logger) error {
	// What every package's init and loading the configuration touched
	// goes before the agent is built, which touches pages of its own.
	footprint.Release(log)
	if err := PrivateState(c, log); err != nil {
		return err
	}
	a, err := New(c, log)
	if err != nil {
		return err
	}
	// Started: what only starting needed can go (see package footprint).
	footprint.Agent(log)
	return a.Run(ctx)
}

// New builds the agent of configuration c.
func New(c *config.Config, log *slog.Logger) (*agent.Agent, error) {
	var local []*unyov1.Check
	for i, raw := range c.Agent.Checks {
		ch, err := manifest.DecodeCheck(raw, fmt.Sprintf("%s: agent.checks[%d]", c.File, i))
		if err != nil {
			return nil, err
		}
		local = append(local, ch)
	}
	logs := make([]logtail.FileConfig, len(c.Agent.Logs))
	for i, l := range c.Agent.Logs {
		logs[i] = logtail.FileConfig{Path: l.Path, App: l.App, Format: l.Format, StartAt: l.StartAt}
	}
	plugins := PluginConfigs(c.Agent.Plugins)
	return agent.New(agent.Options{
		NodeName: c.Agent.NodeName, Resource: c.Agent.Resource, Labels: c.Agent.Labels, ClusterURL: c.Agent.ClusterURL, Token: c.Agent.Token, TLS: ClientTLS(c.Agent.TLS),
		DataDir: filepath.Join(c.DataDir, "agent"), CheckDirs: c.Agent.CheckDirs, MaxOutput: int(c.Agent.MaxOutput),
		MaxConcurrent: c.Agent.MaxConcurrentChecks, BatchSize: c.Agent.BatchSize, FlushInterval: c.Agent.FlushInterval,
		SpoolDir: c.Agent.SpoolDir, SpoolMaxBytes: int64(c.Agent.SpoolMaxBytes), StatusListen: c.Agent.StatusListen,
		StatusToken: c.Agent.StatusToken, CheckEnv: c.Agent.CheckEnv, PluginEnv: c.Agent.Plugins.Env,
		BufferRecords: c.Agent.ResultBufferRecords, BufferBytes: int64(c.Agent.ResultBufferBytes),
		MetricsInterval: c.Agent.MetricsInterval, Logs: logs,
		PluginDirs: c.Agent.Plugins.Dirs, Plugins: plugins,
		Ports:       agent.PortOptions{Enabled: c.Agent.Ports.Enabled, MetadataPort: c.Agent.Ports.MetadataPort},
		Capacity:    &unyov1.Capacity{Cpus: int32(c.Agent.Capacity.CPUs), MemoryBytes: int64(c.Agent.Capacity.Memory), DiskBytes: int64(c.Agent.Capacity.Disk)},
		LocalChecks: local, Version: version.Short(), Logger: log.With("role", "agent"),
	})
}

// PrivateState makes the data directory 0700 and an existing SQLite
// database (with its WAL and shared-memory files) 0600, whatever their
// modes were: they hold tokens, check env secrets and webhook headers. A
// new database is created 0600 (sqlstore.OpenSQLite), and SQLite gives its
// -wal and -shm files the database's mode.
func PrivateState(c *config.Config, log *slog.Logger) error {
	if err := private.Dir(c.DataDir, log); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	// The database when it lives here, and the plugin digest cache.
	if err := private.Files(c.DataDir, log); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if c.Store.Driver != "sqlite" || c.Role == config.RoleAgent {
		return nil
	}
	// A store.dsn outside data_dir.
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		errs = append(errs, private.File(c.Store.DSN+suffix, log))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store.dsn: %w", err)
	}
	return nil
}

// ClientTLS turns a client's TLS settings into the client's options.
func ClientTLS(t config.ClientTLS) client.TLSOptions {
	return client.TLSOptions{CAFile: t.CAFile, ServerName: t.ServerName, CertFile: t.CertFile, KeyFile: t.KeyFile}
}

// PluginConfigs turns a plugins section into the plugin host's configuration.
func PluginConfigs(p config.Plugins) []host.PluginConfig {
	var out []host.PluginConfig
	for _, pl := range p.Enabled {
		out = append(out, host.PluginConfig{Kind: pl.Kind, Name: pl.Name, SHA256: strings.ToLower(pl.SHA256), Config: pl.Config})
	}
	return out
}
