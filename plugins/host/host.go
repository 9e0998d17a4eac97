// Package host finds, verifies, starts and supervises unyo plugins. Only the
// plugins named in Config are started; each binary's sha256 is checked
// before every start; each plugin gets a supervisor that pings it, restarts
// it with exponential backoff and jitter after a crash, and gives up (state
// failed) when it crash-loops. Calls to a plugin that dies fail promptly
// with an error naming it; nothing a plugin does can take the host down.
package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/plugins/base"
)

// Config says where plugins live, which ones to run and how to supervise
// them. Zero durations take the defaults in parentheses.
type Config struct {
	// Dirs are searched in order for binaries named unyo-<kind>-<name>.
	Dirs []string
	// Plugins are the only plugins started.
	Plugins []PluginConfig
	// TempDir is where the private socket directory is made (os.TempDir()).
	TempDir string
	// HostVersion is sent to plugins for their logs.
	HostVersion string
	// DigestCache is a file where verified digests are kept across
	// restarts of the core (see digests.go for the trust model); empty
	// keeps them in memory only, for this Host's restarts of a plugin.
	DigestCache string
	// PassEnv names the variables of the host's environment that plugins
	// also get, beyond procenv's base (PATH, HOME, the locale, TZ,
	// TMPDIR). A plugin never inherits the rest, UNYO_* (tokens) least of
	// all.
	PassEnv []string
	// AllowUnpinned lets plugins without SHA256 start (for development);
	// the actual hash is logged so that it can be pinned.
	AllowUnpinned bool
	Logger        *slog.Logger
	// OnStateChange is called (from supervisor goroutines, one call at a
	// time per plugin) on every state change, so the core can raise events.
	OnStateChange func(StateChange)

	StartTimeout    time.Duration // 10s
	HealthInterval  time.Duration // 10s
	HealthTimeout   time.Duration // 3s
	HealthFailures  int           // 3 consecutive failed probes restart the plugin
	BackoffMin      time.Duration // 250ms
	BackoffMax      time.Duration // 30s
	CrashLoopLimit  int           // 5 restarts ...
	CrashLoopWindow time.Duration // ... within 2m mark the plugin failed
	StableAfter     time.Duration // 1m running resets the backoff
	ShutdownGrace   time.Duration // 5s
}

// PluginConfig names one plugin to run.
type PluginConfig struct {
	Kind string // check, action or provider
	Name string // the <name> in unyo-<kind>-<name>
	// SHA256 is the hex digest the binary must have.
	SHA256 string
	// Path overrides discovery.
	Path string
	// Config is sent with Configure.
	Config map[string]any
	// Env is added to the environment the plugin gets ("NAME=value").
	Env []string
}

// ID is "<kind>/<name>", how plugins are named in logs and errors.
func (p PluginConfig) ID() string { return p.Kind + "/" + p.Name }

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.StartTimeout, 10*time.Second)
	def(&c.HealthInterval, 10*time.Second)
	def(&c.HealthTimeout, 3*time.Second)
	def(&c.BackoffMin, 250*time.Millisecond)
	def(&c.BackoffMax, 30*time.Second)
	def(&c.CrashLoopWindow, 2*time.Minute)
	def(&c.StableAfter, time.Minute)
	def(&c.ShutdownGrace, 5*time.Second)
	if c.HealthFailures <= 0 {
		c.HealthFailures = 3
	}
	if c.CrashLoopLimit <= 0 {
		c.CrashLoopLimit = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
}

// maxSockDirLen leaves room for "/p<10 digits>/plugin<10 digits>" under
// the 107-byte limit of a unix socket path.
const maxSockDirLen = 107 - 30

// Host runs the configured plugins.
type Host struct {
	cfg     Config
	log     *slog.Logger
	sockDir string
	ctx     context.Context
	cancel  context.CancelFunc

	mu      sync.Mutex
	plugins map[string]*Plugin
	order   []string
	closed  bool
	wg      sync.WaitGroup

	// digests caches verified binaries' sha256 by path (see digest);
	// hashes counts the full hashes made, for tests.
	digestMu sync.Mutex
	digests  map[string]digestEntry
	racy     time.Duration // racyWindow; tests shorten it
	hashes   atomic.Int64
}

// New validates cfg and makes the private socket directory; it starts
// nothing.
func New(cfg Config) (*Host, error) {
	cfg.defaults()
	seen := map[string]bool{}
	var errs []error
	for i, p := range cfg.Plugins {
		if _, ok := base.ParseKind(p.Kind); !ok {
			errs = append(errs, fmt.Errorf("plugins[%d] (%s): kind %q must be check, action or provider", i, p.Name, p.Kind))
		}
		if p.Name == "" || strings.ContainsAny(p.Name, "/ ") {
			errs = append(errs, fmt.Errorf("plugins[%d]: name %q must be non-empty without slashes or spaces", i, p.Name))
		}
		if seen[p.ID()] {
			errs = append(errs, fmt.Errorf("plugins[%d]: plugin %s is configured twice", i, p.ID()))
		}
		seen[p.ID()] = true
		if p.SHA256 != "" {
			if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("plugins[%d] (%s): sha256 %q is not 64 hex digits", i, p.ID(), p.SHA256))
			}
		} else if !cfg.AllowUnpinned {
			errs = append(errs, fmt.Errorf("plugins[%d] (%s): sha256 is required (pin the binary's digest, or allow unpinned plugins for development)", i, p.ID()))
		}
	}
	for i, name := range cfg.PassEnv {
		if err := procenv.CheckName(name); err != nil {
			errs = append(errs, fmt.Errorf("env[%d]: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin configuration: %w", err)
	}
	// One private (0700) directory for every plugin socket, so that other
	// local users cannot reach them and Close can remove what killed
	// plugins leave behind.
	dir, err := os.MkdirTemp(cfg.TempDir, "unyo-plugins-")
	if err != nil {
		return nil, fmt.Errorf("cannot make the plugin socket directory: %w", err)
	}
	// Unix socket paths are limited to 107 bytes; each plugin adds about 30.
	if len(dir) > maxSockDirLen {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("plugin socket directory %s is too long for unix sockets (%d bytes, at most %d): set a shorter temp dir", dir, len(dir), maxSockDirLen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{cfg: cfg, log: cfg.Logger, sockDir: dir, ctx: ctx, cancel: cancel, plugins: map[string]*Plugin{},
		digests: map[string]digestEntry{}, racy: racyWindow}
	h.loadDigests()
	for _, pc := range cfg.Plugins {
		h.plugins[pc.ID()] = newPlugin(h, pc)
		h.order = append(h.order, pc.ID())
	}
	return h, nil
}

// Start resolves and verifies every configured plugin and starts a
// supervisor for each one that passes. It returns the refusals (missing
// binary, checksum mismatch) joined; those plugins are in state failed and
// the others run regardless. Start waits until each started plugin has
// answered its first call or failed its first start.
func (h *Host) Start(ctx context.Context) error {
	var errs []error
	var ready []<-chan struct{}
	for _, id := range h.order {
		p := h.plugins[id]
		// The checksum is verified by the supervisor before every start;
		// the digest is cached per file identity (see digest), so only a
		// first start or a changed file pays for hashing the binary.
		path, err := h.resolve(p.cfg)
		if err != nil {
			p.setState(StateFailed, err)
			p.firstOnce.Do(func() { close(p.firstStart) })
			errs = append(errs, err)
			continue
		}
		p.path = path
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			p.supervise(h.ctx)
		}()
		ready = append(ready, p.firstStart)
	}
	for _, r := range ready {
		select {
		case <-r:
		case <-ctx.Done():
			return fmt.Errorf("waiting for plugins to start: %w", ctx.Err())
		}
	}
	for _, id := range h.order {
		p := h.plugins[id]
		if st := p.Status(); st.State == StateFailed && p.path != "" {
			errs = append(errs, errors.New(st.LastError))
		}
	}
	return errors.Join(errs...)
}

// resolve finds the binary: the configured path, or the first directory
// holding unyo-<kind>-<name>.
func (h *Host) resolve(pc PluginConfig) (string, error) {
	if pc.Path != "" {
		if _, err := os.Stat(pc.Path); err != nil {
			return "", fmt.Errorf("plugin %s: %w", pc.ID(), err)
		}
		return pc.Path, nil
	}
	file := BinaryName(pc.Kind, pc.Name)
	for _, d := range h.cfg.Dirs {
		path := filepath.Join(d, file)
		fi, err := os.Stat(path)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("plugin %s: no executable %s in the plugin directories %v", pc.ID(), file, h.cfg.Dirs)
}

// BinaryName is the file name of a plugin binary.
func BinaryName(kind, name string) string { return "unyo-" + kind + "-" + name }

// Found is a plugin binary found by Discover.
type Found struct {
	Kind, Name, Path string
}

// Discover lists the plugin binaries in dirs (first directory wins for a
// name), configured or not; for `unyo plugin list`. It starts nothing.
func Discover(dirs []string) ([]Found, error) {
	var out []Found
	seen := map[string]bool{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading plugin directory %s: %w", d, err)
		}
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), "unyo-")
			if !ok || e.IsDir() {
				continue
			}
			kind, name, ok := strings.Cut(rest, "-")
			if _, known := base.ParseKind(kind); !ok || !known || name == "" || seen[kind+"/"+name] {
				continue
			}
			seen[kind+"/"+name] = true
			out = append(out, Found{Kind: kind, Name: name, Path: filepath.Join(d, e.Name())})
		}
	}
	return out, nil
}

// verify checks the binary's digest against the pinned one and returns the
// actual digest. The digest comes from the Host's cache when the file is
// unchanged since it was hashed (see digest), so restarts after a crash do
// not hash again; the comparison with the pin is made every time.
func (h *Host) verify(path string, pc PluginConfig, log *slog.Logger) (string, error) {
	actual, cached, err := h.digest(path)
	if err != nil {
		return "", fmt.Errorf("plugin %s: cannot read %s to verify it: %w", pc.ID(), path, err)
	}
	if pc.SHA256 == "" {
		if !h.cfg.AllowUnpinned {
			return actual, fmt.Errorf("plugin %s: no sha256 pinned; %s has sha256 %s", pc.ID(), path, actual)
		}
		log.Warn("starting an unpinned plugin", "plugin", pc.ID(), "path", path, "sha256", actual)
		return actual, nil
	}
	if !strings.EqualFold(pc.SHA256, actual) {
		return actual, fmt.Errorf("plugin %s refused: %s has sha256 %s, but the configuration expects %s", pc.ID(), path, actual, strings.ToLower(pc.SHA256))
	}
	if cached {
		log.Debug("sha256 verified (file unchanged since it was hashed)", "path", path)
	}
	return actual, nil
}

// racyWindow: files changed this recently are hashed but not cached, since
// a rewrite within the file system's timestamp granularity could leave
// size, mtime and ctime as they were (git's "racy" entries).
const racyWindow = 2 * time.Second

// digestEntry is a cached digest and the file identity it was computed for.
type digestEntry struct {
	Path   string `json:"path"`
	ID     fileID `json:"id"`
	SHA256 string `json:"sha256"`
}

// digest returns the sha256 of path and whether it came from the cache.
// The cache is keyed by path and valid while the file's device, inode,
// size, mtime and ctime are all unchanged: replacing the file changes the
// inode, rewriting it in place changes mtime and ctime (which no
// unprivileged user can set back). The identity cached is that of the
// opened file before and after hashing, so a change during the hash is not
// cached either.
// SHA256 is the hex sha256 of what r holds: the digest plugins are pinned by.
func SHA256(r io.Reader) (string, error) {
	hash := sha256.New()
	// Large reads: hashing a plugin binary is on the path of its first start,
	// and 1 MiB reads save about a tenth of it against io.Copy's 32 KiB
	// (struct{io.Reader} hides os.File's WriteTo, which would pick its own).
	if _, err := io.CopyBuffer(hash, struct{ io.Reader }{r}, make([]byte, 1<<20)); err != nil {
		return "", err
	}
	return hex.EncodeToString(hash.Sum(nil)), nil
}

func (h *Host) digest(path string) (string, bool, error) {
	if fi, err := os.Stat(path); err == nil {
		if id, ok := identity(fi); ok {
			h.digestMu.Lock()
			e, hit := h.digests[path]
			h.digestMu.Unlock()
			if hit && e.ID == id {
				return e.SHA256, true, nil
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	began := time.Now()
	before, errB := f.Stat()
	actual, err := SHA256(f)
	if err != nil {
		return "", false, err
	}
	h.hashes.Add(1)
	after, errA := f.Stat()
	if errB != nil || errA != nil {
		return actual, false, nil
	}
	idB, okB := identity(before)
	idA, okA := identity(after)
	if okB && okA && idB == idA && began.Sub(idA.changed()) > h.racy {
		h.digestMu.Lock()
		h.digests[path] = digestEntry{Path: path, ID: idA, SHA256: actual}
		h.saveDigests()
		h.digestMu.Unlock()
	}
	return actual, false, nil
}

// Plugin returns the supervised plugin kind/name.
func (h *Host) Plugin(kind, name string) (*Plugin, error) {
	p, ok := h.plugins[kind+"/"+name]
	if !ok {
		return nil, fmt.Errorf("plugin %s/%s is not configured", kind, name)
	}
	return p, nil
}

// Status reports every configured plugin, in configuration order.
func (h *Host) Status() []Status {
	out := make([]Status, 0, len(h.order))
	for _, id := range h.order {
		out = append(out, h.plugins[id].Status())
	}
	return out
}

// Close shuts every plugin down (Shutdown with the grace, then kill), waits
// for the supervisors and removes the socket directory.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("plugins did not stop in time: %w", ctx.Err())
	}
	if rerr := os.RemoveAll(h.sockDir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("removing the plugin socket directory: %w", rerr))
	}
	return err
}

// SocketDir is the private directory holding plugin sockets.
func (h *Host) SocketDir() string { return h.sockDir }

// pluginEnv is what a plugin gets of the host's environment: procenv's
// base and the declared variables, never UNYO_*, nor go-plugin's own
// variables, which a host started as a plugin (tests) could otherwise pass
// down.
func pluginEnv(pass []string) []string {
	return slices.DeleteFunc(procenv.Inherit(os.Environ(), pass), func(kv string) bool {
		return strings.HasPrefix(kv, "PLUGIN_")
	})
}
