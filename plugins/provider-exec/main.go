// Command unyo-provider-exec is the bundled minimal provider: each resource
// is a configured command run as a supervised local process (like Nomad's
// raw_exec). It exists so that the provider protocol, recovery and the
// conformance harness are exercised for real.
//
// The plugin does not parent the command itself: it re-executes its own
// binary as a small shim ("unyo-provider-exec shim DIR") in a new session.
// The shim starts the command, records its pid in the resource's state
// directory, waits for it and records its exit status there. So the command
// outlives the plugin (a plugin crash or upgrade does not touch it), and
// Get and Recover work from the state directory and the stored handle alone.
//
// State layout, one directory per resource under the configured state_dir:
//
//	resource.json  id, labels, config, created_at (written before starting)
//	pid.json       shim pid, command pid (= its process group), start time
//	exit.json      how the command ended (written by the shim)
//	stdout.log, stderr.log, shim.log
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/unyo-ops/unyo/core/atomicfile"
	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	version = "1.0.0"
	name    = "exec"
	// handleVersion is the layout of Handle.State; bump it when it changes
	// and keep reading the old one.
	handleVersion = 1
	// startTimeout bounds how long Create waits for the shim to report that
	// the command started.
	startTimeout = 10 * time.Second
	// shimExitWait is how long Delete waits for the shim to record the exit
	// after the command died, before killing the shim too.
	shimExitWait = 2 * time.Second
)

// Config is plugin-wide.
type Config struct {
	// StateDir holds one directory per resource. It must survive plugin
	// restarts (and should survive reboots only if stale state is wanted).
	StateDir string `json:"state_dir"`
}

// ResourceConfig is one resource: the command to run.
type ResourceConfig struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	// Address is the one IPAM allocated for the resource (the agent
	// passes the assignment's); the command sees it as UNYO_ADDRESS.
	Address string `json:"address,omitempty"`
	// Netns is a network namespace (a path: the port namespace the agent
	// made for the resource) the command runs in; empty: the plugin's.
	Netns string `json:"netns,omitempty"`
}

// record is resource.json.
type record struct {
	ID        string            `json:"id"`
	Labels    map[string]string `json:"labels,omitempty"`
	Config    map[string]any    `json:"config"`
	CreatedAt time.Time         `json:"created_at"`
}

// pidFile is pid.json, written by the shim once the command started.
type pidFile struct {
	ShimPID int `json:"shim_pid"`
	// PID is the command's pid, which is also its process group id.
	PID int `json:"pid"`
	// StartTicks is the command's start time in clock ticks since boot
	// (/proc/PID/stat field 22), so that a reused pid is not mistaken for
	// the command; 0 where unknown.
	StartTicks uint64 `json:"start_ticks,omitempty"`
}

// exitFile is exit.json, written by the shim when the command ended.
type exitFile struct {
	Code   int       `json:"code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
}

// handleState is Handle.State (version 1).
type handleState struct {
	Dir string `json:"dir"`
	pidFile
}

type execProvider struct {
	mu  sync.Mutex
	cfg Config
}

func (*execProvider) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: "runs a configured command as a supervised local process"}
}

func (*execProvider) ConfigSchema() string {
	return `{"type":"object","required":["state_dir"],"additionalProperties":false,` +
		`"properties":{"state_dir":{"type":"string","minLength":1}}}`
}

func (p *execProvider) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.StateDir == "" {
		return sdk.Invalid("state_dir", "is required: a directory that survives plugin restarts")
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return sdk.Invalid("state_dir", "must be an absolute path, not %q", cfg.StateDir)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return sdk.Invalid("state_dir", "cannot be created: %v", err)
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return nil
}

func (p *execProvider) Probe(context.Context) (bool, string) {
	dir := p.stateDir()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false, fmt.Sprintf("state directory %s is not usable: %v", dir, err)
	}
	return true, ""
}

func (*execProvider) ResourceType() string { return "process" }

func (*execProvider) ResourceSchema() string {
	return `{"type":"object","required":["command"],"additionalProperties":false,"properties":{` +
		`"command":{"type":"array","items":{"type":"string"},"minItems":1},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"}},"dir":{"type":"string"},"address":{"type":"string"},"netns":{"type":"string"}}}`
}

func parseResource(m map[string]any) (ResourceConfig, error) {
	var rc ResourceConfig
	if err := sdk.Decode(m, &rc); err != nil {
		return rc, err
	}
	if len(rc.Command) == 0 || rc.Command[0] == "" {
		return rc, sdk.Invalid("command", "is required: the program and its arguments")
	}
	return rc, nil
}

func (*execProvider) Validate(_ context.Context, config map[string]any) error {
	_, err := parseResource(config)
	return err
}

func (p *execProvider) stateDir() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.StateDir
}

// resourceDir maps an id to its directory. Ids are chosen by the core, so
// they are escaped rather than trusted as path elements.
func (p *execProvider) resourceDir(id string) (string, error) {
	if id == "" || id == "." || id == ".." {
		return "", sdk.Invalid("id", "%q cannot name a resource", id)
	}
	return filepath.Join(p.stateDir(), url.PathEscape(id)), nil
}

func (p *execProvider) Create(ctx context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	if _, err := parseResource(req.Config); err != nil {
		return sdk.Resource{}, err
	}
	dir, err := p.resourceDir(req.ID)
	if err != nil {
		return sdk.Resource{}, err
	}
	// The SDK called Get first and found nothing usable, so whatever is
	// here is the remains of a Create interrupted by a crash.
	if _, err := os.Stat(dir); err == nil {
		removeResource(dir, time.Second)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return sdk.Resource{}, fmt.Errorf("provider exec: cannot make the state directory of %s: %w", req.ID, err)
	}
	rec := record{ID: req.ID, Labels: req.Labels, Config: req.Config, CreatedAt: time.Now().UTC()}
	if err := writeJSON(filepath.Join(dir, "resource.json"), rec); err != nil {
		_ = os.RemoveAll(dir)
		return sdk.Resource{}, fmt.Errorf("provider exec: resource %s: %w", req.ID, err)
	}
	if err := p.startShim(ctx, dir); err != nil {
		// A failed Create leaves nothing behind: no process, no state.
		removeResource(dir, time.Second)
		return sdk.Resource{}, err
	}
	return p.Get(ctx, req.ID)
}

// startShim starts the shim for dir and waits for it to report that the
// command started (or why it could not). The process we start only starts
// the real shim in a new session and exits at once, so the plugin keeps no
// long-lived children: the shim belongs to init (or the nearest subreaper)
// from the start, as it would after a plugin crash anyway.
func (p *execProvider) startShim(ctx context.Context, dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("provider exec: cannot find its own binary to start the shim: %w", err)
	}
	cmd := exec.Command(self, shimArg, dir)
	cmd.Env = append(os.Environ(), envShim+"=1")
	// Our own pipe rather than StdoutPipe: cmd.Wait must not close the
	// read end before the shim's report has been read.
	out, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("provider exec: %w", err)
	}
	defer out.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("provider exec: cannot start the shim: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	type report struct {
		PID   int    `json:"pid"`
		Error string `json:"error"`
	}
	got := make(chan report, 1)
	go func() {
		var r report
		line, err := bufio.NewReader(out).ReadBytes('\n')
		if err != nil && len(line) == 0 {
			r.Error = "the shim exited without reporting"
		} else if err := json.Unmarshal(line, &r); err != nil {
			r.Error = fmt.Sprintf("the shim reported garbage: %q", line)
		}
		got <- r
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case r := <-got:
		<-exited // the launcher exits right after starting the shim
		if r.Error != "" {
			return sdk.Invalid("command", "cannot start: %s", r.Error)
		}
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("provider exec: the shim did not report within %s", startTimeout)
}

func (p *execProvider) Get(_ context.Context, id string) (sdk.Resource, error) {
	dir, err := p.resourceDir(id)
	if err != nil {
		return sdk.Resource{}, err
	}
	return readResource(dir)
}

// readResource builds the resource from its directory: the state comes from
// what the shim recorded and whether the recorded process still runs.
func readResource(dir string) (sdk.Resource, error) {
	var rec record
	if err := readJSON(filepath.Join(dir, "resource.json"), &rec); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return sdk.Resource{}, fmt.Errorf("provider exec: no resource in %s: %w", dir, sdk.ErrNotFound)
		}
		return sdk.Resource{}, fmt.Errorf("provider exec: %w", err)
	}
	r := sdk.Resource{ID: rec.ID, Labels: rec.Labels, Config: rec.Config, CreatedAt: rec.CreatedAt,
		Attributes: map[string]string{"stdout": filepath.Join(dir, "stdout.log"), "stderr": filepath.Join(dir, "stderr.log")}}
	var pf pidFile
	havePID := readJSON(filepath.Join(dir, "pid.json"), &pf) == nil
	hs := handleState{Dir: dir, pidFile: pf}
	r.Handle = sdk.NewHandle(handleVersion, hs)
	if havePID {
		r.Attributes["pid"] = strconv.Itoa(pf.PID)
	}
	var ex exitFile
	switch {
	case readJSON(filepath.Join(dir, "exit.json"), &ex) == nil:
		r.Attributes["exit_code"] = strconv.Itoa(ex.Code)
		switch {
		case ex.Signal != "":
			r.State, r.Reason = sdk.Broken, "killed by signal "+ex.Signal
		case ex.Code != 0:
			r.State, r.Reason = sdk.Broken, fmt.Sprintf("exited with status %d", ex.Code)
		default:
			r.State, r.Reason = sdk.Stopped, "exited with status 0"
		}
	case !havePID:
		r.State, r.Reason = sdk.Broken, "the command was never started (its Create was interrupted)"
	case alive(pf.PID, pf.StartTicks):
		r.State = sdk.Running
	case alive(pf.ShimPID, 0):
		// The command just ended and the shim is recording it.
		r.State, r.Reason = sdk.Running, "exiting"
	default:
		r.State, r.Reason = sdk.Broken, "the process vanished without an exit status (killed together with its shim, or the node restarted)"
	}
	return r, nil
}

func (p *execProvider) Delete(_ context.Context, id string, grace time.Duration) (bool, error) {
	dir, err := p.resourceDir(id)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	removeResource(dir, grace)
	if _, err := os.Stat(dir); err == nil {
		return true, fmt.Errorf("provider exec: cannot remove the state of %s in %s", id, dir)
	}
	return true, nil
}

// removeResource stops the command (SIGTERM to its group, SIGKILL after
// grace), makes sure the shim is gone too and removes the directory.
func removeResource(dir string, grace time.Duration) {
	var pf pidFile
	if readJSON(filepath.Join(dir, "pid.json"), &pf) == nil && pf.PID > 0 {
		if alive(pf.PID, pf.StartTicks) {
			_ = syscall.Kill(-pf.PID, syscall.SIGTERM)
			if !waitGone(pf.PID, pf.StartTicks, grace) {
				_ = syscall.Kill(-pf.PID, syscall.SIGKILL)
				waitGone(pf.PID, pf.StartTicks, grace)
			}
		}
		// Children the command left in its group must not outlive it.
		_ = syscall.Kill(-pf.PID, syscall.SIGKILL)
		if pf.ShimPID > 0 && !waitGone(pf.ShimPID, 0, shimExitWait) {
			_ = syscall.Kill(pf.ShimPID, syscall.SIGKILL)
			waitGone(pf.ShimPID, 0, shimExitWait)
		}
	}
	_ = os.RemoveAll(dir)
}

// waitGone polls until the process is gone or d passed; true if gone.
func waitGone(pid int, ticks uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(pid, ticks) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func (p *execProvider) List(_ context.Context, labels map[string]string) ([]sdk.Resource, error) {
	ents, err := os.ReadDir(p.stateDir())
	if err != nil {
		return nil, fmt.Errorf("provider exec: cannot list %s: %w", p.stateDir(), err)
	}
	var out []sdk.Resource
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		r, err := readResource(filepath.Join(p.stateDir(), e.Name()))
		if err != nil {
			continue // a Create in progress or a removed directory
		}
		match := true
		for k, v := range labels {
			if r.Labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (p *execProvider) Recover(_ context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	hs, err := sdk.ReadHandle(name, h, handleVersion, func(hs handleState) bool { return hs.Dir != "" })
	if err != nil {
		return sdk.Resource{}, err
	}
	r, err := readResource(hs.Dir)
	if err != nil {
		return sdk.Resource{}, err
	}
	if r.ID != id {
		return sdk.Resource{}, fmt.Errorf("provider exec: handle of %s points at resource %s: %w", id, r.ID, sdk.ErrBadHandle)
	}
	return r, nil
}

// Stats reports the command's CPU time and resident memory where /proc
// has them.
func (p *execProvider) Stats(ctx context.Context, id string) ([]sdk.Metric, error) {
	r, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State != sdk.Running {
		return nil, nil
	}
	pid, _ := strconv.Atoi(r.Attributes["pid"])
	return procStats(pid), nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// copyEnv gives the command the plugin's environment (which the host
// reduced; minus the plugin protocol's and any UNYO_* variables) plus the
// configured additions.
func copyEnv(extra map[string]string) []string {
	var env []string
	for _, kv := range procenv.WithoutUnyo(os.Environ()) {
		if !isPluginEnv(kv) {
			env = append(env, kv)
		}
	}
	keys := slicesSorted(extra)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

func slicesSorted(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func main() {
	if code, ok := shimMain(); ok {
		os.Exit(code)
	}
	sdk.Serve(&execProvider{})
}
