// Package vmtest starts a real VictoriaMetrics server for tests: Debian's
// victoria-metrics binary on 127.0.0.1:<free port> with a temporary data
// directory, stopped at test cleanup.
package vmtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Binary is where Debian's victoria-metrics package installs the server;
// VMTEST_BINARY overrides it.
const Binary = "/usr/bin/victoria-metrics"

// Config holds server settings the tests depend on.
type Config struct {
	Retention          string // -retentionPeriod, default "30d"
	MaxSeries          int    // -search.maxUniqueTimeseries, 0 = server default
	MaxPointsPerSeries int    // -search.maxPointsPerTimeseries, 0 = server default
	ExtraArgs          []string
}

// Server is a running victoria-metrics process.
type Server struct {
	URL     string
	DataDir string

	bin  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start launches a server and registers its shutdown with t.Cleanup. It
// skips the test when the binary is missing, unless the CI environment
// variable is set, in which case a missing binary fails the test.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin := os.Getenv("VMTEST_BINARY")
	if bin == "" {
		bin = Binary
	}
	bin = testutil.NeedTool(t, "vmtest: the VictoriaMetrics server", "apt-get install -y victoria-metrics", bin)
	if cfg.Retention == "" {
		cfg.Retention = "30d"
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("vmtest: %v", err)
	}
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"-storageDataPath=" + filepath.Join(dir, "data"),
		"-httpListenAddr=" + addr,
		"-retentionPeriod=" + cfg.Retention,
		// Answer queries from the newest data and skip the response cache
		// so that a write followed by force_flush is visible at once.
		"-search.latencyOffset=0s",
		"-search.disableCache",
		"-search.cacheTimestampOffset=0s",
		// One sample per series and millisecond, as vmembed configures.
		"-dedup.minScrapeInterval=1ms",
		"-loggerLevel=ERROR",
	}
	if cfg.MaxSeries > 0 {
		args = append(args, "-search.maxUniqueTimeseries="+strconv.Itoa(cfg.MaxSeries))
	}
	if cfg.MaxPointsPerSeries > 0 {
		args = append(args, "-search.maxPointsPerTimeseries="+strconv.Itoa(cfg.MaxPointsPerSeries))
	}
	args = append(args, cfg.ExtraArgs...)
	s := &Server{URL: "http://" + addr, DataDir: filepath.Join(dir, "data"), bin: bin, args: args}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatalf("vmtest: %v", err)
	}
	s.log = logf
	t.Cleanup(func() {
		s.Stop()
		logf.Close()
	})
	if err := s.start(); err != nil {
		t.Fatalf("vmtest: %v", err)
	}
	return s
}

// freePort asks the kernel for an unused port. Another process could take it
// before the server binds; start then fails clearly rather than flaking.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s exited during startup; see %s", s.bin, s.log.Name())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %s/health within 30s; see %s", s.bin, s.URL, s.log.Name())
}

// Stop shuts the server down gracefully (SIGINT, which flushes data),
// killing it after 30s. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Restart stops the server and starts it again on the same data and port.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatalf("vmtest: restart: %v", err)
	}
}
