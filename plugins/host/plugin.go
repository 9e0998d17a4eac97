package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/plugins/base"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

// State is where a plugin is in its life.
type State string

const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	// StateDegraded: running, but its Probe says it cannot work now.
	StateDegraded State = "degraded"
	// StateBackoff: crashed or failed to start; waiting to restart.
	StateBackoff State = "backoff"
	// StateFailed: refused (checksum, version, config) or crash-looping;
	// not restarted until Reset.
	StateFailed  State = "failed"
	StateStopped State = "stopped"
)

// ErrUnavailable is wrapped by every error of a call that could not reach
// the plugin: not running, or exited during the call.
var ErrUnavailable = errors.New("plugin unavailable")

// Status is a plugin's state for operators.
type Status struct {
	Kind, Name string
	Path       string
	Version    string
	APIVersion uint32
	State      State
	// Restarts counts restarts after a crash or failed start.
	Restarts  int
	LastError string
	PID       int
	Since     time.Time
}

// StateChange is reported through Config.OnStateChange.
type StateChange struct {
	Plugin   string // kind/name
	From, To State
	// Err is why, for backoff, degraded and failed.
	Err      error
	Restarts int
	At       time.Time
}

// Health judges a state change the way a check result is judged, so that
// the core can raise it as an event: status is a Nagios exit status (0 OK
// while running, 1 WARNING while degraded or restarting, 2 CRITICAL when it
// failed for good), what describes the new state. ok is false for states
// that are not worth an event (starting, stopping).
func (sc StateChange) Health() (status int, what string, ok bool) {
	switch sc.To {
	case StateRunning:
		return 0, "is running", true
	case StateDegraded:
		return 1, "is degraded (running, but its probe says it cannot work now)", true
	case StateBackoff:
		return 1, fmt.Sprintf("stopped or failed to start and is being restarted (restarts so far: %d)", sc.Restarts), true
	case StateFailed:
		return 2, "failed and is not restarted (refused, or crash-looping)", true
	}
	return 0, "", false
}

// Plugin is one supervised plugin.
type Plugin struct {
	h          *Host
	cfg        PluginConfig
	id         string
	path       string
	log        *slog.Logger
	firstStart chan struct{}
	firstOnce  sync.Once

	mu       sync.Mutex
	status   Status
	inst     *instance
	notifyMu sync.Mutex
	// probeNow asks the supervisor for a health probe now (see suspect).
	probeNow chan struct{}
}

type instance struct {
	client *plugin.Client
	cmd    *exec.Cmd
	conn   *base.Conn
	pid    int
	dir    string
	// stderr keeps the end of what the process wrote outside its logger
	// (a Go panic, say), to say why it died.
	stderr *StderrTail

	streamMu sync.Mutex
	stream   *checkStream
	noStream bool
}

// permanentError marks failures a restart cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func newPlugin(h *Host, pc PluginConfig) *Plugin {
	return &Plugin{
		h: h, cfg: pc, id: pc.ID(), log: h.log.With("plugin", pc.ID()),
		firstStart: make(chan struct{}), probeNow: make(chan struct{}, 1),
		status: Status{Kind: pc.Kind, Name: pc.Name, State: StateStopped, Since: time.Now()},
	}
}

// Status returns the plugin's current status.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.Path = p.path
	return s
}

func (p *Plugin) setState(to State, err error) {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	p.mu.Lock()
	from := p.status.State
	if err != nil {
		p.status.LastError = err.Error()
	}
	if from == to && err == nil {
		p.mu.Unlock()
		return
	}
	p.status.State, p.status.Since = to, time.Now()
	restarts := p.status.Restarts
	p.mu.Unlock()
	lvl := slog.LevelInfo
	if to == StateFailed || to == StateBackoff {
		lvl = slog.LevelError
	} else if to == StateDegraded {
		lvl = slog.LevelWarn
	}
	attrs := []any{"from", string(from), "to", string(to), "restarts", restarts}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	p.log.Log(context.Background(), lvl, "plugin state changed", attrs...)
	if f := p.h.cfg.OnStateChange; f != nil {
		f(StateChange{Plugin: p.id, From: from, To: to, Err: err, Restarts: restarts, At: time.Now()})
	}
}

// supervise keeps the plugin running until ctx ends or it is failed.
func (p *Plugin) supervise(ctx context.Context) {
	cfg := &p.h.cfg
	backoff := cfg.BackoffMin
	var crashes []time.Time
	// Start() waits for the first attempt's outcome, state included.
	started := func() { p.firstOnce.Do(func() { close(p.firstStart) }) }
	defer started()
	for {
		if ctx.Err() != nil {
			p.setState(StateStopped, nil)
			return
		}
		p.setState(StateStarting, nil)
		inst, err := p.start(ctx)
		if err == nil {
			p.mu.Lock()
			p.inst, p.status.PID = inst, inst.pid
			p.mu.Unlock()
			p.setState(StateRunning, nil)
			started()
			began := time.Now()
			err = p.monitor(ctx, inst)
			p.mu.Lock()
			p.inst, p.status.PID = nil, 0
			p.mu.Unlock()
			if ctx.Err() != nil {
				p.stop(inst)
				p.setState(StateStopped, nil)
				return
			}
			p.kill(inst)
			if time.Since(began) >= cfg.StableAfter {
				backoff, crashes = cfg.BackoffMin, nil
			}
		}
		if ctx.Err() != nil {
			p.setState(StateStopped, nil)
			return
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			p.setState(StateFailed, err)
			return
		}
		now := time.Now()
		crashes = append(crashes, now)
		for len(crashes) > 0 && now.Sub(crashes[0]) > cfg.CrashLoopWindow {
			crashes = crashes[1:]
		}
		p.mu.Lock()
		p.status.Restarts++
		p.mu.Unlock()
		if len(crashes) > cfg.CrashLoopLimit {
			p.setState(StateFailed, fmt.Errorf("plugin %s crash-looped (%d failures within %s), not restarting; last: %w", p.id, len(crashes), cfg.CrashLoopWindow, err))
			return
		}
		p.setState(StateBackoff, err)
		started()
		// Jitter (±20%) keeps plugins that died together from restarting
		// in lockstep.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, cfg.BackoffMax)
	}
}

// start launches the binary, negotiates the API version and configures it.
func (p *Plugin) start(ctx context.Context) (*instance, error) {
	cfg := &p.h.cfg
	// Checked on every start: the file may have been replaced since.
	if _, err := p.h.verify(p.path, p.cfg, p.log); err != nil {
		return nil, &permanentError{err}
	}
	dir, err := os.MkdirTemp(p.h.sockDir, "p")
	if err != nil {
		return nil, fmt.Errorf("plugin %s: cannot make its socket directory: %w", p.id, err)
	}
	cmd := exec.Command(p.path)
	cmd.Env = append(append(pluginEnv(p.h.cfg.PassEnv), p.cfg.Env...),
		plugin.EnvUnixSocketDir+"="+dir,
		base.EnvParentPID+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = sysProcAttr()
	stdio := &lineWriter{emit: func(l string) { p.log.Info(l, "stream", "stdio") }}
	tail := &StderrTail{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		Plugins:          base.ClientPluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newSlogLogger(p.log),
		StartTimeout:     cfg.StartTimeout,
		SkipHostEnv:      true,
		SyncStdout:       stdio,
		SyncStderr:       stdio,
		Stderr:           tail,
	})
	inst := &instance{client: client, cmd: cmd, dir: dir, stderr: tail}
	fail := func(err error) (*instance, error) {
		p.kill(inst)
		return nil, err
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(p.startError(err, inst))
	}
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}
	raw, err := rpc.Dispense(base.NamePlugin)
	if err != nil {
		return fail(fmt.Errorf("plugin %s: %w", p.id, err))
	}
	inst.conn = raw.(*base.Conn)

	cctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	info, err := inst.conn.Plugin.Info(cctx, &pluginv1.InfoRequest{HostApiVersions: base.SupportedAPIVersions(), HostVersion: cfg.HostVersion})
	if err != nil {
		return fail(fmt.Errorf("plugin %s did not answer Info: %w", p.id, err))
	}
	v, err := base.Negotiate(base.SupportedAPIVersions(), info.GetApiVersions())
	if err != nil {
		return fail(&permanentError{fmt.Errorf("plugin %s (version %s): %w", p.id, info.GetVersion(), err)})
	}
	if info.GetSelectedApiVersion() != v {
		return fail(&permanentError{fmt.Errorf("plugin %s chose API v%d but the host chose v%d from the same lists", p.id, info.GetSelectedApiVersion(), v)})
	}
	kind, _ := base.ParseKind(p.cfg.Kind)
	if !containsKind(info.GetKinds(), kind) {
		return fail(&permanentError{fmt.Errorf("plugin %s is configured as a %s plugin but its binary offers %v", p.id, p.cfg.Kind, info.GetKinds())})
	}
	conf, err := structpb.NewStruct(p.cfg.Config)
	if err != nil {
		return fail(&permanentError{fmt.Errorf("plugin %s: config cannot be sent: %w", p.id, err)})
	}
	if _, err := inst.conn.Plugin.Configure(cctx, &pluginv1.ConfigureRequest{Config: conf, ApiVersion: v}); err != nil {
		code := status.Code(err)
		err = fmt.Errorf("plugin %s rejected its configuration: %w", p.id, describeStatus(err))
		if code == codes.InvalidArgument || code == codes.FailedPrecondition {
			err = &permanentError{err}
		}
		return fail(err)
	}
	p.mu.Lock()
	p.status.Version, p.status.APIVersion = info.GetVersion(), v
	p.mu.Unlock()
	return inst, nil
}

// startError rewords a failed go-plugin start for an operator: go-plugin's
// messages span many lines and guess at causes (architecture, permissions)
// that the host can tell apart itself.
func (p *Plugin) startError(err error, inst *instance) error {
	p.log.Debug("plugin start failed", "error", err)
	// Whether and how the process ended; go-plugin reaps it.
	exited := ""
	for deadline := time.Now().Add(exitWait); ; time.Sleep(5 * time.Millisecond) {
		if inst.client.Exited() {
			exited = "exit status unknown"
			if ps := inst.cmd.ProcessState; ps != nil {
				exited = ps.String()
			}
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	msg := err.Error()
	why, _, _ := strings.Cut(msg, "\n")
	const unrecognized = "Unrecognized remote plugin message: "
	switch line, found := strings.CutPrefix(why, unrecognized); {
	case found && line != "":
		why = fmt.Sprintf("it wrote %q to stdout before its handshake (stdout carries the handshake)", line)
	case found && exited != "", msg == "plugin exited before we could connect":
		why = fmt.Sprintf("it exited before its handshake (%s)", exited)
	case found:
		why = "it closed stdout without a handshake"
	case msg == "timeout while waiting for plugin to start":
		why = fmt.Sprintf("no handshake within the start timeout (%s)", p.h.cfg.StartTimeout)
	}
	if tail := inst.stderr.Last(); tail != "" {
		why += "; its stderr: " + tail
	}
	return fmt.Errorf("plugin %s did not start: %s", p.id, why)
}

func containsKind(ks []pluginv1.Kind, k pluginv1.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// monitor returns when the plugin exits, fails its health checks, or ctx
// ends.
func (p *Plugin) monitor(ctx context.Context, inst *instance) error {
	cfg := &p.h.cfg
	t := time.NewTicker(cfg.HealthInterval)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-inst.conn.Done:
			return fmt.Errorf("plugin %s exited unexpectedly (%s)", p.id, exitDescription(inst))
		case <-t.C:
		case <-p.probeNow:
		}
		pctx, cancel := context.WithTimeout(ctx, cfg.HealthTimeout)
		resp, err := inst.conn.Plugin.Probe(pctx, &pluginv1.ProbeRequest{})
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			fails++
			if fails >= cfg.HealthFailures {
				return fmt.Errorf("plugin %s failed %d health checks in a row (hung?); last: %w", p.id, fails, err)
			}
			// Confirm a failing plugin quickly rather than one interval
			// per probe.
			p.suspect()
		case err == nil && !resp.GetReady():
			fails = 0
			p.setState(StateDegraded, fmt.Errorf("plugin %s is not ready: %s", p.id, resp.GetReason()))
		case err == nil:
			fails = 0
			if p.Status().State == StateDegraded {
				p.setState(StateRunning, nil)
			}
		}
	}
}

// exitDescription says how the process ended. go-plugin has reaped it by the
// time Done is closed, so ProcessState is set and safe to read.
func exitDescription(inst *instance) string {
	d := "exit status unknown"
	if ps := inst.cmd.ProcessState; ps != nil {
		d = ps.String()
	}
	if why := inst.stderr.Last(); why != "" {
		d += "; its stderr: " + why
	}
	return d
}

// suspect asks the supervisor to probe the plugin now: a call got no
// answer at all within its deadline, so the plugin may be hung, and
// waiting a whole health interval would let its checks time out for that
// long.
func (p *Plugin) suspect() {
	select {
	case p.probeNow <- struct{}{}:
	default:
	}
}

// stop asks the plugin to shut down within the grace, then makes sure.
func (p *Plugin) stop(inst *instance) {
	grace := p.h.cfg.ShutdownGrace
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	_, err := inst.conn.Plugin.Shutdown(ctx, &pluginv1.ShutdownRequest{Grace: durationpb.New(grace)})
	cancel()
	if err == nil {
		t := time.NewTimer(grace + 2*time.Second)
		select {
		case <-inst.conn.Done:
		case <-t.C:
			p.log.Warn("plugin did not exit after Shutdown; killing it", "grace", grace)
		}
		t.Stop()
	} else {
		p.log.Warn("plugin did not accept Shutdown; killing it", "error", err)
	}
	p.kill(inst)
}

// kill ends the process if it still runs and removes what it left behind.
// It SIGKILLs first: go-plugin's own Kill asks the plugin over gRPC to stop,
// which never returns from a hung (or SIGSTOPped) plugin.
func (p *Plugin) kill(inst *instance) {
	exited := false
	if inst.conn != nil {
		select {
		case <-inst.conn.Done:
			exited = true
		default:
		}
	}
	if !exited && inst.cmd.Process != nil {
		_ = inst.cmd.Process.Kill()
	}
	// Whatever the plugin started in its process group goes with it.
	if inst.cmd.Process != nil {
		killGroup(inst.cmd.Process.Pid)
	}
	inst.client.Kill()
	if err := os.RemoveAll(inst.dir); err != nil {
		p.log.Warn("cannot remove the plugin's socket directory", "dir", inst.dir, "error", err)
	}
}

// Do runs fn against the running plugin. ctx given to fn is cancelled if
// the plugin exits, so a call to a dead plugin fails at once; every error is
// wrapped with the plugin's name, and wraps ErrUnavailable when the plugin
// could not be reached.
func (p *Plugin) Do(ctx context.Context, fn func(ctx context.Context, c *base.Conn) error) error {
	return p.do(ctx, func(ctx context.Context, inst *instance) error { return fn(ctx, inst.conn) })
}

// exitWait is how long a call whose transport broke waits for the process
// to be reaped, so that its error can say how the plugin ended.
const exitWait = 200 * time.Millisecond

func (p *Plugin) do(ctx context.Context, fn func(ctx context.Context, inst *instance) error) error {
	p.mu.Lock()
	inst, st := p.inst, p.status
	p.mu.Unlock()
	if inst == nil {
		msg := fmt.Sprintf("plugin %s is %s", p.id, st.State)
		if st.LastError != "" {
			msg += " (last error: " + st.LastError + ")"
		}
		return fmt.Errorf("%s: %w", msg, ErrUnavailable)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-inst.conn.Done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := fn(ctx, inst)
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.Unavailable {
		t := time.NewTimer(exitWait)
		select {
		case <-inst.conn.Done:
		case <-t.C:
		}
		t.Stop()
	}
	select {
	case <-inst.conn.Done:
		return fmt.Errorf("plugin %s exited during the call (%s): %w", p.id, exitDescription(inst), errors.Join(ErrUnavailable, err))
	default:
	}
	if status.Code(err) == codes.Unavailable {
		return fmt.Errorf("plugin %s is unavailable: %w", p.id, errors.Join(ErrUnavailable, err))
	}
	return fmt.Errorf("plugin %s: %w", p.id, err)
}

// Started is closed once the plugin's first start has an outcome: it
// runs, or it failed (and may be in backoff). Callers that want to wait
// for this one plugin, not for every plugin of the Host, wait on it.
func (p *Plugin) Started() <-chan struct{} { return p.firstStart }

// PID is the plugin's current process id, 0 when not running.
func (p *Plugin) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status.PID
}

// Reset restarts a failed plugin's supervisor, with a fresh crash count.
func (p *Plugin) Reset(ctx context.Context) error {
	if st := p.Status().State; st != StateFailed {
		return fmt.Errorf("plugin %s is %s, not failed", p.id, st)
	}
	path, err := p.h.resolve(p.cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.path = path
	p.mu.Unlock()
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	if p.h.closed {
		return fmt.Errorf("plugin %s: host is closed", p.id)
	}
	p.h.wg.Add(1)
	go func() {
		defer p.h.wg.Done()
		p.supervise(p.h.ctx)
	}()
	return nil
}

// describeStatus keeps a gRPC error's message and field violations readable
// for an operator, and keeps the status for status.Code.
func describeStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				msg += fmt.Sprintf("; field %s: %s", v.GetField(), v.GetDescription())
			}
		}
	}
	return &statusError{msg: msg, st: st}
}

type statusError struct {
	msg string
	st  *status.Status
}

func (e *statusError) Error() string              { return e.msg }
func (e *statusError) GRPCStatus() *status.Status { return e.st }
