package agentrole

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/unyo-ops/unyo/core/config"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestPluginConfigs(t *testing.T) {
	if got := PluginConfigs(config.Plugins{}); got != nil {
		t.Errorf("no plugins = %v, want nil (no plugin host)", got)
	}
	got := PluginConfigs(config.Plugins{Enabled: []config.Plugin{{Kind: "check", Name: "http", SHA256: "ABCdef", Config: map[string]any{"a": 1}}}})
	if len(got) != 1 || got[0].Kind != "check" || got[0].Name != "http" || got[0].SHA256 != "abcdef" || got[0].Config["a"] != 1 {
		t.Errorf("PluginConfigs = %+v, want the digest in lower case", got)
	}
}

// privateState tightens what holds secrets, whatever its modes were.
func TestPrivateState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	outside := filepath.Join(t.TempDir(), "other.db")
	for _, f := range []string{state, outside, outside + "-wal"} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := config.Defaults(config.RoleServer)
	c.DataDir, c.Store.Driver, c.Store.DSN = dir, "sqlite", outside
	if err := PrivateState(c, discard); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, state: 0o600, outside: 0o600, outside + "-wal": 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", path, got, want)
		}
	}
}
