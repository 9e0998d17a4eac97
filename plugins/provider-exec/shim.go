package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// shimArg is the first argument that makes the binary start a shim;
	// shimRunArg makes it the shim.
	shimArg    = "shim"
	shimRunArg = "shim-run"
	// envShim must be set too, so that a stray "shim" argument typed by
	// hand does not start anything.
	envShim = "UNYO_PROVIDER_EXEC_SHIM"
	// EnvAddress carries the resource's IPAM address to the command.
	EnvAddress = "UNYO_ADDRESS"
)

// shimMain runs the shim modes; ok is false for a normal plugin start.
func shimMain() (code int, ok bool) {
	if len(os.Args) != 3 || os.Getenv(envShim) != "1" {
		return 0, false
	}
	switch os.Args[1] {
	case shimArg:
		return launchShim(os.Args[2]), true
	case shimRunArg:
		return runShim(os.Args[2]), true
	}
	return 0, false
}

// launchShim starts the shim in a new session, handing it our stdout (the
// plugin's report pipe), and exits without waiting: the shim is then
// nobody's child but init's, and the plugin keeps no children.
func launchShim(dir string) int {
	self, err := os.Executable()
	if err == nil {
		cmd := exec.Command(self, shimRunArg, dir)
		cmd.Stdout = os.Stdout
		// A new session: nothing aimed at the plugin's process group or
		// terminal reaches the shim or the command.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err = cmd.Start(); err == nil {
			return 0
		}
	}
	b, _ := json.Marshal(map[string]string{"error": "cannot start the shim: " + err.Error()})
	_, _ = os.Stdout.Write(append(b, '\n'))
	return 1
}

// runShim starts the resource's command, reports its pid (or why it could
// not start) as one JSON line on stdout, records it in pid.json, waits for
// it and records how it ended in exit.json. It runs in its own session and
// ignores the signals a terminal or a dying plugin would send, so the
// command's exit is recorded even when nobody is watching.
func runShim(dir string) int {
	// Caught, not ignored: ignored signals stay ignored across exec, and
	// the command must still die of SIGTERM.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	go func() {
		for range sigs {
		}
	}()
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(filepath.Join(dir, "shim.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
			f.Close()
		}
	}
	report := func(v map[string]any) {
		b, _ := json.Marshal(v)
		_, _ = os.Stdout.Write(append(b, '\n'))
		_ = os.Stdout.Close()
	}
	fail := func(err error) int {
		logf("cannot start: %v", err)
		report(map[string]any{"error": err.Error()})
		return 1
	}
	var rec record
	if err := readJSON(filepath.Join(dir, "resource.json"), &rec); err != nil {
		return fail(err)
	}
	rc, err := parseResource(rec.Config)
	if err != nil {
		return fail(err)
	}
	stdout, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(rc.Command[0], rc.Command[1:]...)
	env := rc.Env
	if rc.Address != "" {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env[EnvAddress] = rc.Address
	}
	cmd.Dir, cmd.Env = rc.Dir, copyEnv(env)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that Delete can stop it with everything
	// it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := startIn(cmd, rc.Netns); err != nil {
		return fail(err)
	}
	stdout.Close()
	stderr.Close()
	pid := cmd.Process.Pid
	pf := pidFile{ShimPID: os.Getpid(), PID: pid, StartTicks: startTicks(pid)}
	if err := writeJSON(filepath.Join(dir, "pid.json"), pf); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fail(err)
	}
	logf("started pid %d", pid)
	report(map[string]any{"pid": pid})

	err = cmd.Wait()
	ex := exitFile{At: time.Now().UTC()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Signal = ws.Signal().String()
			ex.Code = -1
		} else {
			ex.Code = ee.ExitCode()
		}
	} else if err != nil {
		ex.Code = -1
		logf("wait: %v", err)
	}
	if err := writeJSON(filepath.Join(dir, "exit.json"), ex); err != nil {
		logf("cannot record the exit: %v", err)
		return 1
	}
	logf("pid %d ended: code %d signal %q", pid, ex.Code, ex.Signal)
	return 0
}

// isPluginEnv says whether an environment entry belongs to the plugin
// protocol (go-plugin's and unyo's), which the command must not inherit.
func isPluginEnv(kv string) bool {
	for _, p := range []string{"PLUGIN_", "UNYO_PLUGIN_", envShim + "="} {
		if len(kv) >= len(p) && kv[:len(p)] == p {
			return true
		}
	}
	return false
}

// startIn starts cmd in the network namespace at path (none: the shim's).
// The child is forked from this locked thread, which joined the namespace
// first, so it starts in it; the thread is never unlocked, so the runtime
// retires it rather than reuse it.
func startIn(cmd *exec.Cmd, path string) error {
	if path == "" {
		return cmd.Start()
	}
	runtime.LockOSThread()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join network namespace %s: %w", path, err)
	}
	return cmd.Start()
}
