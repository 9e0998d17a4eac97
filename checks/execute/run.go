// Package execute runs one Nagios-style plugin safely: in its own process
// group, with a timeout that kills the whole group, bounded output, and no
// process left behind when Run returns.
package execute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/unyo-ops/unyo/core/procenv"
)

// DefaultMaxOutput is the output cap when Command.MaxOutput is unset.
const DefaultMaxOutput = 64 << 10

const (
	// killGrace is how long Run waits for a SIGKILLed leader to exit. Only a
	// process stuck in the kernel (uninterruptible I/O) takes longer.
	killGrace = 5 * time.Second
	// pipeGrace is how long Run waits for end-of-file after the whole group
	// is dead. Only a process that left the group (setsid) and kept the
	// output open takes longer; Run stops reading rather than wait for it.
	pipeGrace = time.Second
)

// Command is one plugin run.
type Command struct {
	// Path is the program: a path, or a bare name looked up in $PATH. Use
	// Resolve first to search the plugin directories.
	Path string
	// Args are the arguments after the program name (argv[1:]).
	Args []string
	// Env is the whole environment as "NAME=value". Nil does not inherit
	// the agent's environment, which holds its tokens: it gives only
	// procenv's base (PATH, HOME, the locale, TZ, TMPDIR). See Environ.
	Env []string
	// Dir is the working directory; empty means the agent's.
	Dir string
	// Timeout bounds the run; 0 means only ctx does.
	Timeout time.Duration
	// MaxOutput caps Result.Output in bytes; 0 means DefaultMaxOutput.
	MaxOutput int
}

// Result is what a run produced. A plugin's status is its exit code, so a
// non-zero ExitCode alone is not an error: Err is set only when there is no
// meaningful exit code (the program could not start, timed out, was
// cancelled or was killed by a signal), and its text is written for the
// operator who reads the check's output.
type Result struct {
	// ExitCode is the plugin's exit status, or -1 when Err is set.
	ExitCode int
	// Output is stdout or, when stdout is blank, stderr: at most MaxOutput
	// bytes of valid UTF-8 (invalid bytes become U+FFFD). When Truncated it
	// is a prefix of what the plugin wrote, cut at a character boundary and
	// with no marker added, so that a parser still sees the plugin's own
	// text; report truncation through the Truncated flag.
	Output    string
	Truncated bool
	// TimedOut means Command.Timeout elapsed and the group was killed; Err
	// then wraps ErrTimedOut.
	TimedOut bool
	Err      error
	Started  time.Time
	// Duration runs from start to the leader's exit.
	Duration time.Duration
}

// Run runs the command and waits for it. It returns within Timeout plus a
// few seconds' grace whatever the plugin does, and when it returns the
// plugin's process group is gone: the group is SIGKILLed on timeout or
// cancellation, and also after the leader exits, so that background
// children cannot linger or hold the output pipes open.
//
// The one thing Run cannot clean up is a process that leaves the group
// (setsid, or a daemon that double-forks); containing those takes a cgroup.
func Run(ctx context.Context, c Command) Result {
	r := runner{waitExit: waitExit, killGrace: killGrace, pipeGrace: pipeGrace}
	return r.run(ctx, c)
}

// runner holds what tests replace; Run builds a fresh one per call.
type runner struct {
	// waitExit returns once the leader has exited, without reaping it;
	// exit is its pidfd when the kernel gave one (nil otherwise).
	waitExit  func(pid int, exit *os.File) error
	killGrace time.Duration
	pipeGrace time.Duration
}

func (r runner) run(ctx context.Context, c Command) Result {
	res := Result{ExitCode: -1}
	maxOut := c.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	if err := ctx.Err(); err != nil {
		res.Err = fmt.Errorf("not started: %w", context.Cause(ctx))
		return res
	}

	path, err := lookup(c)
	if err != nil {
		res.Err = err
		return res
	}
	if c.Dir != "" {
		fi, err := os.Stat(c.Dir)
		if err != nil {
			res.Err = fmt.Errorf("cannot use working directory: %w", err)
			return res
		}
		if !fi.IsDir() {
			res.Err = fmt.Errorf("cannot use working directory %s: not a directory", c.Dir)
			return res
		}
	}

	// Our own pipes rather than exec's io.Writer copying: exec.Cmd.Wait
	// would wait for every holder of the pipe to exit before returning,
	// and Run needs to kill the group between the leader's exit and that.
	outR, outW, err := os.Pipe()
	if err != nil {
		res.Err = fmt.Errorf("cannot create the output pipe: %w", err)
		return res
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		res.Err = fmt.Errorf("cannot create the output pipe: %w", err)
		return res
	}

	env := c.Env
	if env == nil {
		env = procenv.Inherit(os.Environ(), nil)
	}
	// A pidfd of the leader lets the wait for its exit park on the
	// runtime's poller instead of holding a thread in waitid for the
	// whole run (see waitExit).
	pidfd := -1
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{c.Path}, c.Args...),
		Env:         env,
		Dir:         c.Dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd},
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, ErrTimedOut)
		defer cancel()
	}

	res.Started = time.Now()
	err = cmd.Start()
	// The child has its copies; ours must go or we never see end-of-file.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		res.Err = startError(path, err)
		return res
	}
	stdout := startCapture(outR, maxOut)
	stderr := startCapture(errR, maxOut)
	pid := cmd.Process.Pid // also the process group id

	// Wait for the leader to exit without reaping it: while it is a zombie
	// its pid, which is the group id, cannot be reused, so killing the
	// group cannot hit an unrelated process.
	exit := pollablePidfd(pidfd)
	exited := make(chan error, 1)
	go func() {
		exited <- r.waitExit(pid, exit)
		if exit != nil {
			exit.Close()
		}
	}()

	var waitErr error
	killed := false
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		killGroup(pid)
		killed = true
		grace := time.NewTimer(r.killGrace)
		select {
		case waitErr = <-exited:
			grace.Stop()
		case <-grace.C:
			// Leave the reaping to a goroutine rather than block the
			// caller for as long as the kernel holds the process.
			go func() {
				<-exited
				killGroup(pid)
				_ = cmd.Wait()
				drain(r.pipeGrace, stdout, stderr)
			}()
			res.Duration = time.Since(res.Started)
			res.Output, res.Truncated = pickOutput(stdout, stderr, maxOut)
			res.TimedOut = errors.Is(context.Cause(ctx), ErrTimedOut)
			res.Err = fmt.Errorf("%s did not exit within %s of SIGKILL (stuck in the kernel, as on a hung NFS mount); it is reaped when it exits: %w",
				c.Path, r.killGrace, stopReason(ctx, c.Timeout))
			return res
		}
	}
	res.Duration = time.Since(res.Started)
	// Children that outlive the leader are part of the check: end them.
	killGroup(pid)
	_ = cmd.Wait() // reaps; its error repeats what ProcessState says
	drain(r.pipeGrace, stdout, stderr)
	res.Output, res.Truncated = pickOutput(stdout, stderr, maxOut)

	st := cmd.ProcessState
	switch {
	case waitErr != nil:
		// Not expected on Linux; the group was killed early, so say so.
		res.Err = fmt.Errorf("cannot wait for %s, so it was killed: %w", c.Path, waitErr)
	case st == nil:
		res.Err = fmt.Errorf("%s: lost track of the process", c.Path)
	case st.Exited():
		// Exited on its own, even if the deadline passed at the same moment.
		res.ExitCode = st.ExitCode()
	case killed:
		res.TimedOut = errors.Is(context.Cause(ctx), ErrTimedOut)
		res.Err = stopReason(ctx, c.Timeout)
	default:
		res.Err = fmt.Errorf("%s was killed by %s", c.Path, signalName(st))
	}
	return res
}

func stopReason(ctx context.Context, timeout time.Duration) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrTimedOut) {
		return fmt.Errorf("%w after %s; the process group was killed", ErrTimedOut, timeout)
	}
	return fmt.Errorf("cancelled; the process group was killed: %w", context.Cause(ctx))
}

func signalName(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return st.String()
}

// lookup resolves c.Path the way exec would, but with Resolve's errors.
func lookup(c Command) (string, error) {
	if !strings.Contains(c.Path, "/") {
		return Resolve(c.Path, nil)
	}
	p := c.Path
	if !filepath.IsAbs(p) && c.Dir != "" {
		p = filepath.Join(c.Dir, p) // exec resolves relative paths from Dir
	}
	if err := checkExecutable(p); err != nil {
		return "", err
	}
	return c.Path, nil
}

func startError(path string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, syscall.ENOEXEC):
		hint = " (a script needs a #! line naming its interpreter)"
	case errors.Is(err, fs.ErrNotExist):
		hint = " (if it is a script, the interpreter on its #! line is missing)"
	case errors.Is(err, fs.ErrPermission):
		hint = " (check the execute bit, the directories on its path, and that its filesystem is not mounted noexec)"
	}
	return fmt.Errorf("cannot start %s: %w%s", path, err, hint)
}

func killGroup(pgid int) {
	// ESRCH just means the group is already gone.
	_ = unix.Kill(-pgid, unix.SIGKILL)
}

// pollablePidfd makes the leader's pidfd (-1: none) a file the runtime's
// poller watches; nil if it cannot be.
func pollablePidfd(fd int) *os.File {
	if fd < 0 {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	// A non-blocking descriptor is registered with the poller.
	return os.NewFile(uintptr(fd), "pidfd")
}

// waitExit returns once process pid has exited, leaving it unreaped. With
// its pidfd the goroutine parks on the runtime's poller (a pidfd becomes
// readable when its process exits); without, it blocks a thread in
// waitid. A check runs for milliseconds to seconds, and a thread blocked
// that long makes the scheduler hand its P to another thread and wake it:
// that hand-off, per run, was a good part of the agent's CPU per check.
func waitExit(pid int, exit *os.File) error {
	if exit != nil {
		if err, ok := pollExit(exit); ok {
			return err
		}
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// pollExit waits on the poller for the pidfd's process to exit; ok is
// false when the pidfd cannot be polled.
func pollExit(exit *os.File) (err error, ok bool) {
	rc, err := exit.SyscallConn()
	if err != nil {
		return nil, false
	}
	var werr error
	rerr := rc.Read(func(fd uintptr) bool {
		for {
			// Linux zeroes info when WNOHANG finds no exit yet.
			var info unix.Siginfo
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			switch {
			case werr == unix.EINTR:
				continue
			case werr == unix.EAGAIN:
				werr = nil
				return false
			case werr != nil:
				return true
			}
			return info.Signo != 0
		}
	})
	if rerr != nil || werr == unix.EINVAL {
		// Not pollable after all, or no waitid on a pidfd (kernels before
		// 5.4): the caller blocks instead.
		return nil, false
	}
	return werr, true
}

// capture reads one pipe to the end, keeping the first max bytes and
// discarding the rest, so a chatty plugin never blocks on a full pipe.
type capture struct {
	f    *os.File
	max  int
	done chan struct{}

	mu    sync.Mutex
	buf   []byte
	total int64
}

func startCapture(f *os.File, max int) *capture {
	c := &capture{f: f, max: max, done: make(chan struct{})}
	go c.read()
	return c
}

func (c *capture) read() {
	defer close(c.done)
	chunk := make([]byte, 32<<10)
	for {
		n, err := c.f.Read(chunk)
		if n > 0 {
			c.mu.Lock()
			if room := c.max - len(c.buf); room > 0 {
				c.buf = append(c.buf, chunk[:min(n, room)]...)
			}
			c.total += int64(n)
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// drain waits for end-of-file on every capture for at most grace in all,
// then stops reading.
func drain(grace time.Duration, cs ...*capture) {
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, c := range cs {
		select {
		case <-c.done:
		case <-t.C:
			for _, c := range cs {
				// A pipe from os.Pipe is pollable, so a deadline unblocks
				// the Read; Close is the fallback.
				if c.f.SetReadDeadline(time.Now()) != nil {
					c.f.Close()
				}
			}
			<-c.done
		}
	}
	for _, c := range cs {
		<-c.done
		c.f.Close()
	}
}

// snapshot returns what was kept and whether anything was dropped.
func (c *capture) snapshot() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf), c.total > int64(len(c.buf))
}

func pickOutput(stdout, stderr *capture, max int) (string, bool) {
	b, truncated := stdout.snapshot()
	if len(bytes.TrimSpace(b)) == 0 {
		if eb, et := stderr.snapshot(); len(eb) > 0 {
			b, truncated = eb, et
		}
	}
	return cleanOutput(b, truncated, max)
}

// cleanOutput makes output valid UTF-8 (protobuf strings must be) of at
// most max bytes.
func cleanOutput(b []byte, truncated bool, max int) (string, bool) {
	if truncated {
		b = trimPartialRune(b)
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	// Each replacement is 3 bytes, so cleaning can grow the text.
	if len(s) > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, truncated = s[:i], true
	}
	return s, truncated
}

// trimPartialRune drops a multi-byte character that the cap cut in two, so
// that it does not turn into U+FFFD.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
