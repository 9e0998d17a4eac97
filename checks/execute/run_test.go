package execute

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/unyo-ops/unyo/core/procenv"
	"github.com/unyo-ops/unyo/core/procstat"
	"github.com/unyo-ops/unyo/core/testutil"
)

const pluginDir = "/usr/lib/nagios/plugins"

func fixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func plugin(t *testing.T, name string) string {
	t.Helper()
	return testutil.NeedTool(t, name, "apt-get install -y monitoring-plugins-basic", filepath.Join(pluginDir, name))
}

// pids parses the "leader child" line the fixtures print first.
func pids(t *testing.T, output string) (leader, child int) {
	t.Helper()
	line, _, _ := strings.Cut(output, "\n")
	if _, err := fmt.Sscanf(line, "%d %d", &leader, &child); err != nil {
		t.Fatalf("output %q does not start with two pids: %v", output, err)
	}
	return leader, child
}

// requireGone polls until none of the pids runs. SIGKILL is asynchronous, so
// a killed process may take a moment to finish exiting.
func requireGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for procstat.Alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// killOnCleanup ends a process a test deliberately let escape.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	dummy := plugin(t, "check_dummy")
	tests := []struct {
		name   string
		path   string
		args   []string
		code   int
		output string
	}{
		{"dummy ok", dummy, []string{"0", "all good"}, 0, "OK: all good\n"},
		{"dummy warning", dummy, []string{"1", "getting full"}, 1, "WARNING: getting full\n"},
		{"dummy critical", dummy, []string{"2", "full"}, 2, "CRITICAL: full\n"},
		{"dummy unknown", dummy, []string{"3", "what"}, 3, "UNKNOWN: what\n"},
		{"script exit 4", fixture(t, "exit.sh"), []string{"4"}, 4, "exit 4\n"},
		{"script exit 127", fixture(t, "missing_command.sh"), nil, 127, "not found\n"}, // dash and bash word it differently
		{"stderr when stdout is empty", fixture(t, "stderr_only.sh"), nil, 2, "problem on stderr\n"},
		{"invalid UTF-8", fixture(t, "invalid_utf8.sh"), nil, 0, "bad \uFFFD bytes\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Run(t.Context(), Command{Path: tt.path, Args: tt.args, Timeout: 30 * time.Second})
			if res.Err != nil {
				t.Fatalf("Err = %v", res.Err)
			}
			if res.ExitCode != tt.code || res.TimedOut || res.Truncated {
				t.Errorf("ExitCode, TimedOut, Truncated = %d, %v, %v; want %d, false, false", res.ExitCode, res.TimedOut, res.Truncated, tt.code)
			}
			if !strings.HasSuffix(res.Output, tt.output) {
				t.Errorf("Output = %q, want it to end with %q", res.Output, tt.output)
			}
			if res.Started.IsZero() || res.Duration <= 0 {
				t.Errorf("Started, Duration = %v, %v", res.Started, res.Duration)
			}
		})
	}
}

func TestRunCheckLoad(t *testing.T) {
	t.Parallel()
	res := Run(t.Context(), Command{
		Path:    plugin(t, "check_load"),
		Args:    []string{"-w", "1000,1000,1000", "-c", "2000,2000,2000"},
		Timeout: 30 * time.Second,
	})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("ExitCode, Err = %d, %v; output %q", res.ExitCode, res.Err, res.Output)
	}
	if !strings.HasPrefix(res.Output, "LOAD OK") || !strings.Contains(res.Output, "|load1=") {
		t.Errorf("Output = %q, want LOAD OK with perfdata", res.Output)
	}
}

func TestRunTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	res := Run(t.Context(), Command{Path: fixture(t, "hang.sh"), Timeout: timeout})
	leader, child := pids(t, res.Output)
	if !res.TimedOut || !errors.Is(res.Err, ErrTimedOut) || res.ExitCode != -1 {
		t.Fatalf("TimedOut, ExitCode, Err = %v, %d, %v; want a timeout", res.TimedOut, res.ExitCode, res.Err)
	}
	if want := "timed out after 1s; the process group was killed"; res.Err.Error() != want {
		t.Errorf("Err = %q, want %q", res.Err, want)
	}
	if res.Duration < timeout || res.Duration > timeout+killGrace {
		t.Errorf("Duration = %v, want about %v", res.Duration, timeout)
	}
	requireGone(t, leader, child)
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Result, 1)
	go func() {
		done <- Run(ctx, Command{Path: fixture(t, "hang.sh"), Args: []string{pidfile}, Timeout: time.Minute})
	}()
	// Cancel only once the plugin is running, as the pid file shows.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(pidfile)
		if strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	res := <-done
	if res.TimedOut || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("TimedOut, Err = %v, %v; want cancelled", res.TimedOut, res.Err)
	}
	leader, child := pids(t, res.Output)
	requireGone(t, leader, child)
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := Run(ctx, Command{Path: fixture(t, "exit.sh"), Args: []string{"0"}})
	if !errors.Is(res.Err, context.Canceled) || !res.Started.IsZero() {
		t.Errorf("Err, Started = %v, %v; want not started", res.Err, res.Started)
	}
}

func TestRunParentDeadlineIsNotTimedOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	res := Run(ctx, Command{Path: fixture(t, "hang.sh"), Timeout: time.Minute})
	if res.TimedOut || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("TimedOut, Err = %v, %v; want a cancellation, not the check's timeout", res.TimedOut, res.Err)
	}
	if res.Output != "" { // empty only if cancelled before the shell printed
		leader, child := pids(t, res.Output)
		requireGone(t, leader, child)
	}
}

func TestRunLeavesNoChildren(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"background.sh", "background_detached.sh"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := Run(t.Context(), Command{Path: fixture(t, name), Timeout: time.Minute})
			if res.Err != nil || res.ExitCode != 0 || res.TimedOut {
				t.Fatalf("ExitCode, TimedOut, Err = %d, %v, %v", res.ExitCode, res.TimedOut, res.Err)
			}
			// The leader exits at once; Run must not wait for the child.
			if res.Duration > 10*time.Second {
				t.Errorf("Duration = %v", res.Duration)
			}
			leader, child := pids(t, res.Output)
			requireGone(t, leader, child)
		})
	}
}

// A child that leaves the process group cannot be killed with it, but Run
// still returns soon after the leader exits.
func TestRunDoesNotWaitForEscapedChild(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res := Run(t.Context(), Command{Path: fixture(t, "escape.sh"), Timeout: time.Minute})
	elapsed := time.Since(start)
	_, child := pids(t, res.Output)
	killOnCleanup(t, child)
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("ExitCode, Err = %d, %v", res.ExitCode, res.Err)
	}
	if elapsed > pipeGrace+5*time.Second {
		t.Errorf("Run took %v with an escaped child holding stdout", elapsed)
	}
	if !procstat.Alive(child) {
		t.Errorf("child %d did not escape the group, so this test proves nothing", child)
	}
}

func TestRunTruncates(t *testing.T) {
	t.Parallel()
	res := Run(t.Context(), Command{Path: fixture(t, "big_output.sh"), Timeout: time.Minute})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("ExitCode, Err = %d, %v", res.ExitCode, res.Err)
	}
	if !res.Truncated || len(res.Output) != DefaultMaxOutput || strings.Trim(res.Output, "x") != "" {
		t.Errorf("Truncated = %v, len(Output) = %d; want true, %d bytes of x", res.Truncated, len(res.Output), DefaultMaxOutput)
	}
}

func TestRunTruncatesOnCharacterBoundary(t *testing.T) {
	t.Parallel()
	res := Run(t.Context(), Command{Path: fixture(t, "multibyte.sh"), MaxOutput: 5, Timeout: time.Minute})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Output != "éé" || !res.Truncated {
		t.Errorf("Output, Truncated = %q, %v; want \"éé\", true", res.Output, res.Truncated)
	}
}

func TestCleanOutput(t *testing.T) {
	tests := []struct {
		in        string
		truncated bool
		max       int
		want      string
		wantTrunc bool
	}{
		{"plain", false, 10, "plain", false},
		{"a\xffb", false, 10, "a\uFFFDb", false},
		{"\xff\xfe", false, 10, "\uFFFD", false},
		// Replacements grow the text past the cap: cut again, whole runes only.
		{"\xffa\xffa\xffa", false, 6, "\uFFFDa", true},
		// A rune cut in two by the cap is dropped rather than replaced.
		{"ab\xe2\x82", true, 4, "ab", true},
		{"ab\xe2\x82\xac", true, 5, "ab€", true},
	}
	for _, tt := range tests {
		got, trunc := cleanOutput([]byte(tt.in), tt.truncated, tt.max)
		if got != tt.want || trunc != tt.wantTrunc || !utf8.ValidString(got) || len(got) > tt.max {
			t.Errorf("cleanOutput(%q, %v, %d) = %q, %v; want %q, %v", tt.in, tt.truncated, tt.max, got, trunc, tt.want, tt.wantTrunc)
		}
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cmd      Command
		is       error
		contains string
	}{
		{"not found", Command{Path: "no_such_plugin_for_unyo"}, ErrNotFound, `"no_such_plugin_for_unyo" is not in $PATH`},
		{"missing path", Command{Path: "/nonexistent/check_x"}, ErrNotFound, "/nonexistent/check_x does not exist"},
		{"not executable", Command{Path: fixture(t, "not_executable.sh")}, ErrNotExecutable, "; add the execute bit (chmod +x)"},
		{"directory", Command{Path: fixture(t, ".")}, ErrNotExecutable, "is a directory"},
		{"no #! line", Command{Path: fixture(t, "no_shebang")}, syscall.ENOEXEC, "a script needs a #! line"},
		{"bad working directory", Command{Path: "/bin/true", Dir: "/nonexistent"}, os.ErrNotExist, "cannot use working directory"},
		{"killed by a signal", Command{Path: fixture(t, "kill_self.sh")}, nil, "was killed by signal 9 (killed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Run(t.Context(), tt.cmd)
			if res.Err == nil {
				t.Fatalf("no error; ExitCode %d, output %q", res.ExitCode, res.Output)
			}
			if tt.is != nil && !errors.Is(res.Err, tt.is) {
				t.Errorf("Err = %v, want one wrapping %v", res.Err, tt.is)
			}
			if !strings.Contains(res.Err.Error(), tt.contains) {
				t.Errorf("Err = %q, want it to contain %q", res.Err, tt.contains)
			}
			if res.ExitCode != -1 || res.TimedOut {
				t.Errorf("ExitCode, TimedOut = %d, %v; want -1, false", res.ExitCode, res.TimedOut)
			}
		})
	}
}

func TestRunEnvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := Run(t.Context(), Command{
		Path:    fixture(t, "env.sh"),
		Env:     Environ([]string{"PATH=/usr/bin:/bin", "UNYO_TEST_VAR=base"}, map[string]string{"UNYO_TEST_VAR": "from spec"}),
		Dir:     dir,
		Timeout: time.Minute,
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := "from spec " + dir + "\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
}

func TestEnviron(t *testing.T) {
	got := Environ([]string{"A=1", "B=2", "C=3"}, map[string]string{"C": "x", "B": "y", "D": ""})
	want := []string{"A=1", "B=y", "C=x", "D="}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	testdata := fixture(t, "")
	// A plugin directory wins over $PATH.
	shadow := t.TempDir()
	if err := os.WriteFile(filepath.Join(shadow, "true"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dirs []string
		want string
		is   error
	}{
		{"check_dummy", DefaultDirs(), plugin(t, "check_dummy"), nil},
		{"exit.sh", []string{"/nonexistent", testdata}, filepath.Join(testdata, "exit.sh"), nil},
		{"true", []string{shadow}, filepath.Join(shadow, "true"), nil},
		{"sh", []string{testdata}, "", nil}, // from $PATH
		{fixture(t, "exit.sh"), nil, fixture(t, "exit.sh"), nil},
		{"not_executable.sh", []string{testdata}, "", ErrNotExecutable},
		{"no_such_plugin_for_unyo", []string{testdata}, "", ErrNotFound},
		{"", nil, "", ErrNotFound},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.name, tt.dirs)
		switch {
		case tt.is != nil:
			if !errors.Is(err, tt.is) {
				t.Errorf("Resolve(%q) = %q, %v; want an error wrapping %v", tt.name, got, err, tt.is)
			}
		case err != nil:
			t.Errorf("Resolve(%q): %v", tt.name, err)
		case tt.want != "" && got != tt.want:
			t.Errorf("Resolve(%q) = %q, want %q", tt.name, got, tt.want)
		case !filepath.IsAbs(got):
			t.Errorf("Resolve(%q) = %q, want an absolute path", tt.name, got)
		}
	}
	_, err := Resolve("no_such_plugin_for_unyo", []string{"/a", "/b"})
	if want := `command not found: "no_such_plugin_for_unyo" is not in /a, /b or $PATH`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

// A process stuck in the kernel survives SIGKILL until its I/O completes;
// Run must return anyway and reap it later.
func TestRunStuckProcess(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := runner{
		// The real process dies at once; holding back the news of its exit
		// is what a stuck one looks like from here.
		waitExit:  func(pid int, exit *os.File) error { <-release; return waitExit(pid, exit) },
		killGrace: 100 * time.Millisecond,
		pipeGrace: pipeGrace,
	}
	res := r.run(t.Context(), Command{Path: fixture(t, "hang.sh"), Timeout: 200 * time.Millisecond})
	if !res.TimedOut || !errors.Is(res.Err, ErrTimedOut) || !strings.Contains(res.Err.Error(), "did not exit within 100ms of SIGKILL") {
		t.Fatalf("TimedOut, Err = %v, %v", res.TimedOut, res.Err)
	}
	leader, child := pids(t, res.Output)
	close(release)
	requireGone(t, child)
	// Reaped by Run's goroutine, not merely a zombie.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(leader)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %d was not reaped", leader)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The agent's environment holds its token (UNYO_AGENT_TOKEN): a check that
// prints its environment must not see it, nor anything else not declared.
func TestRunDoesNotInheritTheAgentsEnvironment(t *testing.T) {
	t.Setenv("UNYO_AGENT_TOKEN", "agent-secret")
	t.Setenv("SOME_SECRET", "other-secret")
	t.Setenv("HTTPS_PROXY", "http://proxy.example.com:3128")
	tests := []struct {
		name     string
		env      []string
		want     []string
		dontWant []string
	}{
		{"nil Env", nil, []string{"PATH="}, []string{"UNYO_", "agent-secret", "SOME_SECRET", "HTTPS_PROXY"}},
		{"declared and spec.env", Environ(procenv.Inherit(os.Environ(), []string{"HTTPS_PROXY", "UNYO_AGENT_TOKEN"}), map[string]string{"FROM_SPEC": "1"}),
			[]string{"PATH=", "HTTPS_PROXY=http://proxy.example.com:3128", "FROM_SPEC=1"}, []string{"UNYO_", "agent-secret", "SOME_SECRET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Run(t.Context(), Command{Path: "env", Env: tt.env, Timeout: time.Minute})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Output, w) {
					t.Errorf("output lacks %q:\n%s", w, res.Output)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(res.Output, w) {
					t.Errorf("output has %q:\n%s", w, res.Output)
				}
			}
		})
	}
}

// A run waits for its plugin's exit on the runtime's poller (the leader's
// pidfd), not in a thread blocked in waitid: many checks running at once
// must not each hold an OS thread of the agent.
func TestRunDoesNotHoldAThreadPerRun(t *testing.T) {
	const runs = 40
	before := threads(t)
	var wg sync.WaitGroup
	peak := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		p := 0
		for {
			select {
			case <-stop:
				peak <- p
				return
			case <-time.After(20 * time.Millisecond):
				p = max(p, threads(t))
			}
		}
	}()
	for range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := Run(t.Context(), Command{Path: "/bin/sleep", Args: []string{"1"}}); res.Err != nil {
				t.Error(res.Err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if grown := <-peak - before; grown >= runs/2 {
		t.Errorf("%d runs at once added %d threads; want far fewer than one each", runs, grown)
	}
}

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads: in /proc/self/status")
	return 0
}
