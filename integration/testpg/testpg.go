// Package testpg runs throwaway PostgreSQL servers for tests and benchmarks.
//
// Each server lives in its own temporary directory (data, log and unix
// socket), listens on a free port on 127.0.0.1 and is stopped and removed when
// the test ends. The Server handle can also stop and start the same server
// again on the same port, so fault tests can restart PostgreSQL under load
// while clients keep their DSN.
//
// PostgreSQL is found under /usr/lib/postgresql/*/bin (the newest version
// wins) or on PATH, or where $UNYO_TESTPG_BIN says. Without it tests are skipped, except when the environment
// variable CI is set: there a missing server is a broken machine, so the test
// fails.
package testpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Timeouts for one server operation; generous because CI machines are slow
// and the race detector makes everything slower still.
const (
	initTimeout  = 2 * time.Minute
	startTimeout = 60 * time.Second
	stopTimeout  = 60 * time.Second
	// portAttempts bounds retries when another process takes the free port
	// between our probe and the server's bind.
	portAttempts = 5
)

// Option changes how a server is set up.
type Option func(*config)

type config struct {
	durable  bool
	settings map[string]string
}

// WithDurable keeps fsync and synchronous commits on, so the server is as
// durable as a production one. Use it for benchmarks that claim durability;
// unit tests run faster without it.
func WithDurable() Option { return func(c *config) { c.durable = true } }

// WithSetting passes a server setting (postgres -c name=value), for example
// WithSetting("max_connections", "500").
func WithSetting(name, value string) Option {
	return func(c *config) { c.settings[name] = value }
}

// Server is one throwaway PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	bin     string // directory with initdb, pg_ctl, postgres
	dir     string // root of everything the server writes; removed at cleanup
	data    string
	logPath string
	asUser  string // run binaries as this user (when we are root), else ""
	cfg     config

	mu      sync.Mutex // serializes Start/Stop
	port    int
	running bool
	dbSeq   atomic.Int64
}

// Start starts a server for the test and returns the DSN of its postgres
// database. The server is stopped and removed when the test ends.
func Start(t testing.TB, opts ...Option) (dsn string) {
	t.Helper()
	return New(t, opts...).DSN()
}

// New starts a server for the test and returns its handle. The server is
// stopped and its directory removed when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := config{settings: map[string]string{}}
	for _, o := range opts {
		o(&cfg)
	}
	bin, err := findBin()
	if err != nil {
		testutil.Unavailable(t, fmt.Sprintf("testpg: PostgreSQL is not installed (%v); install it with `apt-get install -y postgresql`", err))
	}
	s := &Server{bin: bin, cfg: cfg}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("testpg: running as root needs a postgres user to run the server as: %v", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Fatalf("testpg: running as root needs runuser to drop to the postgres user: %v", err)
		}
		s.asUser = "postgres"
	}
	// Not t.TempDir: its path can be too long for a unix socket name
	// (108 bytes) and its parents are not traversable by the postgres user.
	dir, err := os.MkdirTemp("", "testpg-")
	if err != nil {
		t.Fatalf("testpg: create server directory: %v", err)
	}
	s.dir = dir
	s.data = filepath.Join(dir, "data")
	s.logPath = filepath.Join(dir, "server.log")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("testpg: %v", err)
		}
		if t.Failed() {
			t.Logf("testpg: server log (%s):\n%s", s.logPath, s.logTail(4096))
		}
		if err := os.RemoveAll(s.dir); err != nil {
			t.Errorf("testpg: remove server directory: %v", err)
		}
	})
	if s.asUser != "" {
		if err := chownToUser(dir, s.asUser); err != nil {
			t.Fatalf("testpg: %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	if err := s.initdb(ctx); err != nil {
		t.Fatalf("testpg: %v", err)
	}
	if err := s.startFreePort(ctx); err != nil {
		t.Fatalf("testpg: %v\nserver log:\n%s", err, s.logTail(4096))
	}
	return s
}

// DSN is the address of the server's postgres database.
func (s *Server) DSN() string { return s.DSNFor("postgres") }

// DSNFor is the address of the named database on this server.
func (s *Server) DSNFor(database string) string {
	s.mu.Lock()
	port := s.port
	s.mu.Unlock()
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the server listens on; it stays the same across
// Stop and Start.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// Dir is the server's directory (data, socket and log).
func (s *Server) Dir() string { return s.dir }

// CreateDatabase creates an empty database for the test and returns its DSN.
// The database is dropped when the test ends (if the server still runs), so
// many tests can share one server without seeing each other's data.
func (s *Server) CreateDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d", s.dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("testpg: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if !running {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		// FORCE: a test may leave pooled connections behind.
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("testpg: drop database %s: %v", name, err)
		}
	})
	return s.DSNFor(name)
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// Start starts the stopped server again on the same port and waits until it
// accepts connections. Starting a running server does nothing.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	if err := s.startLocked(ctx); err != nil {
		return fmt.Errorf("start PostgreSQL on port %d: %w", s.port, err)
	}
	return nil
}

// Stop shuts the server down (fast mode: clients are disconnected, nothing
// committed is lost) and waits until its process is gone. Stopping a stopped
// server does nothing.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	if err := s.stopLocked(ctx); err != nil {
		return fmt.Errorf("stop PostgreSQL on port %d: %w", s.port, err)
	}
	return nil
}

// Restart stops and starts the server, keeping its port and data.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	return s.Start(ctx)
}

func (s *Server) initdb(ctx context.Context) error {
	out, err := s.run(ctx, "initdb",
		"-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", s.data, err, out)
	}
	return nil
}

// startFreePort picks a free port and starts the server on it, picking again
// when another process grabbed the port before the server could bind it.
func (s *Server) startFreePort(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range portAttempts {
		s.port, err = freePort()
		if err != nil {
			return err
		}
		logStart := s.logSize()
		err = s.startLocked(ctx)
		if err == nil {
			return nil
		}
		if !portTaken(s.logFrom(logStart)) {
			break
		}
	}
	return fmt.Errorf("start PostgreSQL: %w", err)
}

// portTaken tells from the server's log whether it failed to start because
// its port was in use.
func portTaken(log string) bool {
	return strings.Contains(log, "could not bind") ||
		strings.Contains(log, "could not create any TCP/IP sockets")
}

func (s *Server) startLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(s.port),
		"unix_socket_directories": s.dir,
		// Tests open a store (a connection pool) per subtest, many in parallel.
		"max_connections":  "300",
		"log_min_messages": "warning",
	}
	if !s.cfg.durable {
		// Crash safety is pointless for a throwaway server; these make
		// commits and CREATE DATABASE much faster.
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range s.cfg.settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// pg_ctl hands these options to a shell: quote them.
	var o strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&o, "-c '%s' ", strings.ReplaceAll(k+"="+settings[k], "'", `'\''`))
	}
	// pg_ctl -w waits for the server's own "ready" mark and notices when it
	// exits during start-up (a taken port); waitReady then confirms that
	// clients really get through over TCP.
	timeout := startTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	out, err := s.run(ctx, "pg_ctl", "-D", s.data, "-l", s.logPath, "-w",
		"-t", strconv.Itoa(max(1, int(timeout.Seconds()))), "-o", o.String(), "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	s.running = true
	if err := s.waitReady(ctx); err != nil {
		// Don't leave a half-started server behind.
		stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if stopErr := s.stopLocked(stopCtx); stopErr != nil {
			return fmt.Errorf("%w (and stopping it: %v)", err, stopErr)
		}
		return err
	}
	return nil
}

// waitReady polls until the server accepts a TCP connection and answers a
// query, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	dsn := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, dsn.String())
		if err == nil {
			var one int
			err = conn.QueryRow(attempt, "SELECT 1").Scan(&one)
			conn.Close(context.Background())
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) stopLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	pid, _ := s.postmasterPID()
	out, err := s.run(ctx, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "30", "stop")
	if err != nil && pid == 0 {
		// No pid file: the server was not running after all.
		s.running = false
		return nil
	}
	if pid != 0 {
		// pg_ctl may time out or fail; make sure the process is really gone
		// so the port and data directory are free.
		if werr := waitGone(ctx, pid); werr != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if werr := waitGone(killCtx, pid); werr != nil {
				return fmt.Errorf("postmaster (pid %d) survived SIGKILL: %w", pid, werr)
			}
		}
	}
	s.running = false
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// PID is the postmaster's process id while the server runs: benchmarks read
// the CPU time of it and its children from /proc.
func (s *Server) PID() (int, bool) { return s.postmasterPID() }

// CPUTime is the CPU time the server has used so far: the postmaster and
// its backends, those that ended included (the kernel adds a reaped
// child's time to its parent's cutime and cstime). Benchmarks take the
// difference over a run: the database's share of the cost per result.
func (s *Server) CPUTime() (time.Duration, error) {
	pid, ok := s.postmasterPID()
	if !ok {
		return 0, errors.New("postgres is not running")
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // ended since: its time is in its parent's now
		}
		// The fields after the command name, which is in parentheses and
		// may hold spaces: f[0] is field 3 (state), f[1] the parent.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if parent, _ := strconv.Atoi(f[1]); p != pid && parent != pid {
			continue
		}
		for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

// postmasterPID reads the server's pid from postmaster.pid.
func (s *Server) postmasterPID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// waitGone waits until process pid has exited. A zombie counts as gone: it
// holds no port or file any more, and reaping it is up to its parent (init,
// since pg_ctl detaches the server), which may take its time.
func waitGone(ctx context.Context, pid int) error {
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || isZombie(pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// run runs a PostgreSQL binary, as the postgres user when we are root.
func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	// The postgres user may not be allowed into the test's directory.
	cmd.Dir = s.dir
	// pg_ctl's server keeps running after pg_ctl exits, with our stdout
	// unless redirected: use a buffer, never the test's own output, so the
	// test binary does not wait for the server to close it.
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *Server) logSize() int64 {
	st, err := os.Stat(s.logPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logFrom returns the server log from byte offset on.
func (s *Server) logFrom(offset int64) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return "(unreadable log: " + err.Error() + ")"
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(f)
	return b.String()
}

func (s *Server) logTail(n int64) string {
	return s.logFrom(max(0, s.logSize()-n))
}

// freePort asks the kernel for a free port. Another process may take it
// before the server binds it; startFreePort retries in that case.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func chownToUser(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("hand %s to user %s: %w", dir, name, err)
	}
	return nil
}

// BinEnv names an environment variable that, when set, is the only
// directory searched for PostgreSQL's binaries.
const BinEnv = "UNYO_TESTPG_BIN"

// findBin finds the directory with PostgreSQL's server binaries.
func findBin() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		if isExecutable(filepath.Join(d, "pg_ctl")) && isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
		return "", fmt.Errorf("no pg_ctl and initdb in %s (from $%s)", d, BinEnv)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: numeric, so 15 sorts after 9.6.
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "pg_ctl")) && isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		d := filepath.Dir(p)
		if isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", errors.New("no pg_ctl and initdb in /usr/lib/postgresql/*/bin or on PATH")
}

func pgVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
