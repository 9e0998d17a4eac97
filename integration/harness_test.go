package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// unyoBin is the unyo binary built once for all tests of this package;
// unyoAgentBin, beside it, the agent's own binary (cmd/unyo-agent).
var unyoBin, unyoAgentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "unyo-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	unyoBin, unyoAgentBin = filepath.Join(dir, "unyo"), filepath.Join(dir, "unyo-agent")
	// -trimpath keeps the build cache independent of the checkout's path,
	// so that TestReadmeSeparateProcesses's `make build` in a copy of the
	// checkout finds this build's packages cached.
	build := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "../cmd/unyo", "../cmd/unyo-agent")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building unyo:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freePortRun returns the first of n consecutive loopback ports nothing
// listens on now, for `unyo dev`, which serves on a port and the next two.
// The run is taken below the kernel's ephemeral range (32768 and up by
// default): a port next to one the kernel just handed out is the next the
// kernel hands to an outgoing connection, which is how a cluster once
// found its port taken.
func freePortRun(t testing.TB, n int) (host string, first int) {
	t.Helper()
	for tries := 0; tries < 200; tries++ {
		first = 20000 + rand.IntN(12000)
		var held []net.Listener
		for k := range n {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", first+k))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		for _, ln := range held {
			ln.Close()
		}
		if len(held) == n {
			return "127.0.0.1", first
		}
	}
	t.Fatalf("no %d consecutive free ports found between 20000 and 32000", n)
	return "", 0
}

// proc is a unyo process started by a test.
type proc struct {
	t    testing.TB
	bin  string // the unyo binary run
	name string
	args []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startUnyo starts `unyo args...`, logging to a file that is printed if the
// test fails, and stops it (SIGKILL if it does not exit) when the test ends.
func startUnyo(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	return startUnyoBin(t, unyoBin, name, env, args...)
}

// startUnyoBin is startUnyo running the unyo binary at bin.
func startUnyoBin(t testing.TB, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, bin: bin, name: name, args: args, env: env, log: filepath.Join(t.TempDir(), name+".log")}
	p.start()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			if len(data) > 20000 {
				data = data[len(data)-20000:]
			}
			t.Logf("---- log of %s (tail) ----\n%s", name, data)
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// stop sends sig and waits; after grace it kills the process group.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	// Check commands the process started live in their own groups and are
	// killed by it; anything else in its group goes now.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// kill stops the process with SIGKILL, as a crash would.
func (p *proc) kill() { p.stop(syscall.SIGKILL, 5*time.Second) }

// restart starts the process again with the same arguments.
func (p *proc) restart() { p.start() }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// cli runs a unyo operator command against server and returns its stdout.
func cli(t testing.TB, server string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unyoBin, append([]string{"--server", server}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("unyo %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// cliJSON runs a command with -o json and decodes {"items": [...]}.
func cliJSON(t testing.TB, server string, args ...string) ([]map[string]any, error) {
	t.Helper()
	out, err := cli(t, server, append(args, "-o", "json")...)
	if err != nil {
		return nil, err
	}
	var v struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("decode %q: %w", out, err)
	}
	return v.Items, nil
}

// writeFile writes a file under dir and returns its path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
