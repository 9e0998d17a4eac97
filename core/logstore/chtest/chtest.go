// Package chtest starts a throwaway clickhouse-server for tests: free 127.0.0.1
// ports, a temporary data directory, stopped at test cleanup.
//
// Debian's clickhouse-server (18.16) has no multi-tool binary and nothing starts
// it automatically, so tests run it as a plain child process.
package chtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Server is a running clickhouse-server owned by one test.
type Server struct {
	// Addr is the native-protocol (TCP) address, host:port.
	Addr string
	// HTTPAddr is the HTTP address; clickhouse-go does not work over HTTP against 18.16.
	HTTPAddr string
	// Dir holds configuration, data and server logs.
	Dir string

	bin  string
	cmd  *exec.Cmd
	done chan error
}

// Binary returns the path of clickhouse-server, or "" if it is not installed.
func Binary() string {
	p, err := exec.LookPath("clickhouse-server")
	if err != nil {
		for _, c := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
				return c
			}
		}
		return ""
	}
	return p
}

// Start launches a server for t and registers its shutdown with t.Cleanup.
// Without clickhouse-server the test is skipped, unless the environment
// variable CI is set: CI must not silently lose the ClickHouse coverage.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		testutil.Unavailable(t, "clickhouse-server is not installed (apt-get install -y clickhouse-server); skipping ClickHouse tests")
	}
	s, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping clickhouse-server: %v", err)
		}
	})
	return s
}

func start(bin, dir string) (*Server, error) {
	// Ports are picked by the kernel and released just before the server binds
	// them; a collision with a concurrent process is possible but rare, so retry.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := startOnce(bin, filepath.Join(dir, fmt.Sprintf("run%d", attempt)))
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOnce(bin, dir string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if err := writeConfig(dir, ports); err != nil {
		return nil, err
	}
	s := &Server{
		Addr:     fmt.Sprintf("127.0.0.1:%d", ports[1]),
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Dir:      dir,
		bin:      bin,
	}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// writeConfig prepares dir for a server listening on ports (HTTP, native).
func writeConfig(dir string, ports []int) error {
	for _, sub := range []string{"data", "tmp", "user_files", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("creating clickhouse test directory: %w", err)
		}
	}
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
`
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>%[1]s/log/server.log</log>
    <errorlog>%[1]s/log/server.err.log</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <http_port>%[2]d</http_port>
  <tcp_port>%[3]d</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <users_config>%[1]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>104857600</mark_cache_size>
</yandex>
`, dir, ports[0], ports[1])
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644); err != nil {
		return fmt.Errorf("writing clickhouse users file: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		return fmt.Errorf("writing clickhouse config: %w", err)
	}
	return nil
}

// launch starts the server on the configuration in s.Dir and waits until it
// accepts connections.
func (s *Server) launch() error {
	stderr, err := os.OpenFile(filepath.Join(s.Dir, "log", "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("creating clickhouse stderr log: %w", err)
	}
	defer stderr.Close()

	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.Dir, "config.xml"))
	cmd.Dir = s.Dir
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	// Own process group, so a Ctrl-C on the test binary does not race our shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return fmt.Errorf("clickhouse-server exited during startup (%v): %s", werr, s.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Stop()
			return fmt.Errorf("clickhouse-server did not accept connections on %s within 60s: %s", s.Addr, s.tail())
		}
	}
}

// tail returns the end of the server's logs for error messages.
func (s *Server) tail() string {
	var b strings.Builder
	for _, f := range []string{"stderr.log", "server.err.log"} {
		data, err := os.ReadFile(filepath.Join(s.Dir, "log", f))
		if err != nil || len(data) == 0 {
			continue
		}
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "[%s] %s ", f, data)
	}
	return b.String()
}

// Stop terminates the server: SIGTERM, then SIGKILL after 15 seconds.
// It is safe to call more than once.
func (s *Server) Stop() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case err := <-s.done:
		s.done <- err
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	err := <-s.done
	s.done <- err
	return nil
}

// Restart starts a stopped or killed server again on the same data directory
// and ports, for tests of a backend that comes back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("chtest: stopping before restart: %v", err)
	}
	if err := s.launch(); err != nil {
		t.Fatalf("chtest: restart: %v", err)
	}
}

// Kill stops the server abruptly, for tests of a backend whose server goes away.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		err := <-s.done
		s.done <- err
	}
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port for clickhouse-server: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
