//go:build unix

package spool

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestFailpointAppendMid: with UNYO_FAILPOINT=spool-append-mid:3 the
// process dies by SIGKILL in its third write, leaving half a record, which
// the next Open truncates, naming the interrupted write.
func TestFailpointAppendMid(t *testing.T) {
	if dir := os.Getenv("SPOOL_FAILPOINT_CHILD_DIR"); dir != "" {
		s, err := Open(Options{Dir: dir, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := s.Append(rec(i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("the failpoint did not fire")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailpointAppendMid$")
	cmd.Env = append(os.Environ(), "SPOOL_FAILPOINT_CHILD_DIR="+dir, FailpointEnv+"=spool-append-mid:3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
	}
	log, logs := logBuffer()
	s := open(t, Options{Dir: dir, Logger: log})
	if st := s.Stats(); st.TruncatedBytes != (recordHeaderLen+100)/2 {
		t.Fatalf("stats: %+v", st)
	}
	if got := drain(t, s, 0, 0); !slices.Equal(got, seq(0, 2)) {
		t.Fatalf("got %v", got)
	}
	if !strings.Contains(logs.String(), "ended in the middle of writing") {
		t.Fatalf("log: %s", logs)
	}
}

func TestAppendFailpointParsing(t *testing.T) {
	for v, want := range map[string]int64{"": 0, "spool-append-mid": 1, "spool-append-mid:7": 7, "spool-append-mid:x": 0, "spool-append-midx": 0, "other": 0} {
		t.Setenv(FailpointEnv, v)
		if got := appendFailpoint(); got != want {
			t.Errorf("%q: %d, want %d", v, got, want)
		}
	}
}
