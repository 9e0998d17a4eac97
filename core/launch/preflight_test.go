package launch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/config"
)

// A root or cluster whose TLS files cannot be read refuses to start before
// it creates anything: no database, no data directory.
func TestStartRefusesMissingTLSBeforeCreatingState(t *testing.T) {
	for _, role := range []string{config.RoleRoot, config.RoleCluster} {
		t.Run(role, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			c := config.Defaults(role)
			c.Role, c.DataDir = role, dir
			c.Store.DSN = filepath.Join(dir, "state.db")
			c.Server.Listen = "127.0.0.1:0"
			c.Server.TLS.CertFile, c.Server.TLS.KeyFile = "/nonexistent/unyo/root.crt", "/nonexistent/unyo/root.key"
			c.Cluster.Name = "c1"
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			run := Root
			if role == config.RoleCluster {
				run = Cluster
			}
			err := run(context.Background(), c, log)
			if err == nil || !strings.Contains(err.Error(), "server.tls") || !strings.Contains(err.Error(), "/nonexistent/unyo/root.crt") {
				t.Fatalf("start = %v, want an error naming server.tls and the file", err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the data directory was created before the TLS check failed (%v)", err)
			}
		})
	}
}
