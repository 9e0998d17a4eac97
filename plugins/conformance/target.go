package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/host"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// startTimeout bounds a plugin's handshake.
const startTimeout = 10 * time.Second

// Target is what the harness tests: a plugin binary, or an implementation
// served in this process (cases that need a process of their own, such as
// parent death or descriptor growth, are then skipped).
type Target struct {
	path      string
	newPlugin func() sdk.Plugin
	fixtures  *Fixtures
}

// Binary targets the plugin executable at path.
func Binary(path string, fx *Fixtures) Target { return Target{path: path, fixtures: fx} }

// InProcess targets implementations made by newPlugin, one per plugin
// instance the cases start.
func InProcess(newPlugin func() sdk.Plugin, fx *Fixtures) Target {
	return Target{newPlugin: newPlugin, fixtures: fx}
}

// String names the target in reports and errors.
func (t Target) String() string {
	if t.path != "" {
		return filepath.Base(t.path)
	}
	if t.newPlugin != nil {
		return t.newPlugin().Info().Name + " (in-process)"
	}
	return "no target"
}

func (t Target) isBinary() bool { return t.path != "" }

// instance is one running plugin.
type instance struct {
	name   string
	conn   *base.Conn
	pid    int
	took   time.Duration // handshake
	stdout *syncBuffer   // stray stdout after the handshake
	stderr *host.StderrTail
	// raw is the connection itself, for calls to services the generated
	// v1 clients do not know (another API version's).
	raw *grpc.ClientConn
	// stopping is set when the harness ends the plugin on purpose, so that
	// an exit without it is reported as a crash.
	stopping atomic.Bool

	client *plugin.Client
	cmd    *exec.Cmd
	ip     *sdk.InProcess
	cc     *grpc.ClientConn
	dir    string
	once   sync.Once
}

// startMode says how to start a binary.
type startMode int

const (
	startNormal startMode = iota
	// startOrphanable starts the plugin through a shell, so that the case
	// can kill its parent and see whether it notices.
	startOrphanable
)

func (t Target) start(ctx context.Context, mode startMode) (*instance, error) {
	if !t.isBinary() {
		return t.startInProcess()
	}
	dir, err := os.MkdirTemp("", "ucp")
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", t, err)
	}
	var cmd *exec.Cmd
	if mode == startOrphanable {
		cmd = exec.Command("/bin/sh", "-c", `"$0" & wait`, t.path)
	} else {
		cmd = exec.Command(t.path)
		cmd.Env = append(cmd.Env, base.EnvParentPID+"="+strconv.Itoa(os.Getpid()))
	}
	cmd.Env = append(append(cmd.Env, os.Environ()...), plugin.EnvUnixSocketDir+"="+dir)
	cmd.SysProcAttr = sysProcAttr()
	stdout, stderr := &syncBuffer{}, &host.StderrTail{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		Plugins:          base.ClientPluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     startTimeout,
		SyncStdout:       stdout,
		SyncStderr:       io.Discard,
		Stderr:           stderr,
	})
	inst := &instance{name: t.String(), client: client, cmd: cmd, dir: dir, stdout: stdout, stderr: stderr}
	began := time.Now()
	rpc, err := client.Client()
	if err != nil {
		inst.kill()
		return nil, fmt.Errorf("plugin %s did not complete the handshake: %w", t, err)
	}
	inst.took = time.Since(began)
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}
	raw, err := rpc.Dispense(base.NamePlugin)
	if err != nil {
		inst.kill()
		return nil, fmt.Errorf("plugin %s: %w", t, err)
	}
	inst.conn = raw.(*base.Conn)
	if gc, ok := rpc.(*plugin.GRPCClient); ok {
		inst.raw = gc.Conn
	}
	if mode == startOrphanable {
		// The shell is go-plugin's process; the plugin is its child.
		inst.pid = childOf(inst.pid)
		if inst.pid == 0 {
			inst.kill()
			return nil, fmt.Errorf("plugin %s: cannot find its process under the shell", t)
		}
	}
	_ = ctx
	return inst, nil
}

func (t Target) startInProcess() (*instance, error) {
	p := t.newPlugin()
	dir, err := os.MkdirTemp("", "ucp")
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", t, err)
	}
	began := time.Now()
	ip, err := sdk.ServeInProcess(p, dir, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cc, err := grpc.NewClient("unix://"+ip.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		ip.Stop(0)
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("plugin %s: %w", t, err)
	}
	return &instance{name: t.String(), conn: base.NewConn(cc, ip.Exited()), ip: ip, cc: cc, raw: cc, dir: dir,
		took: time.Since(began), stdout: &syncBuffer{}, stderr: &host.StderrTail{}}, nil
}

// configure negotiates and configures like the host does.
func (i *instance) configure(ctx context.Context, cfg map[string]any) error {
	s, err := toStruct(cfg)
	if err != nil {
		return fmt.Errorf("plugin %s: fixture config: %w", i.name, err)
	}
	_, err = i.conn.Plugin.Configure(ctx, &pluginv1.ConfigureRequest{Config: s, ApiVersion: base.APIVersion1})
	if err != nil {
		return fmt.Errorf("plugin %s rejected the fixture config: %w", i.name, err)
	}
	return nil
}

// exited is closed when the plugin process (or in-process server) ended.
func (i *instance) exited() <-chan struct{} { return i.conn.Done }

// shutdown asks the plugin to stop and waits up to wait for it to exit by
// itself; false if it did not.
func (i *instance) shutdown(grace, wait time.Duration) (bool, error) {
	i.stopping.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Second)
	_, err := i.conn.Plugin.Shutdown(ctx, &pluginv1.ShutdownRequest{Grace: durationpb.New(grace)})
	cancel()
	if err != nil {
		return false, fmt.Errorf("plugin %s: Shutdown: %w", i.name, err)
	}
	return i.waitExit(wait), nil
}

// waitExit waits for the process itself (not only the connection) to end.
func (i *instance) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-i.exited():
	case <-t.C:
		return false
	}
	if i.pid > 0 {
		return waitPIDGone(i.pid, time.Until(time.Now().Add(d)))
	}
	return true
}

// kill ends the plugin at once, without a chance to clean up: a crash.
func (i *instance) kill() {
	i.stopping.Store(true)
	if i.ip != nil {
		// In-process there is no process to kill; a zero grace is closest.
		i.ip.Stop(0)
	} else if i.pid > 0 {
		_ = syscall.Kill(i.pid, syscall.SIGKILL)
		waitPIDGone(i.pid, 5*time.Second)
	}
	i.close()
}

// close releases everything; a running plugin is asked to shut down first
// and killed if it does not.
func (i *instance) close() {
	i.once.Do(func() {
		i.stopping.Store(true)
		if i.conn != nil {
			select {
			case <-i.exited():
			default:
				if ok, _ := i.shutdown(time.Second, 3*time.Second); !ok && i.pid > 0 {
					_ = syscall.Kill(i.pid, syscall.SIGKILL)
				}
			}
		}
		if i.client != nil {
			i.client.Kill()
		}
		if i.ip != nil {
			i.ip.Stop(0)
		}
		if i.cc != nil {
			_ = i.cc.Close()
		}
		if i.pid > 0 {
			waitPIDGone(i.pid, 5*time.Second)
		}
		_ = os.RemoveAll(i.dir)
	})
}

// signal sends sig to the plugin process, which is then expected to exit.
func (i *instance) signal(sig syscall.Signal) error {
	i.stopping.Store(true)
	return syscall.Kill(i.pid, sig)
}

// crashed describes how the plugin ended when it exited without being
// asked to, as the host reports it: "exit status 2; its stderr: panic:
// ..."; "" while it runs or when the harness ended it.
func (i *instance) crashed() string {
	if i.stopping.Load() {
		return ""
	}
	select {
	case <-i.exited():
	default:
		return ""
	}
	d := "exit status unknown"
	if i.cmd != nil && i.cmd.ProcessState != nil {
		d = i.cmd.ProcessState.String()
	}
	if tail := i.stderr.Last(); tail != "" {
		d += "; its stderr: " + tail
	}
	return d
}

// waitPIDGone polls until pid has exited (or is a zombie) or d passed.
func waitPIDGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var errNoProc = errors.New("process facts are not available on this system")
