// Package amtest starts a real Prometheus Alertmanager for tests and
// benchmarks: Debian's prometheus-alertmanager on 127.0.0.1:<free port>, with
// a temporary storage directory, one receiver that notifies nobody, and no
// cluster gossip port. It is stopped and its directory removed at cleanup.
//
// Without the binary tests are skipped, except when the environment variable
// CI is set: there a missing server is a broken machine, so the test fails.
package amtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/testutil"
)

// Binary is where Debian's prometheus-alertmanager package installs the
// server; the environment variable named by BinEnv overrides it.
const (
	Binary = "/usr/bin/prometheus-alertmanager"
	BinEnv = "AMTEST_BINARY"
)

// config routes every alert to a receiver without integrations: alerts are
// grouped and kept, and no notification leaves the machine.
const config = `route:
  receiver: "null"
  group_by: [alertname, instance]
receivers:
  - name: "null"
`

// Timeouts for starting and stopping; generous because CI machines are
// shared.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// Server is a running Alertmanager.
type Server struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Alert is one alert as POST /api/v2/alerts takes it (PostableAlert) and GET
// /api/v2/alerts returns it (GettableAlert, of which only these fields are
// read). An EndsAt in the past posts the alert as resolved.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt,omitzero"`
	EndsAt      time.Time         `json:"endsAt,omitzero"`
}

// Start runs an Alertmanager for the test and waits until it is ready.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(BinEnv)
	if bin == "" {
		bin = Binary
	}
	bin = testutil.NeedTool(t, "Prometheus Alertmanager", "apt-get install -y prometheus-alertmanager", bin)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatalf("amtest: %v", err)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("amtest: %v", err)
	}
	s := &Server{URL: "http://" + addr, log: filepath.Join(dir, "alertmanager.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatalf("amtest: %v", err)
	}
	s.cmd = exec.Command(bin,
		"--config.file="+cfg,
		"--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--cluster.listen-address=", // no gossip: a single instance
		"--log.level=warn",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("amtest: start %s: %v", bin, err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); logf.Close(); close(s.done) }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			t.Logf("amtest: log of %s:\n%s", bin, data)
		}
	})
	s.waitReady(t)
	return s
}

// PID is the server's process id, for reading its CPU time from /proc.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Post sends alerts in one POST /api/v2/alerts with client.
func (s *Server) Post(ctx context.Context, client *http.Client, alerts []Alert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return fmt.Errorf("encode %d alerts: %w", len(alerts), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post %d alerts to Alertmanager: %w", len(alerts), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_, _ = io.Copy(io.Discard, resp.Body) // so that the connection is reused
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post %d alerts to Alertmanager: %s: %s", len(alerts), resp.Status, msg)
	}
	return nil
}

// Alerts returns the alerts Alertmanager holds (GET /api/v2/alerts).
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v2/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list Alertmanager's alerts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("list Alertmanager's alerts: %s: %s", resp.Status, msg)
	}
	var out []Alert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode Alertmanager's alerts: %w", err)
	}
	return out, nil
}

// waitReady polls /-/ready until it answers 200; it fails at once if the
// process exits.
func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, startTimeout, "alertmanager to answer "+s.URL+"/-/ready", func() error {
		select {
		case <-s.done:
			t.Fatalf("amtest: alertmanager exited during startup; see its log below")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
}

// stop ends the server with SIGTERM, and SIGKILL if it has not exited
// within the stop timeout.
func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// freeAddr asks the kernel for an unused loopback address. Another process
// could take the port before the server binds; Start then fails clearly.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
