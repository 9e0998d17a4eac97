// Command unyo-action-exec is the bundled action plugin that runs a
// configured command with the event or alert JSON on its stdin. Each stdout
// line becomes a progress message. Exit 0 is SUCCEEDED, 75 (EX_TEMPFAIL) is
// RETRYABLE, anything else FAILED. The command runs in its own process
// group, which is killed on cancel, timeout or plugin death.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	version = "1.0.0"
	// exTempFail is sysexits' "try again later".
	exTempFail = 75
	// maxTail bounds the output quoted in an outcome.
	maxTail = 4 << 10
)

// Config is plugin-wide: the command every action runs.
type Config struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
}

// Params come from the EventRule.
type Params struct {
	// Args are appended to the configured command.
	Args []string `json:"args,omitempty"`
}

type execAction struct {
	mu  sync.Mutex
	cfg Config
}

func (*execAction) Info() sdk.Info {
	return sdk.Info{Name: "exec", Version: version, Description: "runs a command with the event JSON on stdin"}
}

func (*execAction) ConfigSchema() string {
	return `{"type":"object","required":["command"],"additionalProperties":false,"properties":{` +
		`"command":{"type":"array","items":{"type":"string"},"minItems":1},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"}},"dir":{"type":"string"}}}`
}

func (a *execAction) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return sdk.Invalid("command", "is required: the program and its arguments")
	}
	if _, err := exec.LookPath(cfg.Command[0]); err != nil {
		return sdk.Invalid("command", "cannot run %s: %v", cfg.Command[0], err)
	}
	a.mu.Lock()
	a.cfg = cfg
	a.mu.Unlock()
	return nil
}

func (*execAction) Probe(context.Context) (bool, string) { return true, "" }

func (a *execAction) Execute(ctx context.Context, req sdk.ActionRequest, progress func(string)) sdk.Outcome {
	var p Params
	if err := sdk.Decode(req.Params, &p); err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
	}
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	argv := append(append([]string{}, cfg.Command...), p.Args...)
	if req.DryRun {
		return sdk.Outcome{Status: sdk.Succeeded, Message: fmt.Sprintf("dry run: would run %q with %d bytes on stdin", argv, len(req.Payload))}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Stdin = bytes.NewReader(req.Payload)
	// The plugin's own environment is already reduced by the host; the
	// handshake's variables (UNYO_PLUGIN_*, PLUGIN_*) are not the command's.
	cmd.Env = append(procenv.WithoutUnyo(cmd.Environ()), "UNYO_IDEMPOTENCY_KEY="+req.Key)
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Own group so that the whole tree can be killed; Pdeathsig so that it
	// dies with the plugin even when the plugin is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
	}
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: fmt.Sprintf("cannot start %s: %v", argv[0], err)}
	}
	pgid := cmd.Process.Pid
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	var out tail
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		out.Write([]byte(line + "\n"))
		progress(line)
	}
	err = cmd.Wait()
	stop()
	// Children left in the group must not outlive the action.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	msg := strings.TrimSpace(out.String())
	if e := strings.TrimSpace(stderr.String()); e != "" {
		msg = strings.TrimSpace(msg + "\n" + e)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return sdk.Outcome{Status: sdk.Succeeded, Message: msg}
	case ctx.Err() != nil:
		return sdk.Outcome{Status: sdk.Cancelled, Message: msg} // the SDK says cancelled or timed out
	case errors.As(err, &ee) && ee.ExitCode() == exTempFail:
		return sdk.Outcome{Status: sdk.Retryable, Message: msg, RetryAfter: time.Minute}
	}
	return sdk.Outcome{Status: sdk.Failed, Message: strings.TrimSpace(fmt.Sprintf("%s: %v\n%s", argv[0], err, msg))}
}

// tail keeps the last maxTail bytes written.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > maxTail {
		t.b = t.b[len(t.b)-maxTail:]
	}
	return len(p), nil
}

func (t *tail) String() string { t.mu.Lock(); defer t.mu.Unlock(); return string(t.b) }

func main() { sdk.Serve(&execAction{}) }
