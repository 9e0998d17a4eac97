package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/unyo-ops/unyo/core/atomicfile"
)

// nodeTokenFile is where, in the agent's data directory, it keeps the
// credential its cluster issued to its node at enrolment.
const nodeTokenFile = "node-token"

// credential is what the agent presents: its node's own credential once it
// has one, the configured (join) token until then.
type credential struct {
	path       string // empty: kept in memory only
	configured string
	node       string // guarded by Agent.mu
}

// load reads the node's credential kept by an earlier run.
func (c *credential) load() error {
	if c.path == "" {
		return nil
	}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the node's credential %s: %w", c.path, err)
	}
	c.node = strings.TrimSpace(string(b))
	return nil
}

// keep stores a newly issued node credential, readable by the agent alone.
func (c *credential) keep(token string) error {
	if c.path != "" {
		if err := atomicfile.WriteFile(c.path, []byte(token+"\n"), 0o600); err != nil {
			return fmt.Errorf("keep the node's credential in %s: %w", c.path, err)
		}
	}
	c.node = token
	return nil
}

func nodeTokenPath(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, nodeTokenFile)
}
