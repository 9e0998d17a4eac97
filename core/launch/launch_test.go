package launch

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/config"
	"github.com/unyo-ops/unyo/core/store/sqlstore"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestNextPort(t *testing.T) {
	for _, tc := range []struct {
		listen  string
		n       int
		want    string
		wantErr bool
	}{
		{"127.0.0.1:7400", 1, "127.0.0.1:7401", false},
		{"127.0.0.1:7400", 2, "127.0.0.1:7402", false},
		{":7400", 1, ":7401", false},
		{"[::1]:7400", 1, "[::1]:7401", false},
		{"localhost:0", 1, "", true}, // dev needs a fixed port
		{"localhost", 1, "", true},
		{"localhost:http", 1, "", true},
	} {
		got, err := nextPort(tc.listen, tc.n)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("nextPort(%q, %d) = %q, %v; want %q, error=%v", tc.listen, tc.n, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestStatsOptions(t *testing.T) {
	c := config.Defaults(config.RoleServer)
	c.Stats.Enabled = false
	if statsOptions(c) != nil {
		t.Error("stats off, want nil")
	}
	c.Stats.Enabled = true
	c.Metrics.Retention, c.Logs.Retention = 3*time.Hour, 4*time.Hour
	got := statsOptions(c)
	if got == nil || got.MetricsBackfill != 3*time.Hour || got.LogsBackfill != 4*time.Hour || got.HourlyRetention != c.Stats.HourlyRetention {
		t.Errorf("statsOptions = %+v: the first run reaches back as far as the raw stores keep data", got)
	}
}

func TestServerOptions(t *testing.T) {
	c := config.Defaults(config.RoleServer)
	c.Server.AdminTokens, c.Server.MaxRequestBytes = []string{"adm"}, 1<<20
	o := serverOptions(c, "127.0.0.1:9", discard)
	if o.Listen != "127.0.0.1:9" || len(o.Auth.AdminTokens) != 1 || o.Limits.RequestBytes != 1<<20 || o.Limits.MessageBytes != 1<<20 {
		t.Errorf("serverOptions = %+v", o)
	}
}

// applyExamples fills a new cluster once: what an operator deletes later
// stays deleted across restarts.
func TestApplyExamplesOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := applyExamples(ctx, st, "dev", discard); err != nil {
		t.Fatal(err)
	}
	checks, err := st.ListChecks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) == 0 {
		t.Fatal("no example checks applied")
	}
	for _, c := range checks {
		if c.GetCluster() != "dev" || c.GetSource() != "central" {
			t.Errorf("check %s: cluster %q, source %q; want dev, central", c.GetName(), c.GetCluster(), c.GetSource())
		}
	}
	if err := st.DeleteCheck(ctx, checks[0].GetName()); err != nil {
		t.Fatal(err)
	}
	if err := applyExamples(ctx, st, "dev", discard); err != nil {
		t.Fatal(err)
	}
	again, err := st.ListChecks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(checks)-1 {
		t.Errorf("after a delete and a restart: %d checks, want %d", len(again), len(checks)-1)
	}
}
